"""Word, token-type and absolute position embeddings at width E."""

import keras
from keras import ops

from albert.errors import InputError
from albert.modeling.dropout import SeededDropout


@keras.saving.register_keras_serializable(package="albert")
class AlbertEmbeddings(keras.layers.Layer):
    """Sum of word, token-type and position embeddings, LayerNorm, dropout.

    All three tables have width `embedding_size` (E). The word table doubles as
    the tied masked-LM decoder. Positions are learned and absolute; a sequence
    longer than `max_position_embeddings` is an error.

    Args:
      vocab_size: rows of the word table (V).
      embedding_size: width of every table (E).
      max_position_embeddings: rows of the position table (P).
      type_vocab_size: rows of the token-type table (T).
      dropout_rate: dropout applied after the LayerNorm (`hidden_dropout_prob`); its
        masks come from the per-example `dropout_seeds` given at call time.
      initializer_range: stddev of the truncated-normal initializer.

    Example:
        layer = AlbertEmbeddings(vocab_size=30000, embedding_size=128,
                                 max_position_embeddings=512, type_vocab_size=2)
        embedded = layer(word_ids, type_ids)   # [B, S, 128]
    """

    def __init__(self, vocab_size, embedding_size, max_position_embeddings, type_vocab_size,
                 dropout_rate=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, embedding_size, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="word_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, embedding_size, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="token_type_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=self.dtype_policy, name="LayerNorm")
        self.dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        if self.built:
            return
        self.word_embeddings.build()
        self.token_type_embeddings.build()
        self.position_embeddings = self.add_weight(
            shape=(self.max_position_embeddings, self.embedding_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            name="position_embeddings")
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=False, dropout_seeds=None):
        sequence_length = ops.shape(input_word_ids)[1]
        if isinstance(sequence_length, int) and sequence_length > self.max_position_embeddings:
            raise InputError(
                f"Sequence length {sequence_length} exceeds max_position_embeddings "
                f"{self.max_position_embeddings}; shorten the input (e.g. --max_seq_length).")
        if keras.backend.backend() == "tensorflow":
            # The lookup's index arithmetic in int64: TensorFlow's int32 kernels
            # on a GPU work in host memory (see albert.modeling.dropout).
            input_word_ids = ops.cast(input_word_ids, "int64")
        embedded = self.word_embeddings(input_word_ids)
        # The token-type table has a handful of rows: a one-hot product (as the
        # original's TPU path and Model Garden do) gives the same values as a
        # lookup, and a dense gradient instead of thousands of sparse rows
        # summed into two.
        type_one_hot = ops.one_hot(input_type_ids, self.type_vocab_size, dtype=embedded.dtype)
        table = ops.cast(self.token_type_embeddings.embeddings, embedded.dtype)
        embedded = embedded + ops.matmul(type_one_hot, table)
        positions = ops.cast(self.position_embeddings[:sequence_length], embedded.dtype)
        embedded = embedded + positions[None, :, :]
        embedded = self.layer_norm(embedded)
        return self.dropout(embedded, seeds=dropout_seeds, training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.embedding_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
