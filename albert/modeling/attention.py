"""The attention sub-block of a post-LayerNorm transformer block (steps 1-7 of a block)."""

import math

import keras
from keras import ops

from albert.modeling.dense_replay import project
from albert.modeling.dropout import SeededDropout, derive_seeds


def attention_bias_from_mask(input_mask, dtype):
    """Additive attention bias [B, 1, 1, S]: 0 for real keys, -10000 for padding.

    The original adds `(1 - mask) * -10000` to the scores of every head and
    query; padding queries are not masked.
    """
    mask = ops.cast(input_mask, dtype)
    return ((1.0 - mask) * -10000.0)[:, None, None, :]


@keras.saving.register_keras_serializable(package="albert")
class AlbertAttention(keras.layers.Layer):
    """Multi-head self-attention, output projection, residual and LayerNorm.

    Query, key, value and output kernels are stored 2-D (`[H, N*D]`,
    `[N*D, H]`) as in the original checkpoints. Scores are scaled by
    `1/sqrt(D)` after the product, as the original does; the mask enters as an
    additive bias from `attention_bias_from_mask`. Only matmul and reshape are
    used (no einsum), which keeps the layer convertible to TFLite.

    Args:
      hidden_size: model width (H).
      num_attention_heads: number of heads (N); H must be a multiple of N.
      attention_dropout_rate: dropout on attention probabilities.
      output_dropout_rate: dropout on the projected output (`hidden_dropout_prob`).
      initializer_range: stddev of the truncated-normal kernel initializer.

    Example:
        attention = AlbertAttention(hidden_size=768, num_attention_heads=12)
        output = attention(hidden_states, attention_bias_from_mask(mask, "float32"))
    """

    def __init__(self, hidden_size, num_attention_heads, attention_dropout_rate=0.0,
                 output_dropout_rate=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size {hidden_size} is not a multiple of num_attention_heads "
                f"{num_attention_heads}")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_dropout_rate = attention_dropout_rate
        self.output_dropout_rate = output_dropout_rate
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_attention_heads

        def dense(name):
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy, name=name)

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=self.dtype_policy, name="LayerNorm")
        self.attention_dropout = SeededDropout(attention_dropout_rate, dtype=self.dtype_policy)
        self.output_dropout = SeededDropout(output_dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        if self.built:
            return
        shape = (None, None, self.hidden_size)
        for layer in (self.query, self.key, self.value, self.output_dense, self.layer_norm):
            layer.build(shape)
        self.built = True

    def _split_heads(self, projected, sequence_length):
        # [B, S, N*D] -> [B, N, S, D]
        projected = ops.reshape(
            projected, (-1, sequence_length, self.num_attention_heads, self.head_size))
        return ops.transpose(projected, (0, 2, 1, 3))

    def call(self, hidden_states, attention_bias, training=False, dropout_seeds=None,
             query_states=None):
        """`query_states` (`[B, Q, H]`, default `hidden_states`): the positions whose outputs
        are wanted; they attend to every position of `hidden_states` and the result is
        `[B, Q, H]`. Passing `hidden_states[:, :1]` computes token 0's output alone, exactly
        as the full call computes it."""
        probability_seeds = output_seeds = None
        if dropout_seeds is not None:
            probability_seeds, output_seeds = (derive_seeds(dropout_seeds, site) for site in (0, 1))
        if query_states is None:
            query_states = hidden_states
        sequence_length = ops.shape(hidden_states)[1]
        query_length = ops.shape(query_states)[1]
        # `project` is `dense(x)` except in the shared-block loop (albert.modeling.block_loop).
        query = self._split_heads(project(self.query, query_states), query_length)
        key = self._split_heads(project(self.key, hidden_states), sequence_length)
        value = self._split_heads(project(self.value, hidden_states), sequence_length)

        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        scores = scores * (1.0 / math.sqrt(self.head_size))
        scores = scores + ops.cast(attention_bias, scores.dtype)
        probabilities = ops.softmax(scores, axis=-1)
        context = self.attention_dropout.then_matmul(               # [B, N, Q, D]
            probabilities, value, seeds=probability_seeds, training=training)
        context = ops.transpose(context, (0, 2, 1, 3))
        context = ops.reshape(context, (-1, query_length, self.hidden_size))
        attention_output = self.output_dropout(project(self.output_dense, context),
                                               seeds=output_seeds,
                                               training=training)
        return self.layer_norm(attention_output + query_states)

    def compute_output_shape(self, hidden_states_shape, attention_bias_shape=None,
                             query_states_shape=None):
        # One output per query position (every position unless `query_states` is given).
        return hidden_states_shape if query_states_shape is None else query_states_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            attention_dropout_rate=self.attention_dropout_rate,
            output_dropout_rate=self.output_dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
