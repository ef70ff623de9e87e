import numpy as np
import pytest

from albert.checkpoints import model_weights, write_checkpoint
from albert.errors import CheckpointMismatchError
from albert.modeling import AlbertEncoder, AlbertPretrainer
from albert.checkpoints.group0 import group0_candidates
from albert.pretraining_data.schema import DataContract
from albert.tasks.pretraining import PretrainingTask
from conftest import tiny_config


def _task(config, path, **flags):
    data = DataContract(files=[], record_counts=[], max_seq_length=16, max_predictions_per_seq=2,
                        has_token_boundary=True)
    return PretrainingTask(config=config, train_data=data, init_checkpoint=path, **flags)


def _group0_checkpoint(tmp_path, output_format="tf1", **changes):
    shallow = tiny_config(**changes)
    weights = model_weights(AlbertPretrainer(shallow))
    write_checkpoint(weights, shallow, str(tmp_path / output_format), output_format)
    return weights, str(tmp_path / output_format)


@pytest.mark.parametrize("output_format", ["tf1", "hf", "keras", "model_garden", "keras_hub"])
def test_every_group_starts_from_group_0(tmp_path, output_format):
    """From a checkpoint of every format (Model Garden's holds no heads)."""
    weights, path = _group0_checkpoint(tmp_path, output_format, num_hidden_layers=2)
    deep = tiny_config(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=1)
    model = AlbertPretrainer(deep)
    _task(deep, path, init_from_group0=True).initialize(model)
    loaded = model_weights(model)
    source = "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"
    for group in range(3):
        name = source.replace("group_0/", f"group_{group}/", 1)
        np.testing.assert_array_equal(loaded[name], weights[source])
    if output_format != "model_garden":
        np.testing.assert_array_equal(loaded["cls/predictions/output_bias"],
                                      weights["cls/predictions/output_bias"])


def test_a_keras_hub_masked_lm_starts_the_encoder_and_the_masked_lm_head(tmp_path):
    """KerasHub's AlbertMaskedLM has no sentence-order head: that one starts afresh."""
    pytest.importorskip("keras_hub")
    config = tiny_config(num_hidden_layers=2)
    weights = model_weights(AlbertPretrainer(config))
    write_checkpoint(weights, config, str(tmp_path / "preset"), "keras_hub")
    model = AlbertPretrainer(config)
    fresh = model_weights(model)
    _task(config, str(tmp_path / "preset")).initialize(model)
    loaded = model_weights(model)
    for name, value in loaded.items():
        expected = fresh[name] if name.startswith("cls/seq_relationship") else weights[name]
        np.testing.assert_array_equal(value, expected, err_msg=name)


def test_partial_sharing_copies_start_from_the_all_shared_block(tmp_path):
    weights, path = _group0_checkpoint(tmp_path)
    config = tiny_config(num_hidden_layers=3, sharing_strategy="shared_attention")
    model = AlbertPretrainer(config)
    _task(config, path, init_from_group0=True).initialize(model)
    loaded = model_weights(model)
    prefix = "bert/encoder/transformer/group_0/inner_group_0"
    for layer in range(1, 4):
        np.testing.assert_array_equal(loaded[f"{prefix}/ffn_{layer}/LayerNorm/gamma"],
                                      weights[f"{prefix}/LayerNorm_1/gamma"])
        np.testing.assert_array_equal(loaded[f"{prefix}/ffn_{layer}/intermediate/dense/kernel"],
                                      weights[f"{prefix}/ffn_1/intermediate/dense/kernel"])


def test_rewrites_follow_the_original_order():
    assert group0_candidates("bert/encoder/transformer/group_2/inner_group_0/attention_1/self/query/kernel") == [
        "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"]
    assert group0_candidates("bert/encoder/transformer/group_0/inner_group_0/ffn_3/LayerNorm/beta") == [
        "bert/encoder/transformer/group_0/inner_group_0/ffn_1/LayerNorm/beta",
        "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/beta"]


def test_a_checkpoint_without_heads_initialises_the_backbone(tmp_path):
    config = tiny_config()
    encoder = AlbertEncoder(config)
    write_checkpoint(model_weights(encoder), config, str(tmp_path / "hf"), "hf")
    model = AlbertPretrainer(config)
    _task(config, str(tmp_path / "hf")).initialize(model)   # format detected: hf
    np.testing.assert_array_equal(model_weights(model)["bert/pooler/dense/kernel"],
                                  model_weights(encoder)["bert/pooler/dense/kernel"])


def test_group0_mismatch_is_reported(tmp_path):
    _, path = _group0_checkpoint(tmp_path)
    wider = tiny_config(num_hidden_layers=4, num_hidden_groups=2, intermediate_size=40)
    with pytest.raises(CheckpointMismatchError, match="mis-shaped"):
        _task(wider, path, init_from_group0=True).initialize(AlbertPretrainer(wider))
