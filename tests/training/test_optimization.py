"""ALBERT's AdamW / LAMB against a NumPy transcription of the original update rule."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert.checkpoints import model_variables
from albert.modeling import AlbertPretrainer, pretraining_losses
from albert.training.optimization import (AlbertAdamW, AlbertLamb, AlbertLearningRateSchedule,
                                          create_optimizer)
from conftest import random_inputs, tiny_config

EXCLUDE = ("LayerNorm", "layer_norm", "bias")


def reference_schedule(step, lr, total, warmup, start=0, power=1.0):
    decayed = lr * (1 - min(step, total) / total) ** power
    if warmup and step - start < warmup:
        return lr * max(step - start, 0) / warmup
    return decayed


class NumpyReference:
    """The original optimizers, transcribed: no bias correction, wd inside the update.

    With `bias_correction`, Hugging Face's / Keras's bias-corrected AdamW
    (`m / (sqrt(v) + eps)` scaled by `sqrt(1 - 0.999^t) / (1 - 0.9^t)`), with the
    same decay, exclusions and clip.
    """

    def __init__(self, weights, lamb, schedule_args, bias_correction=False):
        self.bias_correction = bias_correction
        self.weights = {k: v.astype(np.float64) for k, v in weights.items()}
        self.m = {k: np.zeros_like(v) for k, v in self.weights.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.weights.items()}
        self.lamb, self.schedule_args, self.step = lamb, schedule_args, 0

    def apply(self, grads):
        grads = {k: g.astype(np.float64) for k, g in grads.items()}
        norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
        self.clipped = getattr(self, "clipped", 0) + (norm > 1.0)
        grads = {k: g * 1.0 / max(norm, 1.0) for k, g in grads.items()}
        lr = reference_schedule(self.step, *self.schedule_args)
        for name, g in grads.items():
            w = self.weights[name]
            self.m[name] = 0.9 * self.m[name] + 0.1 * g
            self.v[name] = 0.999 * self.v[name] + 0.001 * g ** 2
            update = self.m[name] / (np.sqrt(self.v[name]) + 1e-6)
            if self.bias_correction:
                t = self.step + 1
                update = update * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            excluded = any(re.search(p, name) for p in EXCLUDE)
            if not excluded:
                update = update + 0.01 * w
            ratio = 1.0
            if self.lamb and not excluded:
                w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            self.weights[name] = w - ratio * lr * update
        self.step += 1


@pytest.mark.parametrize("optimizer_name, bias_correction",
                         [("adamw", False), ("lamb", False), ("adamw", True), ("lamb", True)])
def test_updates_match_the_original_rule_over_several_steps(optimizer_name, bias_correction):
    config = tiny_config(hidden_dropout_prob=0.0)
    model = AlbertPretrainer(config)
    names = model_variables(model)
    path_to_name = {variable.path: name for name, variable in names.items()}
    schedule_args = (0.01, 20, 3, 0, 1.0)
    optimizer = create_optimizer(optimizer_name, *schedule_args, variable_names=path_to_name,
                                 bias_correction=bias_correction)
    reference = NumpyReference({n: np.array(v.numpy()) for n, v in names.items()},
                               optimizer_name == "lamb", schedule_args, bias_correction)
    variables = [names[n] for n in names]
    labels_rng = np.random.default_rng(0)
    for step in range(6):
        inputs = random_inputs(config, seed=step)
        features = dict(inputs, masked_lm_ids=labels_rng.integers(0, 99, (3, 4)).astype("int32"),
                        masked_lm_weights=np.ones((3, 4), "float32"),
                        next_sentence_labels=labels_rng.integers(0, 2, (3, 1)).astype("int32"))
        with tf.GradientTape() as tape:
            loss = pretraining_losses(model(inputs, training=True), features)["loss"]
        grads = tape.gradient(loss, variables)
        dense = {n: tf.convert_to_tensor(g).numpy() for n, g in zip(names, grads)}
        reference.apply(dense)
        optimizer.apply(grads, variables)
    for name, variable in names.items():
        np.testing.assert_allclose(variable.numpy(), reference.weights[name], atol=1e-6, rtol=0,
                                   err_msg=name)
    assert reference.clipped, "no step exercised the clip"


def test_exclusions_use_the_original_names():
    model = AlbertPretrainer(tiny_config())
    names = model_variables(model)
    optimizer = AlbertLamb(variable_names={v.path: n for n, v in names.items()})
    optimizer.build(list(names.values()))
    decayed = {n for n, v in names.items() if optimizer._decay[optimizer._get_variable_index(v)]}
    assert "bert/embeddings/word_embeddings" in decayed
    assert "cls/seq_relationship/output_weights" in decayed
    assert "bert/pooler/dense/kernel" in decayed
    assert "cls/predictions/output_bias" not in decayed
    assert "bert/embeddings/LayerNorm/gamma" not in decayed
    assert not any("LayerNorm" in n or n.endswith("bias") for n in decayed)


def test_schedule_values_at_the_warmup_boundaries():
    schedule = AlbertLearningRateSchedule(0.00176, num_train_steps=125000, num_warmup_steps=3125)
    values = {step: float(schedule(step)) for step in (0, 1, 3124, 3125, 3126, 125000, 200000)}
    assert values[0] == 0.0  # the first step has learning rate 0
    assert values[1] == pytest.approx(0.00176 / 3125)
    assert values[3124] == pytest.approx(0.00176 * 3124 / 3125)
    # The jump at the end of warm-up: decay is computed from step 0.
    assert values[3125] == pytest.approx(0.00176 * (1 - 3125 / 125000), rel=1e-6)
    assert values[3126] == pytest.approx(0.00176 * (1 - 3126 / 125000), rel=1e-6)
    assert values[125000] == 0.0 and values[200000] == 0.0
    shifted = AlbertLearningRateSchedule(1.0, 100, 10, start_warmup_step=5, poly_power=2.0)
    for step in (0, 3, 5, 9, 14, 15, 16, 50):
        assert float(shifted(step)) == pytest.approx(reference_schedule(step, 1.0, 100, 10, 5, 2.0))
    assert float(shifted(2)) == 0.0  # the original would go negative before start_warmup_step


def test_adamw_converges_like_the_original_test():
    # The original's optimization test: lr 0.2, w0 = [0.1, -0.2, -0.1], MSE to
    # [0.4, 0.2, -0.5], 100 steps -> within 1e-2 of the target.
    w = keras.Variable(np.array([0.1, -0.2, -0.1], "float32"))
    target = np.array([0.4, 0.2, -0.5], "float32")
    optimizer = AlbertAdamW(learning_rate=0.2, weight_decay_rate=0.0)
    for _ in range(100):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(w.value - target))
        optimizer.apply([tape.gradient(loss, w.value)], [w])
    np.testing.assert_allclose(w.numpy(), target, atol=1e-2)


def _ancestors(op):
    """Every op `op` waits for, through its inputs and its control inputs."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen


