"""Training checkpoints: the original's content only, peers read them, pruning, the best copy."""

import re

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from albert import io
from albert.checkpoints import model_variables, model_weights, read_checkpoint
from albert.checkpoints.hf import hf_config_dict
from albert.checkpoints.naming import weight_names
from albert.modeling import AlbertPretrainer
from albert.training.checkpointing import (TrainingCheckpoints, checkpoint_variables,
                                           extra_state_variables)
from albert.training.loop import variable_names_for
from albert.training.optimization import AlbertLossScaleOptimizer, create_optimizer
from conftest import tiny_config


def _model_and_optimizer(seed=0, dropout=0.1, loss_scale=False):
    import keras

    keras.utils.set_random_seed(seed)
    model = AlbertPretrainer(tiny_config(hidden_dropout_prob=dropout,
                                         attention_probs_dropout_prob=dropout))
    optimizer = create_optimizer("lamb", 0.01, 100, 10, variable_names=variable_names_for(model))
    if loss_scale:
        optimizer = AlbertLossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _stored(path):
    return tf.train.load_checkpoint(path).get_variable_to_shape_map()


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_checkpoint_holds_exactly_the_original_content(tmp_path, dropout):
    model, optimizer = _model_and_optimizer(dropout=dropout, loss_scale=True)
    checkpoints = TrainingCheckpoints(str(tmp_path))
    checkpoints.save(7, model, optimizer)
    canonical = set(model_variables(model))
    expected = canonical | {f"{n}/adam_{s}" for n in canonical for s in "mv"} | {"global_step"}
    assert set(_stored(str(tmp_path / "model.ckpt-7"))) == expected
    extra = extra_state_variables(model, optimizer)
    # The loss-scale wrapper's own state (dynamic scale, step counter, ...)
    # and the model's fallback seed generator (only with dropout).
    assert sorted(v.path.split("/")[-1] for v in extra["optimizer"]) == [
        "dynamic_scale", "iteration", "learning_rate", "step_counter"]
    assert [v.path.split("/")[-1] for v in extra["model"]] == (
        ["seed_generator_state"] if dropout else [])
    assert (tmp_path / "training_state-7.json").exists()


def test_restore_brings_back_every_variable(tmp_path):
    model, optimizer = _model_and_optimizer(loss_scale=True)
    for variable in optimizer.variables:
        variable.assign(np.full(variable.shape, 0.5, variable.dtype) if variable.shape else 7)
    checkpoints = TrainingCheckpoints(str(tmp_path))
    checkpoints.save(7, model, optimizer)
    fresh_model, fresh_optimizer = _model_and_optimizer(seed=1, loss_scale=True)
    checkpoints.restore(7, fresh_model, fresh_optimizer)
    old = dict(checkpoint_variables(model, optimizer))
    for owner, variables in extra_state_variables(model, optimizer).items():
        old.update({f"{owner}/{i}": v for i, v in enumerate(variables)})
    new = dict(checkpoint_variables(fresh_model, fresh_optimizer))
    for owner, variables in extra_state_variables(fresh_model, fresh_optimizer).items():
        new.update({f"{owner}/{i}": v for i, v in enumerate(variables)})
    assert set(old) == set(new)
    for name in old:
        np.testing.assert_array_equal(np.asarray(new[name].numpy()), np.asarray(old[name].numpy()),
                                      err_msg=name)


def _original_init_from_checkpoint(prefix, names_and_shapes):
    """The original's warm start: a TF1 graph of the model's variables, mapped by exact name."""
    graph = tf.Graph()
    with graph.as_default():
        variables = {name: tf.compat.v1.get_variable(name, shape=shape, dtype=tf.float32)
                     for name, shape in names_and_shapes.items()}
        in_checkpoint = {name for name, _ in tf.train.list_variables(prefix)}
        # get_assignment_map_from_checkpoint: every model variable found by name.
        assignment = {name: name for name in variables if name in in_checkpoint}
        unmatched = sorted(set(variables) - set(assignment))
        tf.compat.v1.train.init_from_checkpoint(prefix, assignment)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return {name: session.run(v) for name, v in variables.items()}, unmatched


