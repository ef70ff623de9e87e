"""Multiple choice (RACE): one score per option from the pooled output, softmax over options."""

import keras
from keras import ops

from albert.config import load_config
from albert.modeling.classifier import AlbertClassifierHead
from albert.modeling.configured_model import EncoderWithHead
from albert.modeling.dropout import DROPOUT_SEEDS, HEAD_DROPOUT_SITE, call_seeds, derive_seeds
from albert.modeling.encoder import INPUT_KEYS, AlbertEncoder


@keras.saving.register_keras_serializable(package="albert")
class AlbertMultipleChoice(EncoderWithHead):
    """ALBERT with the original RACE head.

    Each option's sequence (`[CLS] article [SEP] question+option [SEP]`) goes
    through the encoder on its own; its pooled output, after dropout in
    training, is scored by `output_weights [1, H]` and `output_bias [1]`
    (root-scope names, as the original); the scores of an example's options
    are its logits, and the softmax over them picks the answer.

    Inputs: the encoder's dict with `[B, num_choices, S]` int32 tensors (and,
    in training, `dropout_seeds` `[B]`). Outputs: `logits` `[B, num_choices]`
    (float32) and the encoder's outputs for the `B · num_choices` sequences.

    Args:
      config: an `AlbertConfig`, a dict of its JSON keys, or a JSON file path.
      num_choices: options per example (RACE: 4).
      dropout_rate: the head's dropout (the original's `--dropout_prob`, 0.1).

    Example:
        model = AlbertMultipleChoice(config, num_choices=4)
        probabilities = keras.ops.softmax(model(features)["logits"])
    """

    #: the head's table in albert.checkpoints.naming.HEADS
    head_name = "multiple_choice"

    def __init__(self, config, num_choices=4, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        config = load_config(config)
        self.albert_config = config
        self.num_choices = num_choices
        self.dropout_rate = dropout_rate
        self.encoder = AlbertEncoder(config, dtype=self.dtype_policy, name="encoder")
        self.head = AlbertClassifierHead(1, config.hidden_size, dropout_rate,
                                         dtype=self.dtype_policy, name="multiple_choice")
        self.uses_dropout = dropout_rate > 0 or self.encoder.uses_dropout
        self.seed_generator = keras.random.SeedGenerator() if self.uses_dropout else None
        self.build()

    def call(self, inputs, training=False, logits_only=False):
        """`logits_only`: `logits` and `pooled_output` alone, with the encoder's
        `pooled_only` saving (the same logits, for inference)."""
        ids = inputs["input_word_ids"]
        batch, length = ops.shape(ids)[0], ops.shape(ids)[-1]
        rows = {}
        for key in INPUT_KEYS:
            value = inputs.get(key)
            if value is not None:
                rows[key] = ops.reshape(value, (-1, length))
        row_seeds = None
        if training and self.uses_dropout:
            # Each option gets seeds of its own, derived from its example's.
            seeds = call_seeds(inputs, batch, self.seed_generator)
            row_seeds = ops.reshape(ops.stack([derive_seeds(seeds, choice)
                                               for choice in range(self.num_choices)], axis=1),
                                    (-1,))
            rows[DROPOUT_SEEDS] = row_seeds
        outputs = dict(self.encoder(rows, training=training, pooled_only=logits_only))
        head_seeds = (derive_seeds(row_seeds, HEAD_DROPOUT_SITE)
                      if row_seeds is not None and self.dropout_rate > 0 else None)
        scores = self.head(outputs["pooled_output"], training=training, dropout_seeds=head_seeds)
        outputs["logits"] = ops.reshape(scores, (-1, self.num_choices))
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(num_choices=self.num_choices, dropout_rate=self.dropout_rate)
        return config
