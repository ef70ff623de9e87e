"""The pretraining model: encoder + masked-LM head + sentence-order head."""

import keras

from albert.config import load_config
from albert.errors import InputError
from albert.modeling.configured_model import ConfiguredModel
from albert.modeling.encoder import AlbertEncoder
from albert.modeling.heads import AlbertMaskedLMHead, AlbertSentenceOrderHead


@keras.saving.register_keras_serializable(package="albert")
class AlbertPretrainer(ConfiguredModel):
    """ALBERT with its pretraining heads.

    Inputs: the encoder's dict (`input_word_ids`, `input_mask`,
    `input_type_ids`) plus `masked_lm_positions` int32 `[B, P]`.

    Outputs: the encoder's dict plus `mlm_logits` `[B, P, V]` (logits at the
    masked positions only, float32) and `sentence_order_logits` `[B, 2]`.
    `albert.modeling.pretraining_losses(outputs, features)` gives the original's losses.

    Args:
      config: an `AlbertConfig`, a dict of its JSON keys, or a JSON file path.

    Example:
        model = AlbertPretrainer(config)
        outputs = model(features, training=True)
        losses = albert.modeling.pretraining_losses(outputs, features)
    """

    #: the head's table in albert.checkpoints.naming.HEADS
    head_name = "pretraining"

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        config = load_config(config)
        self.albert_config = config
        self.encoder = AlbertEncoder(config, dtype=self.dtype_policy, name="encoder")
        self.masked_lm = AlbertMaskedLMHead(
            embedding_size=config.embedding_size,
            vocab_size=config.vocab_size,
            activation=config.hidden_act,
            initializer_range=config.initializer_range,
            dtype=self.dtype_policy,
            name="predictions")
        self.sentence_order = AlbertSentenceOrderHead(
            hidden_size=config.hidden_size,
            initializer_range=config.initializer_range,
            dtype=self.dtype_policy,
            name="seq_relationship")
        self.build()

    def head_dimensions(self) -> dict:
        return {}

    def build(self, input_shape=None):
        if self.built:
            return
        self.masked_lm.build(self.albert_config.hidden_size)
        self.sentence_order.build()
        self.built = True

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict) or "masked_lm_positions" not in inputs:
            raise InputError("AlbertPretrainer expects a dict with 'masked_lm_positions' "
                             "besides the encoder inputs")
        outputs = dict(self.encoder(inputs, training=training))
        outputs["mlm_logits"] = self.masked_lm(
            outputs["sequence_output"], inputs["masked_lm_positions"],
            self.encoder.get_embedding_table())
        outputs["sentence_order_logits"] = self.sentence_order(outputs["pooled_output"])
        return outputs
