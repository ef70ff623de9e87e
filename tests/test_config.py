import glob
import json
import logging
import os

import pytest

from albert.config import AlbertConfig
from albert.errors import ConfigError
from albert.checkpoints.naming import block_scopes
from albert.modeling.sharing import group_of_layer, layer_groups, sharing_plan, used_groups
from conftest import REPO, tiny_config


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "configs", "*.json"))))
def test_shipped_configs_round_trip_byte_for_byte(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert AlbertConfig.from_json_file(path).to_json_string() == text


def test_original_extra_keys_and_allowed_unknown_keys_survive_a_round_trip():
    values = {"vocab_size": 30000, "net_structure_type": 0, "layers_to_keep": [],
              "gap_size": 0, "num_memory_blocks": 0, "my_experiment_tag": "x"}
    config = AlbertConfig.from_dict(values, allow_unknown_keys=True)
    assert config.extra == {"net_structure_type": 0, "layers_to_keep": [], "gap_size": 0,
                            "num_memory_blocks": 0, "my_experiment_tag": "x"}
    written = json.loads(config.to_json_string())
    for key, value in values.items():
        assert written[key] == value


def test_a_misspelled_key_is_rejected_naming_the_nearest_known_key(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({"vocab_size": 30000, "num_hiden_layers": 3, "gap_size": 0}))
    with pytest.raises(ConfigError, match=r"unknown config key 'num_hiden_layers' \(did you mean "
                                          r"'num_hidden_layers'\?\).*--allow_unknown_config_keys"):
        AlbertConfig.from_json_file(str(path))
    kept = AlbertConfig.from_json_file(str(path), allow_unknown_keys=True)
    assert kept.num_hidden_layers == 12 and kept.extra["num_hiden_layers"] == 3


def test_missing_keys_take_the_original_constructor_defaults():
    config = AlbertConfig.from_dict({"vocab_size": 30000})
    assert (config.hidden_size, config.num_attention_heads, config.intermediate_size,
            config.num_hidden_layers, config.embedding_size) == (4096, 64, 16384, 12, 128)
    assert config.net_structure_type == 0  # the original crashes when it is missing
    assert "sharing_strategy" not in json.loads(config.to_json_string())


def test_json_layout_is_sorted_two_space_with_trailing_newline():
    text = tiny_config().to_json_string()
    assert text.endswith("}\n")
    assert text.splitlines()[1].startswith('  "')
    keys = list(json.loads(text))
    assert keys == sorted(keys)


@pytest.mark.parametrize("changes, message", [
    ({"hidden_size": 30}, "not a multiple of num_attention_heads"),
    ({"num_hidden_groups": 4}, "cannot exceed num_hidden_layers"),
    ({"intermediate_size": 0}, "intermediate_size must be a positive integer"),
    ({"vocab_size": -5}, "vocab_size must be a positive integer"),
    ({"hidden_act": "swishy"}, "Unsupported activation"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be a probability"),
    ({"sharing_strategy": "everything"}, "sharing_strategy must be one of"),
    ({"sharing_strategy": "shared_ffn", "num_hidden_groups": 3}, "requires num_hidden_groups = 1"),
    ({"initializer_range": 0}, "initializer_range must be a positive number"),
])
def test_invalid_configs_are_rejected_with_a_clear_message(changes, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**changes)


def test_vocab_size_is_required():
    with pytest.raises(ConfigError, match="vocab_size is required"):
        AlbertConfig.from_dict({"hidden_size": 32})


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="Cannot read ALBERT config"):
        AlbertConfig.from_json_file(str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text('{"vocab_size": 10,')
    with pytest.raises(ConfigError, match="not valid JSON"):
        AlbertConfig.from_json_file(str(broken))
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"vocab_size": 10, "hidden_size": 30, "num_attention_heads": 4}')
    with pytest.raises(ConfigError, match=r"wrong.json: hidden_size \(30\)"):
        AlbertConfig.from_json_file(str(wrong))


@pytest.mark.parametrize("name, canonical", [
    ("gelu", "gelu"), ("GELU", "gelu"), ("gelu_new", "gelu"), ("relu", "relu"),
    ("Tanh", "tanh"), ("", "linear"), ("linear", "linear"), (None, "linear")])
def test_activation_names(name, canonical):
    assert tiny_config(hidden_act=name).activation == canonical


def test_group_routing_follows_the_original_expression():
    def groups(L, G):
        return list(layer_groups(tiny_config(num_hidden_layers=L, num_hidden_groups=G)))

    assert groups(12, 1) == [0] * 12
    assert groups(12, 2) == [0] * 6 + [1] * 6
    assert groups(12, 3) == [0] * 4 + [1] * 4 + [2] * 4
    assert groups(12, 12) == list(range(12))


def test_routing_quirk_for_22_layers_and_22_groups_is_kept_and_logged(caplog):
    config = tiny_config(num_hidden_layers=22, num_hidden_groups=22)
    assert group_of_layer(15, 22, 22) == 14  # int(15 / 22 * 22) == 14 in double precision
    assert group_of_layer(9, 18, 14, rule="huggingface") == 6  # int(9 / (18 / 14))
    assert group_of_layer(9, 18, 14) == 7
    assert 15 not in used_groups(config)
    with caplog.at_level(logging.WARNING, logger="albert"):
        plan = sharing_plan(config)
    assert "differs from floor" in caplog.text
    assert not any("group_15/" in block_scopes(block)[0] for block in plan.attention)
    assert len(plan.attention) == 21


def test_inner_groups_run_all_blocks_of_the_group_in_order():
    plan = sharing_plan(tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2))
    assert plan.schedule == ((0, 0), (1, 1), (0, 0), (1, 1), (2, 2), (3, 3), (2, 2), (3, 3))
    assert [block_scopes(block)[0].split("transformer/")[1] for block in plan.attention] == [
        "group_0/inner_group_0/attention_1", "group_0/inner_group_1/attention_1",
        "group_1/inner_group_0/attention_1", "group_1/inner_group_1/attention_1"]
