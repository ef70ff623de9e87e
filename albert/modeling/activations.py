"""The activations an ALBERT config can name, as Keras 3 functions."""

import keras

from albert.config import canonical_activation


def gelu(x):
    """GELU, tanh approximation: the original's "gelu" (Hugging Face "gelu_new")."""
    return keras.activations.gelu(x, approximate=True)


_ACTIVATIONS = {
    "gelu": gelu,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "linear": keras.activations.linear,
}


def get_activation(name):
    """Returns the function for a config's `hidden_act` (case-insensitive)."""
    return _ACTIVATIONS[canonical_activation(name)]


def get_training_activation(name):
    """The same function, keeping only its input for the backward pass.

    The tanh GELU is a chain of seven elementwise operations; differentiated
    as written, each keeps its own operand for the backward pass, so a
    feed-forward block holds about five extra copies of its widest activation
    ([batch, length, intermediate_size]; at ALBERT-xxlarge, batch 8 x 64
    tokens, 1.9 GiB over 12 layers). Here the backward pass recomputes the
    chain from the kept input instead: the forward values are the same, the
    gradient the same operations' (rounding aside, as TensorFlow's graph
    optimizer may fold the chain differently), at the cost of one more pass
    over an elementwise chain, small beside the block's two matrix products.
    """
    function = get_activation(name)
    if keras.backend.backend() != "tensorflow" or function is keras.activations.linear:
        return function
    import tensorflow as tf

    return tf.recompute_grad(function)
