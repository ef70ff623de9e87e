"""Pretraining heads: masked LM (tied decoder) and sentence-order prediction."""

import keras
from keras import ops

from albert.modeling.activations import get_activation


def gather_positions(sequence_output, positions):
    """Hidden states at `positions`: [B, S, H] x [B, P] -> [B, P, H].

    Flattens to [B*S, H] and gathers `position + b*S`, as the original does.
    """
    batch_size = ops.shape(positions)[0]
    sequence_length = ops.shape(sequence_output)[1]
    width = ops.shape(sequence_output)[2]
    offsets = ops.arange(batch_size, dtype="int32")[:, None] * sequence_length
    flat_positions = ops.reshape(ops.cast(positions, "int32") + offsets, (-1,))
    flat_states = ops.reshape(sequence_output, (-1, width))
    gathered = ops.take(flat_states, flat_positions, axis=0)
    return ops.reshape(gathered, (batch_size, -1, width))


@keras.saving.register_keras_serializable(package="albert")
class AlbertMaskedLMHead(keras.layers.Layer):
    """Masked-LM head: H -> E dense with activation, LayerNorm, tied decoder.

    Logits are computed only at `masked_lm_positions`:
    `LayerNorm(act(h W + b)) · word_embeddingsᵀ + output_bias`. The decoder
    weights are the encoder's `[V, E]` word table, passed in at call time, so
    the tie survives any save/load.

    Args:
      embedding_size: E, width of the transform output and the word table.
      vocab_size: V, size of `output_bias`.
      activation: activation name of the config's `hidden_act`.
      initializer_range: stddev of the truncated-normal kernel initializer.

    Example:
        head = AlbertMaskedLMHead(embedding_size=128, vocab_size=30000)
        logits = head(sequence_output, masked_lm_positions, encoder.get_embedding_table())
    """

    def __init__(self, embedding_size, vocab_size, activation="gelu", initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.embedding_size = embedding_size
        self.vocab_size = vocab_size
        self.activation = activation
        self.initializer_range = initializer_range
        self._activation_fn = get_activation(activation)
        self.dense = keras.layers.Dense(
            embedding_size,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=self.dtype_policy, name="LayerNorm")

    def build(self, hidden_size):
        if self.built:
            return
        self.dense.build((None, hidden_size))
        self.layer_norm.build((None, self.embedding_size))
        self.output_bias = self.add_weight(
            shape=(self.vocab_size,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        states = gather_positions(sequence_output, masked_lm_positions)   # [B, P, H]
        states = self.layer_norm(self._activation_fn(self.dense(states)))
        table = ops.cast(embedding_table, states.dtype)
        logits = _times_transposed(states, table) + ops.cast(self.output_bias, states.dtype)
        # Losses and softmax are computed in float32 even under mixed precision.
        return ops.cast(logits, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            embedding_size=self.embedding_size,
            vocab_size=self.vocab_size,
            activation=self.activation,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package="albert")
class AlbertSentenceOrderHead(keras.layers.Layer):
    """Sentence-order (or next-sentence) head on the pooled output; no dropout.

    `logits = pooled · output_weightsᵀ + output_bias` with `output_weights`
    stored `[2, H]` as in the original checkpoints (`cls/seq_relationship`).
    Label 0 = segments in order, 1 = swapped (or a random segment under NSP).

    Args:
      hidden_size: H.
      initializer_range: stddev of the truncated-normal weight initializer.
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        if self.built:
            return
        self.output_weights = self.add_weight(
            shape=(2, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            name="output_weights")
        self.output_bias = self.add_weight(shape=(2,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, pooled_output):
        logits = ops.matmul(pooled_output, ops.transpose(ops.cast(self.output_weights, pooled_output.dtype)))
        return ops.cast(logits + ops.cast(self.output_bias, logits.dtype), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config


def _times_transposed(states, table):
    """`states @ table^T` (`[..., E]` by `[V, E]`), the tied decoder's logits.

    On TensorFlow, as one product with the table transposed inside it: its gradient for the
    table is then formed as `[V, E]` directly. Written as a product with `transpose(table)`,
    the gradient is formed as `[E, V]` and then transposed, two copies of the table's size
    alive at once (117 MiB each at BERT-large's vocabulary and width, where the backward pass
    begins, at its peak). The same products either way.
    """
    if keras.backend.backend() != "tensorflow":
        return ops.matmul(states, ops.transpose(table))
    import tensorflow as tf  # inside: the Keras backend may be another one

    rows = tf.reshape(states, [-1, tf.shape(states)[-1]])
    logits = tf.matmul(rows, table, transpose_b=True)
    logits = tf.reshape(logits, tf.concat([tf.shape(states)[:-1], tf.shape(table)[:1]], 0))
    logits.set_shape(states.shape[:-1].concatenate(table.shape[:1]))
    return logits