@pytest.mark.parametrize("optimizer_class", [AlbertAdamW, AlbertLamb])
def test_in_a_graph_each_variable_is_updated_after_the_previous_one(optimizer_class):
    """Unordered, TensorFlow's executor runs the updates' elementwise steps breadth first and
    holds every variable's temporaries at once; chained, it holds one variable's. The chain
    must not change the numbers: the graph's update equals the eager one."""
    rng = np.random.default_rng(0)
    shapes = [(6, 5), (5,), (4, 3, 2)]
    initial = [rng.normal(size=shape).astype("float32") for shape in shapes]
    gradients = [tf.constant(rng.normal(size=shape).astype("float32")) for shape in shapes]
    results = []
    for mode in ("eager", "graph"):
        variables = [keras.Variable(value, name=f"w{index}") for index, value in enumerate(initial)]
        optimizer = optimizer_class(learning_rate=0.01)
        optimizer.build(variables)
        apply = lambda: optimizer.apply(gradients, variables)  # noqa: E731
        if mode == "graph":
            function = tf.function(apply)
            graph = function.get_concrete_function().graph
            function()
        else:
            apply()
        results.append([variable.numpy() for variable in variables])
    inside = {id(external): internal for external, internal in graph.captures}

    def handle_ops(variable, op_type):
        internal = inside[id(variable.value.handle)]
        return [op for op in graph.get_operations()
                if op.type == op_type and any(t is internal for t in op.inputs)]

    for previous, following in zip(variables, variables[1:]):
        update = handle_ops(previous, "AssignSubVariableOp")
        assert update, "no update of the variable in the graph"
        momentum, _ = optimizer.slots(following)
        for read in handle_ops(momentum, "ReadVariableOp"):
            assert set(update) <= _ancestors(read), (
                f"{following.name}'s update may start before {previous.name}'s has ended")
    for eager, graph_value in zip(*results):
        np.testing.assert_allclose(graph_value, eager, rtol=0, atol=1e-7)
