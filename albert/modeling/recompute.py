"""Elementwise chains that keep only their input for the backward pass, in training.

Differentiated as written, every operation of a chain keeps its own operands for the
backward pass. For the tanh GELU (seven operations on `[batch, length, intermediate]`) that
is several copies of the widest activation per layer application, held until the backward
pass reaches it (at ALBERT-large, batch 8 x 64, 0.23 GiB of a step's 1.76 GiB; the layer
norms, wrapped the same way, saved nothing measurable). Wrapped here, the chain keeps its
input only and the backward pass runs it again
from that input: the forward values are the same, and so are the gradients (the same
operations differentiated; TensorFlow's graph optimiser may fold the unwrapped chain
differently, so they can differ in the last bits). The cost is one more pass over an
elementwise chain, small beside a layer's matrix products.
"""

import keras


def keeping_only_input(function, training):
    """`function` (one tensor in, one out) as it is outside training; in training, the same
    function recomputed in the backward pass (TensorFlow backend; other backends: as is)."""
    if not training or keras.backend.backend() != "tensorflow":
        return function
    import tensorflow as tf  # inside: the Keras backend may be another one

    return tf.recompute_grad(function)