def _huggingface_4x_tf_loader(model, prefix):
    """The name logic of transformers 4.x `load_tf_weights_in_albert`, applied to a checkpoint.

    Every stored name is rewritten (module/ stripped, ffn_1 -> ffn, bert -> albert,
    attention_1 -> attention, transform/ dropped, LayerNorm_1 -> full_layer_layer_norm,
    LayerNorm -> attention/LayerNorm, ...), optimizer slots and global_step are
    skipped, and the rest is walked attribute by attribute into the PyTorch
    model. An unknown path segment is skipped *within* the walk, so a name
    that maps to nothing ends on a module and fails on `.shape` — the crash
    extra training state used to cause.
    """
    rewrites = [("module/", ""), ("ffn_1", "ffn"), ("bert/", "albert/"),
                ("attention_1", "attention"), ("transform/", ""),
                ("LayerNorm_1", "full_layer_layer_norm"), ("LayerNorm", "attention/LayerNorm"),
                ("transformer/", ""), ("intermediate/dense/", ""),
                ("ffn/intermediate/output/dense/", "ffn_output/"), ("/output/", "/"),
                ("/self/", "/"), ("pooler/dense", "pooler"), ("cls/predictions", "predictions"),
                ("predictions/attention", "predictions"), ("embeddings/attention", "embeddings"),
                ("inner_group_", "albert_layers/"), ("group_", "albert_layer_groups/")]
    loaded = {}
    reader = tf.train.load_checkpoint(prefix)
    for original, _ in tf.train.list_variables(prefix):
        name = original
        for old, new in rewrites:
            name = name.replace(old, new)
        if len(name.split("/")) == 1 and ("output_bias" in name or "output_weights" in name):
            name = "classifier/" + name
        if "seq_relationship" in name:
            name = name.replace("seq_relationship/output_", "sop_classifier/classifier/")
            name = name.replace("weights", "weight")
        parts = name.split("/")
        if any(skip in parts for skip in ("adam_m", "adam_v", "AdamWeightDecayOptimizer",
                                          "AdamWeightDecayOptimizer_1", "global_step")):
            continue
        pointer = model
        for part in parts:
            pieces = re.split(r"_(\d+)", part) if re.fullmatch(r"[A-Za-z]+_\d+", part) else [part]
            if pieces[0] in ("kernel", "gamma", "output_weights"):
                pointer = getattr(pointer, "weight")
            elif pieces[0] in ("output_bias", "beta"):
                pointer = getattr(pointer, "bias")
            elif pieces[0] == "squad":
                pointer = getattr(pointer, "classifier")
            else:
                try:
                    pointer = getattr(pointer, pieces[0])
                except AttributeError:
                    continue
            if len(pieces) >= 2:
                pointer = pointer[int(pieces[1])]
        array = reader.get_tensor(original)
        if part[-11:] == "_embeddings":
            pointer = getattr(pointer, "weight")
        elif part == "kernel":
            array = np.transpose(array)
        assert tuple(pointer.shape) == array.shape, (original, pointer.shape, array.shape)
        pointer.data = torch.from_numpy(array)
        loaded[original] = array
    return loaded


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_peers_read_every_checkpoint_the_loop_writes(tmp_path, dropout):
    model, optimizer = _model_and_optimizer(dropout=dropout, loss_scale=True)
    checkpoints = TrainingCheckpoints(str(tmp_path))
    checkpoints.save(3, model, optimizer)
    checkpoints.copy_to_best(3)
    weights = model_weights(model)
    config = tiny_config(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    for name in ("model.ckpt-3", "model.ckpt-best"):
        prefix = str(tmp_path / name)
        values, unmatched = _original_init_from_checkpoint(
            prefix, {row.original: row.shape for row in weight_names(config)})
        assert unmatched == []
        for original, value in weights.items():
            np.testing.assert_array_equal(values[original], value)
        torch_model = transformers.AlbertForPreTraining(
            transformers.AlbertConfig(**hf_config_dict(config, with_heads=True)))
        loaded = _huggingface_4x_tf_loader(torch_model, prefix)
        assert set(loaded) == set(weights)
        our_weights, _ = read_checkpoint(prefix, "tf1", config)
        assert set(our_weights) == set(weights)


def test_keep_checkpoint_max_keeps_the_newest_and_never_the_protected(tmp_path):
    model, optimizer = _model_and_optimizer()
    checkpoints = TrainingCheckpoints(str(tmp_path), keep_checkpoint_max=5)
    for step in range(10, 80, 10):
        checkpoints.save(step, model, optimizer)
        checkpoints.prune()
        assert checkpoints.steps() == list(range(10, step + 10, 10))[-5:]
    assert sorted(p.name for p in tmp_path.glob("*.index")) == [
        f"model.ckpt-{s}.index" for s in (30, 40, 50, 60, 70)]
    assert sorted(p.name for p in tmp_path.glob("training_state-*")) == [
        f"training_state-{s}.json" for s in (30, 40, 50, 60, 70)]
    checkpoints.keep_checkpoint_max = 2
    checkpoints.prune(protected=[30])
    assert checkpoints.steps() == [30, 60, 70]
    checkpoints.keep_checkpoint_max = 0   # keeps all
    checkpoints.save(80, model, optimizer)
    assert checkpoints.prune() == [] and checkpoints.steps() == [30, 60, 70, 80]
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_an_interrupted_best_copy_is_detected(tmp_path):
    model, optimizer = _model_and_optimizer()
    checkpoints = TrainingCheckpoints(str(tmp_path))
    checkpoints.save(10, model, optimizer)
    checkpoints.copy_to_best(10)
    assert checkpoints.best_is_copy_of(10)
    model.encoder.pooler.kernel.assign(model.encoder.pooler.kernel * 2)
    checkpoints.save(20, model, optimizer)
    assert not checkpoints.best_is_copy_of(20)
    # A kill between the data and the index rename: new data, old index, and
    # the copy's marker still there.
    original_remove = io.remove

    def die_on_marker_removal(path):
        if path.endswith(".copying"):
            raise KeyboardInterrupt
        original_remove(path)

    io.remove = die_on_marker_removal
    try:
        with pytest.raises(KeyboardInterrupt):
            checkpoints.copy_to_best(20)
    finally:
        io.remove = original_remove
    assert not checkpoints.best_is_copy_of(20) and not checkpoints.best_is_copy_of(10)
    checkpoints.copy_to_best(20)
    assert checkpoints.best_is_copy_of(20)
