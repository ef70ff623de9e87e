"""Word tagging (named entities, parts of speech): a linear layer on every position's output.

Hugging Face's `AlbertForTokenClassification` computes the same logits: dropout on the
encoder's sequence output, then `logits = x · output_weightsᵀ + output_bias` at each position.
The head's variables are the GLUE classifier's (`output_weights` `[num_labels, H]`,
`output_bias` `[num_labels]`, `classifier.weight` / `classifier.bias` in Hugging Face), applied
to every position instead of the pooled output.
"""

import keras

from albert.config import load_config
from albert.modeling.classifier import AlbertClassifierHead
from albert.modeling.configured_model import EncoderWithHead
from albert.modeling.encoder import AlbertEncoder


@keras.saving.register_keras_serializable(package="albert")
class AlbertTokenClassifier(EncoderWithHead):
    """ALBERT with a tag classifier at every position.

    Inputs: the encoder's dict. Outputs: the encoder's dict plus `logits` `[B, S, num_labels]`
    (float32).

    Args:
      config: an `AlbertConfig`, a dict of its JSON keys, or a JSON file path.
      num_labels: number of tags.
      dropout_rate: the head's dropout (Hugging Face's `classifier_dropout_prob`, 0.1).

    Example:
        model = AlbertTokenClassifier(config, num_labels=9)
        logits = model(features, training=False)["logits"]   # [B, S, 9]
    """

    #: the head's table in albert.checkpoints.naming.HEADS
    head_name = "token_classifier"

    def __init__(self, config, num_labels, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        config = load_config(config)
        self.albert_config = config
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.encoder = AlbertEncoder(config, dtype=self.dtype_policy, name="encoder")
        self.head = AlbertClassifierHead(num_labels, config.hidden_size, dropout_rate,
                                         dtype=self.dtype_policy, name="token_classifier")
        self.seed_generator = keras.random.SeedGenerator() if dropout_rate > 0 else None
        self.build()

    def head_dimensions(self) -> dict:
        return {"C": self.num_labels}

    def call(self, inputs, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        outputs["logits"] = self.head(
            outputs["sequence_output"], training=training,
            dropout_seeds=self.head_dropout_seeds(inputs, training, self.dropout_rate))
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, dropout_rate=self.dropout_rate)
        return config
