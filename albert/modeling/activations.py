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

