"""All-shared training in a while loop (one running sum of the shared block's gradient): the same
losses and gradients as the unrolled graph, dropout on; used only where it saves memory."""

import numpy as np
import pytest
import tensorflow as tf

from albert.checkpoints.keras_format import build_model
from albert.modeling import dense_replay
from albert.modeling import encoder as encoder_module
from albert.training.synthetic_batch import synthetic_batch
from conftest import tiny_config


def _encoder(model):
    return next(layer for layer in model._flatten_layers()
                if isinstance(layer, encoder_module.AlbertEncoder))


def _loss_and_gradients(model, batch):
    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = (tf.reduce_sum(tf.square(outputs["mlm_logits"]))
                    + tf.reduce_sum(outputs["sentence_order_logits"]))
        return loss, tape.gradient(loss, model.trainable_variables)
    return step(batch)


# Whole kernels are in the slow tier (21 s on 2 cores), to keep the default suite within
# 15 minutes; row blocks exercise the same loop with more pieces.
@pytest.mark.parametrize("piece_bytes", [
    pytest.param(dense_replay.KERNEL_GRADIENT_PIECE_BYTES, marks=pytest.mark.slow,
                 id="whole-kernels"),
    pytest.param(1, id="kernels-in-row-blocks")])
def test_the_loop_gives_the_unrolled_losses_and_gradients(monkeypatch, piece_bytes):
    """Also with every kernel gradient added into its sum one row at a time (as ALBERT-xxlarge's
    feed-forward kernels are, in blocks of 64 MiB)."""
    monkeypatch.setattr(encoder_module, "LOOP_FROM_PARTIAL_GRADIENT_BYTES", 0)
    monkeypatch.setattr(dense_replay, "KERNEL_GRADIENT_PIECE_BYTES", piece_bytes)
    blocks_added = []
    monkeypatch.setattr(tf.raw_ops, "InplaceAdd", lambda *args, _real=tf.raw_ops.InplaceAdd,
                        **kwargs: blocks_added.append(1) or _real(*args, **kwargs))
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=1, hidden_dropout_prob=0.1,
                         attention_probs_dropout_prob=0.1)
    model = build_model(config, "pretraining")
    batch = {name: tf.constant(value) for name, value in synthetic_batch(config, 4, 32, 5).items()}
    encoder = _encoder(model)
    looped = []
    monkeypatch.setattr(encoder, "_apply_in_loop", lambda *args, _real=encoder._apply_in_loop:
                        looped.append(1) or _real(*args))
    encoder.loop_shared_applications = False
    loss, unrolled = _loss_and_gradients(model, batch)
    assert not looped
    encoder.loop_shared_applications = True
    loop_loss, in_loop = _loss_and_gradients(model, batch)
    assert looped
    assert bool(blocks_added) == (piece_bytes == 1)
    assert float(loop_loss) == pytest.approx(float(loss), rel=1e-6)
    for variable, expected, found in zip(model.trainable_variables, unrolled, in_loop):
        # The key bias's gradient is 0 in exact arithmetic (softmax ignores a per-query
        # constant): both are rounding noise, compared on the scale of the largest gradient.
        scale = max(float(tf.reduce_max(tf.abs(g))) for g in unrolled)
        np.testing.assert_allclose(found, expected, rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=variable.path)


def test_small_models_stay_unrolled():
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=1)
    encoder = _encoder(build_model(config, "pretraining"))
    assert not encoder._runs_in_loop(training=True)
    assert not encoder._runs_in_loop(training=False)


# The recomputed and the eager variants are `slow` (CI runs them): the default suite keeps one.
@pytest.mark.parametrize("rematerialize,traced", [
    (False, True), pytest.param(True, True, marks=pytest.mark.slow),
    pytest.param(False, False, marks=pytest.mark.slow)],
    ids=["replayed", "recomputed", "replayed-eagerly"])
def test_every_output_of_the_loop_carries_its_gradient(monkeypatch, rematerialize, traced):
    """A loss on an inner layer's output (not only the last) and the pooled output: the loop's
    hand-written backward pass, replaying the kept projections or recomputing them
    (`--rematerialize`), in a tf.function or eagerly, gives the unrolled graph's gradients."""
    monkeypatch.setattr(encoder_module, "LOOP_FROM_PARTIAL_GRADIENT_BYTES", 0)
    config = tiny_config(num_hidden_layers=3, num_hidden_groups=1, hidden_dropout_prob=0.1,
                         attention_probs_dropout_prob=0.1)
    encoder = encoder_module.AlbertEncoder(config)
    batch = synthetic_batch(config, 3, 16, 3)
    inputs = {name: tf.constant(batch[name]) for name in encoder_module.INPUT_KEYS}
    inputs["dropout_seeds"] = tf.constant([3, 5, 7], tf.int32)
    weights = tf.random.stateless_normal([16, config.hidden_size], seed=[1, 2])

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            outputs = encoder(inputs, training=True)
            loss = (tf.reduce_sum(outputs["encoder_outputs"][1] * weights)
                    + tf.reduce_sum(tf.square(outputs["sequence_output"]))
                    + tf.reduce_sum(outputs["pooled_output"]))
        return loss, [tf.convert_to_tensor(gradient)
                      for gradient in tape.gradient(loss, encoder.trainable_variables)]

    encoder.loop_shared_applications = False
    loss, unrolled = step()
    encoder.loop_shared_applications = True
    encoder.rematerialize = rematerialize
    assert encoder._runs_in_loop(training=True)
    loop_loss, in_loop = (tf.function(step.python_function) if traced else step.python_function)()
    assert float(loop_loss) == pytest.approx(float(loss), rel=1e-6)
    scale = max(float(tf.reduce_max(tf.abs(g))) for g in unrolled)
    for variable, expected, found in zip(encoder.trainable_variables, unrolled, in_loop):
        np.testing.assert_allclose(found, expected, rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=variable.path)
