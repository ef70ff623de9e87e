import os

import numpy as np
import pytest
import tensorflow as tf

from albert.checkpoints import (check_weights, load_into_model, model_weights, read_checkpoint,
                                write_checkpoint)
from albert.checkpoints.naming import weight_names
from albert.checkpoints.tf1 import read_tf1, resolve_checkpoint_prefix, write_tf1
from albert.errors import CheckpointMismatchError, InputError
from albert.modeling import AlbertEncoder, AlbertPretrainer
from conftest import encoder_inputs, random_inputs, tiny_config

BLOCK = "bert/encoder/transformer/group_0/inner_group_0"
# The original's variable inventory, spelled out: the 32 variables of a released (G = 1, K = 1) checkpoint.
RELEASED_NAMES = [
    "bert/embeddings/word_embeddings", "bert/embeddings/token_type_embeddings",
    "bert/embeddings/position_embeddings", "bert/embeddings/LayerNorm/beta",
    "bert/embeddings/LayerNorm/gamma", "bert/encoder/embedding_hidden_mapping_in/kernel",
    "bert/encoder/embedding_hidden_mapping_in/bias",
    *[f"{BLOCK}/attention_1/self/{p}/{v}" for p in ("query", "key", "value") for v in ("kernel", "bias")],
    f"{BLOCK}/attention_1/output/dense/kernel", f"{BLOCK}/attention_1/output/dense/bias",
    f"{BLOCK}/LayerNorm/beta", f"{BLOCK}/LayerNorm/gamma",
    f"{BLOCK}/ffn_1/intermediate/dense/kernel", f"{BLOCK}/ffn_1/intermediate/dense/bias",
    f"{BLOCK}/ffn_1/intermediate/output/dense/kernel", f"{BLOCK}/ffn_1/intermediate/output/dense/bias",
    f"{BLOCK}/LayerNorm_1/beta", f"{BLOCK}/LayerNorm_1/gamma",
    "bert/pooler/dense/kernel", "bert/pooler/dense/bias",
    "cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/beta", "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/output_bias", "cls/seq_relationship/output_weights",
    "cls/seq_relationship/output_bias",
]


