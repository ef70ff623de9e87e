"""The feed-forward sub-block of a post-LayerNorm transformer block (steps 8-10 of a block)."""

import keras

from albert.modeling.activations import get_activation
from albert.modeling.dense_replay import project
from albert.modeling.dropout import SeededDropout
from albert.modeling.recompute import activation_then_dense


@keras.saving.register_keras_serializable(package="albert")
class AlbertFeedForward(keras.layers.Layer):
    """`LayerNorm(dropout(act(x W1 + b1) W2 + b2) + x)`.

    Args:
      hidden_size: model width (H).
      intermediate_size: inner width (I).
      activation: activation name of the config's `hidden_act` ("gelu" is the
        tanh approximation).
      dropout_rate: dropout on the output projection (`hidden_dropout_prob`).
      initializer_range: stddev of the truncated-normal kernel initializer.

    Example:
        ffn = AlbertFeedForward(hidden_size=768, intermediate_size=3072)
        output = ffn(attention_output)
    """

    def __init__(self, hidden_size, intermediate_size, activation="gelu", dropout_rate=0.0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self._activation_fn = get_activation(activation)

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.intermediate = keras.layers.Dense(
            intermediate_size, kernel_initializer=initializer, dtype=self.dtype_policy,
            name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=initializer, dtype=self.dtype_policy, name="output")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=self.dtype_policy, name="LayerNorm_1")
        self.dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        if self.built:
            return
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, hidden_states, training=False, dropout_seeds=None):
        # In training only the activation's input waits for the backward pass, which
        # recomputes the activation (albert.modeling.recompute).
        output = activation_then_dense(self._activation_fn, self.output_dense,
                                       project(self.intermediate, hidden_states), training)
        output = self.dropout(output, seeds=dropout_seeds, training=training)
        return self.layer_norm(output + hidden_states)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            activation=self.activation,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
