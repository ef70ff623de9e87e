"""Seeded dropout: its masks follow the definition bit for bit, and compile small.

The definition (albert.modeling.dropout): element i of example b is kept when
the top 24 bits of lowbias32(lowbias32(seed_b) + i * 0x9E3779B9), in wrapping
32-bit arithmetic, reach rate * 2^24. The reference below computes it in
NumPy uint32, independently of the layer's code.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from albert.modeling.dropout import (SeededDropout, _dropout, _dropout_recomputing_the_mask,
                                     dropout_keep_mask)


def _lowbias32(x):
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def _reference_mask(shape, seeds, rate):
    per_example = int(np.prod(shape[1:]))
    with np.errstate(over="ignore"):
        element = np.arange(per_example, dtype=np.uint32) * np.uint32(0x9E3779B9)
        key = _lowbias32(np.asarray(seeds, np.int32).view(np.uint32))
        bits = _lowbias32(key[:, None] + element[None, :])
    threshold = round(rate * (1 << 24))
    return (bits >> np.uint32(8) >= threshold).reshape(shape)


# (2, 32, 32) and (2, 4, 32, 32): axes of equal length, where a bias-add taken for a
# broadcasting add would mix them up.
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 6), (2, 3, 4, 5), (2, 32, 32), (2, 4, 32, 32)])
@pytest.mark.parametrize("graph", [False, True])
def test_masks_follow_the_definition_bit_for_bit(shape, graph):
    seeds = np.array([0, -1, 2**31 - 1][:shape[0]], np.int32)
    def mask(s):
        return dropout_keep_mask(shape, s, 0.3)

    ours = (tf.function(mask) if graph else mask)(tf.constant(seeds)).numpy()
    np.testing.assert_array_equal(ours, _reference_mask(shape, seeds, 0.3))


def test_masks_drop_about_the_rate():
    seeds = tf.range(4, dtype=tf.int32)
    kept = dropout_keep_mask((4, 64, 96), seeds, 0.1).numpy().mean()
    assert 0.88 < kept < 0.92


def test_the_compiled_mask_holds_no_per_element_constant():
    """No table of element indices is folded into the program: the module of a
    [B, 64, 96] mask holds constants of at most one dimension's length (a
    folded index table would be 6,144 elements per dropout site, per layer)."""
    shape = (2, 64, 96)
    function = tf.function(lambda seeds: dropout_keep_mask(shape, seeds, 0.1), jit_compile=True)
    seeds = tf.constant([5, 6], tf.int32)
    hlo = function.experimental_get_compiler_ir(seeds)(stage="hlo")
    constants = re.findall(r"= [a-z0-9]+\[([0-9,]*)\]\{?[0-9,]*\}? constant\(", hlo)
    largest = max((int(np.prod([int(d) for d in dims.split(",")])) if dims else 1)
                  for dims in constants)
    assert largest <= max(shape[1:]), largest
    np.testing.assert_array_equal(function(seeds).numpy(),
                                  _reference_mask(shape, [5, 6], 0.1))


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_the_recomputed_mask_gives_autodiffs_gradient(mode):
    """The TensorFlow path recomputes the mask in the backward pass; its output and
    gradient are those of differentiating the plain masked product."""
    x = tf.random.stateless_normal([3, 4, 16, 16], [1, 2])
    weights = tf.random.stateless_normal([3, 4, 16, 16], [3, 4])
    seeds = tf.constant([7, 8, 9], tf.int32)

    def value_and_gradient(recompute):
        with tf.GradientTape() as tape:
            tape.watch(x)
            if recompute:
                y = _dropout_recomputing_the_mask(x, seeds, 0.25)
            else:
                y = _dropout(x, dropout_keep_mask(x.shape, seeds, 0.25), 0.25)
            loss = tf.reduce_sum(weights * y)
        return y, tape.gradient(loss, x)

    run = {"eager": value_and_gradient, "graph": tf.function(value_and_gradient),
           "xla": tf.function(value_and_gradient, jit_compile=True)}[mode]
    ours, reference = run(True), run(False)
    np.testing.assert_array_equal(ours[0].numpy(), reference[0].numpy())
    np.testing.assert_allclose(ours[1].numpy(), reference[1].numpy(), rtol=1e-6, atol=0)
    assert (ours[1].numpy() == 0).mean() > 0.15  # the dropped elements get no gradient


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_dropout_then_matmul_gives_autodiffs_gradients(mode):
    """Attention's dropped probabilities times the values: the TensorFlow training path
    recomputes the dropped left operand in the backward pass; the product and both
    gradients are those of differentiating dropout followed by a plain product."""
    probabilities = tf.nn.softmax(tf.random.stateless_normal([3, 4, 16, 16], [1, 2]))
    values = tf.random.stateless_normal([3, 4, 16, 8], [3, 4])
    weights = tf.random.stateless_normal([3, 4, 16, 8], [5, 6])
    seeds = tf.constant([7, 8, 9], tf.int32)
    dropout = SeededDropout(0.25)

    def value_and_gradients(recompute):
        with tf.GradientTape() as tape:
            tape.watch([probabilities, values])
            if recompute:
                product = dropout.then_matmul(probabilities, values, seeds=seeds, training=True)
            else:
                product = tf.matmul(dropout(probabilities, seeds=seeds, training=True), values)
            loss = tf.reduce_sum(weights * product)
        return (product, *tape.gradient(loss, [probabilities, values]))

    run = {"eager": value_and_gradients, "graph": tf.function(value_and_gradients),
           "xla": tf.function(value_and_gradients, jit_compile=True)}[mode]
    ours, reference = run(True), run(False)
    for name, got, expected in zip(["product", "d probabilities", "d values"], ours, reference):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert (ours[1].numpy() == 0).mean() > 0.15  # the dropped elements get no gradient
    # Outside training, or at rate 0, it is the plain product.
    np.testing.assert_array_equal(dropout.then_matmul(probabilities, values).numpy(),
                                  tf.matmul(probabilities, values).numpy())
