"""In training, the feed-forward block keeps only the GELU's input for the backward pass."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

from albert.modeling.activations import get_activation
from albert.modeling.feed_forward import AlbertFeedForward
from albert.modeling.recompute import activation_then_dense


def _values_and_gradients(training):
    dense = keras.layers.Dense(16)
    dense.build((None, None, 64))
    dense.set_weights([np.random.default_rng(2).normal(size=(64, 16)).astype("float32"),
                       np.random.default_rng(3).normal(size=16).astype("float32")])
    x = tf.constant(np.random.default_rng(0).normal(size=(2, 8, 64)).astype("float32") * 3)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = activation_then_dense(get_activation("gelu"), dense, x, training)
        loss = tf.reduce_sum(y * tf.cos(y))
    return [y.numpy()] + [g.numpy() for g in tape.gradient(loss, [x, dense.kernel, dense.bias])]


def test_the_training_activation_and_dense_give_the_same_values_and_gradients():
    # training=False: the two layers differentiated as written.
    kept, plain = _values_and_gradients(True), _values_and_gradients(False)
    np.testing.assert_array_equal(kept[0], plain[0])
    for kept_gradient, plain_gradient in zip(kept[1:], plain[1:]):
        np.testing.assert_allclose(kept_gradient, plain_gradient, rtol=1e-5, atol=1e-5)


def test_the_feed_forward_block_trains_and_infers_alike():
    block = AlbertFeedForward(hidden_size=8, intermediate_size=32)
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 8)).astype("float32"))
    np.testing.assert_array_equal(block(x, training=True).numpy(), block(x, training=False).numpy())


# Peak bytes of TensorFlow's CPU allocator over one forward and backward pass of a block
# applied four times: what each application keeps waits for the backward pass.
_PEAK = """
import json, os, sys
os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
import albert
import tensorflow as tf
from albert.modeling.feed_forward import AlbertFeedForward
block = AlbertFeedForward(hidden_size=64, intermediate_size=4096)
x = tf.random.normal([8, 64, 64])
block(x)
@tf.function
def step(training):
    with tf.GradientTape() as tape:
        hidden = x
        for _ in range(4):
            hidden = block(hidden, training=training)
        loss = tf.reduce_sum(hidden)
    return tape.gradient(loss, block.trainable_variables)
peaks = {}
for training in (False, True):  # training=False: differentiated as written
    step(training)
    base = tf.config.experimental.get_memory_info("CPU:0")["current"]
    tf.config.experimental.reset_memory_stats("CPU:0")
    step(training)
    peaks[str(training)] = tf.config.experimental.get_memory_info("CPU:0")["peak"] - base
print(json.dumps(peaks))
"""


def test_the_training_block_keeps_fewer_copies_of_the_inner_activation():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    output = subprocess.run([sys.executable, "-c", _PEAK], capture_output=True, text=True,
                            check=True, cwd=repo, env=dict(os.environ, PYTHONPATH=repo),
                            timeout=300).stdout
    peaks = json.loads(output.strip().splitlines()[-1])
    inner = 8 * 64 * 4096 * 4  # one [batch, length, intermediate] float32 tensor: 8 MiB
    saved = peaks["False"] - peaks["True"]
    assert saved >= 4 * inner, (
        f"the training block saves {saved / 2 ** 20:.1f} MiB of the backward pass's peak "
        f"({peaks}); expected at least one inner activation per application "
        f"({4 * inner / 2 ** 20:.0f} MiB)")