def _original_style_checkpoint(path, config, seed=0, prefix="", with_training_state=True):
    """A checkpoint written the way the original's TF1 code writes one.

    Variables are created by name in a TF1 graph and saved with a
    `tf.compat.v1.train.Saver`, with Adam slots and `global_step` as in a
    training run; `prefix="module/"` gives the TF-Hub layout.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    values = {row.original: rng.normal(0, 0.05, row.shape).astype("float32")
              for row in weight_names(config)}
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, value in values.items():
            variables.append(tf.compat.v1.get_variable(prefix + name, initializer=value))
            if with_training_state:
                for slot in ("adam_m", "adam_v"):
                    variables.append(tf.compat.v1.get_variable(
                        f"{prefix}{name}/{slot}", initializer=np.zeros_like(value)))
        if with_training_state:
            variables.append(tf.compat.v1.get_variable(
                prefix + "global_step", initializer=np.int64(1234)))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, path, write_meta_graph=False)
    return values


def test_name_table_gives_exactly_the_released_checkpoint_names():
    names = [row.original for row in weight_names(tiny_config())]
    assert sorted(names) == sorted(RELEASED_NAMES)


def test_groups_and_inner_groups_name_every_block():
    config = tiny_config(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2)
    names = {row.original for row in weight_names(config)}
    for group in range(3):
        for inner in range(2):
            assert (f"bert/encoder/transformer/group_{group}/inner_group_{inner}/"
                    "attention_1/self/query/kernel") in names


def test_tf1_to_ours_to_tf1_is_bit_exact(tmp_path):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    original = _original_style_checkpoint(str(tmp_path / "in" / "model.ckpt-1000"), config)
    model = AlbertPretrainer(config)
    load_into_model(model, str(tmp_path / "in" / "model.ckpt-1000"), "tf1")
    write_checkpoint(model_weights(model), config, str(tmp_path / "out"), "tf1")
    reader = tf.train.load_checkpoint(str(tmp_path / "out" / "model.ckpt-best"))
    stored = reader.get_variable_to_shape_map()
    assert set(stored) == set(original) | {"global_step"}
    for name, value in original.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)
        assert reader.get_tensor(name).dtype == np.float32


def test_written_checkpoint_loads_with_the_originals_init_from_checkpoint(tmp_path):
    config = tiny_config()
    model = AlbertPretrainer(config)
    write_checkpoint(model_weights(model), config, str(tmp_path), "tf1")
    expected = model_weights(model)
    graph = tf.Graph()
    with graph.as_default():
        variables = {name: tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.float32)
                     for name, value in expected.items()}
        tf.compat.v1.train.init_from_checkpoint(str(tmp_path / "model.ckpt-best"),
                                                {"bert/": "bert/", "cls/": "cls/"})
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            loaded = session.run(variables)
    for name, value in expected.items():
        np.testing.assert_array_equal(loaded[name], value)


def test_tf_hub_module_layout_and_training_state_are_handled(tmp_path):
    config = tiny_config()
    module_dir = tmp_path / "hub_module"
    original = _original_style_checkpoint(str(module_dir / "variables" / "variables"), config,
                                          prefix="module/")
    weights, _ = read_checkpoint(str(module_dir), "tf1", config)
    assert set(weights) == set(original)
    for name in original:
        np.testing.assert_array_equal(weights[name], original[name])


@pytest.mark.parametrize("given", ["prefix", "index_file", "directory"])
def test_checkpoint_path_forms(tmp_path, given):
    config = tiny_config()
    prefix = str(tmp_path / "model.ckpt-best")
    _original_style_checkpoint(prefix, config, with_training_state=False)
    path = {"prefix": prefix, "index_file": prefix + ".index", "directory": str(tmp_path)}[given]
    assert resolve_checkpoint_prefix(path) == prefix


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="No checkpoint"):
        read_tf1(str(tmp_path / "nothing-here"))


def test_checkpoint_for_another_config_lists_every_problem(tmp_path):
    config = tiny_config()
    values = {row.original: np.zeros(row.shape, "float32") for row in weight_names(config)}
    del values["bert/pooler/dense/bias"]
    values["bert/encoder/transformer/group_1/inner_group_0/LayerNorm/beta"] = np.zeros(32, "float32")
    values["bert/embeddings/word_embeddings"] = np.zeros((30000, 16), "float32")
    write_tf1(values, str(tmp_path / "bad"))
    model = AlbertPretrainer(config)
    before = model_weights(model)
    with pytest.raises(CheckpointMismatchError) as error:
        load_into_model(model, str(tmp_path / "bad"), "tf1")
    message = str(error.value)
    assert "missing (1):\n    bert/pooler/dense/bias" in message
    assert "unexpected (1):\n    bert/encoder/transformer/group_1/inner_group_0/LayerNorm/beta" in message
    assert "bert/embeddings/word_embeddings: checkpoint [30000, 16], config [99, 16]" in message
    # Nothing was loaded: no partial initialisation.
    after = model_weights(model)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name])


def test_partial_heads_are_rejected_and_absent_heads_are_allowed():
    config = tiny_config()
    backbone = {row.original: np.zeros(row.shape, "float32")
                for row in weight_names(config, include_heads=False)}
    assert set(check_weights(dict(backbone), config, "x")) == set(backbone)
    partial = dict(backbone, **{"cls/predictions/output_bias": np.zeros(99, "float32")})
    with pytest.raises(CheckpointMismatchError, match="only some of the MLM/SOP head"):
        check_weights(partial, config, "x")
    with pytest.raises(CheckpointMismatchError, match="cls/seq_relationship/output_weights"):
        check_weights(dict(backbone), config, "x", heads="required")


def test_an_encoder_loads_from_a_pretraining_checkpoint_and_skips_task_heads(tmp_path):
    config = tiny_config()
    values = _original_style_checkpoint(str(tmp_path / "glue" / "model.ckpt-5"), config)
    graph_values = dict(values, output_weights=np.zeros((3, 32), "float32"),
                        output_bias=np.zeros(3, "float32"))
    write_tf1(graph_values, str(tmp_path / "finetuned"))
    encoder = AlbertEncoder(config)
    load_into_model(encoder, str(tmp_path / "finetuned"), "tf1")
    loaded = model_weights(encoder)
    np.testing.assert_array_equal(loaded["bert/pooler/dense/kernel"], values["bert/pooler/dense/kernel"])
    outputs = encoder(encoder_inputs(random_inputs(config)))
    assert np.isfinite(np.asarray(outputs["pooled_output"])).all()


def test_object_based_checkpoint_is_not_mistaken_for_tf1(tmp_path):
    variable = tf.Variable(1.0)
    path = tf.train.Checkpoint(v=variable).write(str(tmp_path / "obj"))
    with pytest.raises(CheckpointMismatchError, match="object-based TF2 checkpoint"):
        read_tf1(path)
    assert os.path.exists(path + ".index")
