"""Pretraining features from TFRecord batches: parsing and dynamic masking.

`PretrainingParser(schema, dynamic_masking)` is the `parse` of the
pretraining task's input (`albert.training.inputs.TaskInput`): it parses a
batch of serialised records with the schema (`albert.pretraining_data.schema`), casts
int64 to int32 and names the model inputs (`input_word_ids`,
`input_type_ids`). `token_boundary` is parsed only for dynamic masking, as
the original did, so data without it trains.

With `masked_lm_budget > 0`, `DynamicMasking` draws masks afresh every time
a record is read, by the whole-word n-gram walk `create_pretraining_data`
uses, in TensorFlow ops on the stateless RNG seeded by the run's seed and the
record's position in the run's stream (`masking_ops`), so a record's masks do
not depend on the batch, the topology or a resume, and the pipeline runs
wherever TensorFlow runs, remote TPU input hosts included (the original
parsed `token_boundary` for this but never implemented it, and crashed).
"""

from typing import Optional

import tensorflow as tf

from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary
from albert.pretraining_data.masking_ops import MASKING_VERSION, mask_batch
from albert.pretraining_data.schema import PretrainingSchema

MODEL_INPUT_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def rename_for_model(features: dict) -> dict:
    return {MODEL_INPUT_NAMES.get(name, name): value for name, value in features.items()}


class DynamicMasking:
    """Redraws masks from `token_boundary`, seeded by each record's stream position."""

    version = MASKING_VERSION  # recorded in the run's data order

    def __init__(self, masking: MaskingConfig, vocabulary: MaskingVocabulary, seed: int):
        self.masking = masking
        self.vocabulary = vocabulary
        self.seed = seed

    def __call__(self, features: dict, stream_positions) -> dict:
        """A batch in TensorFlow ops: each row masked afresh, seeded by its stream position."""
        input_ids = features["input_ids"]
        size = tf.shape(input_ids)[1]
        predictions = self.masking.max_predictions_per_seq
        # Undo the stored masks: the stored labels go back to their positions (one_hot ignores
        # a position outside the sequence; a repeated position keeps its last label).
        stored = tf.one_hot(features["masked_lm_positions"], size, dtype=tf.int32) * tf.cast(
            features["masked_lm_weights"] > 0, tf.int32)[:, :, None]          # [B, P, S]
        slot = tf.range(1, predictions + 1)[None, :, None]
        last = tf.argmax(stored * slot, axis=1, output_type=tf.int32)           # [B, S]
        restored = tf.gather(features["masked_lm_ids"], last, batch_dims=1)
        original = tf.where(tf.reduce_sum(stored, axis=1) > 0, restored, input_ids)
        new_ids, masked = mask_batch(
            original, features["token_boundary"] > 0,
            tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1),
            self.seed, stream_positions, self.masking, self.vocabulary)
        # The masked positions in ascending order, padded to max_predictions_per_seq.
        columns = tf.range(size)[None, :]
        order = tf.sort(tf.concat([tf.where(masked, columns, 2 * size + columns),
                                   tf.fill([tf.shape(masked)[0], predictions], 4 * size)], 1),
                        axis=1)[:, :predictions]
        real = order < size
        new_positions = tf.where(real, order, 0)
        drawn = {"input_ids": new_ids, "masked_lm_positions": new_positions,
                 "masked_lm_ids": tf.where(real, tf.gather(original, new_positions,
                                                           batch_dims=1), 0),
                 "masked_lm_weights": tf.cast(real, tf.float32)}
        features = dict(features)
        for name, value in drawn.items():
            value.set_shape(features[name].shape)
            features[name] = value
        return features


class PretrainingParser:
    """`parse(records, positions) -> features` for pretraining records."""

    def __init__(self, schema: PretrainingSchema,
                 dynamic_masking: Optional[DynamicMasking] = None):
        self.spec = schema.tf_feature_spec(with_token_boundary=dynamic_masking is not None)
        self.dynamic_masking = dynamic_masking

    def __call__(self, records, positions) -> dict:
        parsed = tf.io.parse_example(records, self.spec)
        features = {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
                    for name, value in parsed.items()}
        if self.dynamic_masking is not None:
            features = self.dynamic_masking(features, positions)
            del features["token_boundary"]
        return rename_for_model(features)
