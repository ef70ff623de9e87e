"""Sentence(-pair) classification and regression: the original's GLUE head on ALBERT."""

import keras
from keras import ops

from albert.config import load_config
from albert.modeling.configured_model import EncoderWithHead
from albert.modeling.dropout import SeededDropout
from albert.modeling.encoder import AlbertEncoder


@keras.saving.register_keras_serializable(package="albert")
class AlbertClassifierHead(keras.layers.Layer):
    """Dropout on the pooled output, then `logits = x · output_weightsᵀ + output_bias`.

    `output_weights` is stored `[num_labels, H]` and `output_bias`
    `[num_labels]`, as the original creates them at the root scope; the
    weights start from a truncated normal with stddev 0.02 whatever the
    config's `initializer_range` (the original hard-codes it).

    Args:
      num_labels: outputs (1 for regression).
      hidden_size: H.
      dropout_rate: dropout on the pooled output in training (the original: 0.1).
    """

    def __init__(self, num_labels, hidden_size, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.hidden_size = hidden_size
        self.dropout_rate = dropout_rate
        self.dropout = SeededDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        if self.built:
            return
        self.output_weights = self.add_weight(
            shape=(self.num_labels, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02), name="output_weights")
        self.output_bias = self.add_weight(shape=(self.num_labels,), initializer="zeros",
                                           name="output_bias")
        self.built = True

    def call(self, pooled_output, training=False, dropout_seeds=None):
        pooled_output = self.dropout(pooled_output, seeds=dropout_seeds, training=training)
        weights = ops.cast(self.output_weights, pooled_output.dtype)
        logits = ops.matmul(pooled_output, ops.transpose(weights))
        return ops.cast(logits + ops.cast(self.output_bias, logits.dtype), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, hidden_size=self.hidden_size,
                      dropout_rate=self.dropout_rate)
        return config


@keras.saving.register_keras_serializable(package="albert")
class AlbertClassifier(EncoderWithHead):
    """ALBERT with the original's GLUE head (`output_weights`, `output_bias`).

    Inputs: the encoder's dict. Outputs: the encoder's dict plus `logits`
    `[B, num_labels]` (float32). Classification takes the softmax of the
    logits; regression (STS-B, `num_labels=1`) uses the logit as the score.

    Args:
      config: an `AlbertConfig`, a dict of its JSON keys, or a JSON file path.
      num_labels: number of classes (1 for regression).
      dropout_rate: the head's dropout (the original: 0.1 whatever the config).

    Example:
        model = AlbertClassifier(config, num_labels=3)
        logits = model(features, training=False)["logits"]
    """

    #: the head's table in albert.checkpoints.naming.HEADS
    head_name = "classifier"

    def __init__(self, config, num_labels, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        config = load_config(config)
        self.albert_config = config
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.encoder = AlbertEncoder(config, dtype=self.dtype_policy, name="encoder")
        self.head = AlbertClassifierHead(num_labels, config.hidden_size, dropout_rate,
                                         dtype=self.dtype_policy, name="classifier")
        self.seed_generator = keras.random.SeedGenerator() if dropout_rate > 0 else None
        self.build()

    def head_dimensions(self) -> dict:
        return {"C": self.num_labels}

    def call(self, inputs, training=False, logits_only=False):
        """`logits_only`: `logits` and `pooled_output` alone, with the encoder's
        `pooled_only` saving (the same logits, for inference)."""
        outputs = dict(self.encoder(inputs, training=training, pooled_only=logits_only))
        outputs["logits"] = self.head(
            outputs["pooled_output"], training=training,
            dropout_seeds=self.head_dropout_seeds(inputs, training, self.dropout_rate))
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, dropout_rate=self.dropout_rate)
        return config
