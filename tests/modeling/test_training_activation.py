"""In training, the GELU and the layer norms keep only their inputs for the backward pass."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from albert.modeling.activations import get_activation
from albert.modeling.feed_forward import AlbertFeedForward
from albert.modeling.recompute import keeping_only_input


def test_the_training_gelu_gives_the_same_values_and_gradients():
    x = tf.constant(np.random.default_rng(0).normal(size=(16, 64)).astype("float32") * 3)
    results = []
    gelu = get_activation("gelu")
    for function in (gelu, keeping_only_input(gelu, training=True)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = function(x)
            loss = tf.reduce_sum(y * tf.cos(y))
        results.append((y.numpy(), tape.gradient(loss, x).numpy()))
    (plain_y, plain_grad), (kept_y, kept_grad) = results
    np.testing.assert_array_equal(kept_y, plain_y)
    np.testing.assert_allclose(kept_grad, plain_grad, rtol=1e-5, atol=1e-6)


def test_the_feed_forward_block_trains_and_infers_alike():
    block = AlbertFeedForward(hidden_size=8, intermediate_size=32)
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 8)).astype("float32"))
    np.testing.assert_array_equal(block(x, training=True).numpy(), block(x, training=False).numpy())


# Peak bytes of TensorFlow's CPU allocator over one forward and backward pass of a block
# applied four times: what each application keeps waits for the backward pass.
_PEAK = """
import json, os, sys
os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
import tensorflow as tf
from albert.modeling.feed_forward import AlbertFeedForward
from albert.modeling.recompute import keeping_only_input
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
for training in (False, True):  # training=False: GELU differentiated as written
    step(training)
    base = tf.config.experimental.get_memory_info("CPU:0")["current"]
    tf.config.experimental.reset_memory_stats("CPU:0")
    step(training)
    peaks[str(training)] = tf.config.experimental.get_memory_info("CPU:0")["peak"] - base
print(json.dumps(peaks))
"""


def test_the_training_gelu_keeps_fewer_copies_of_the_inner_activation():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    output = subprocess.run([sys.executable, "-c", _PEAK], capture_output=True, text=True,
                            check=True, cwd=repo, env=dict(os.environ, PYTHONPATH=repo),
                            timeout=300).stdout
    peaks = json.loads(output.strip().splitlines()[-1])
    inner = 8 * 64 * 4096 * 4  # one [batch, length, intermediate] float32 tensor: 8 MiB
    saved = peaks["False"] - peaks["True"]
    assert saved >= 4 * inner, (
        f"the training GELU saves {saved / 2 ** 20:.1f} MiB of the backward pass's peak "
        f"({peaks}); expected at least one inner activation per application "
        f"({4 * inner / 2 ** 20:.0f} MiB)")
