"""Pretraining features from TFRecord batches: parsing and dynamic masking.

`PretrainingParser(schema, dynamic_masking)` is the `parse` of the
pretraining task's input (`albert.training.inputs.TaskInput`): it parses a
batch of serialised records with the schema (`albert.pretraining_data.schema`), casts
int64 to int32 and names the model inputs (`input_word_ids`,
`input_type_ids`). `token_boundary` is parsed only for dynamic masking, as
the original did, so data without it trains.

With `masked_lm_budget > 0`, `DynamicMasking` draws masks afresh every time
a record is read, by the same whole-word n-gram algorithm
`create_pretraining_data` uses, seeded by the record's position in the
run's stream (the original parsed `token_boundary` for this but never
implemented it, and crashed). The masks are defined by `DynamicMasking.remask`
(Python's `random.Random` seeded with a text naming the run's seed and the
position, and `mask_sequence`); the input pipeline computes the same masks in
TensorFlow ops (`masking_ops`, `python_random`), so it runs wherever
TensorFlow runs, remote TPU input hosts included.
"""

import random
from typing import Optional

import numpy as np
import tensorflow as tf

from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary, mask_sequence
from albert.pretraining_data.masking_ops import mask_batch
from albert.pretraining_data.python_random import Generators
from albert.pretraining_data.schema import PretrainingSchema

SEED_TEXT_PREFIX = "albert-dynamic-masking"
MODEL_INPUT_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def rename_for_model(features: dict) -> dict:
    return {MODEL_INPUT_NAMES.get(name, name): value for name, value in features.items()}


class DynamicMasking:
    """Redraws masks from `token_boundary`, seeded by each record's stream position."""

    def __init__(self, masking: MaskingConfig, vocabulary: MaskingVocabulary, seed: int):
        self.masking = masking
        self.vocabulary = vocabulary
        self.seed = seed

    def seed_text(self, position) -> str:
        return f"{SEED_TEXT_PREFIX}/{self.seed}/{int(position)}"

    def remask(self, position, input_ids, input_mask, token_boundary, positions, ids, weights):
        """One record in NumPy: the definition of its masks (what `__call__` computes in ops).

        Undoes the stored masks, then masks the record again with a generator
        seeded by its stream position.
        """
        length = int(input_mask.sum())
        original = input_ids.copy()
        # A stored position outside the sequence is ignored; a repeated one keeps its last label.
        real = (weights > 0) & (positions >= 0) & (positions < len(input_ids))
        original[positions[real]] = ids[real]
        rng = random.Random(self.seed_text(position))
        masked = mask_sequence(original[:length].tolist(),
                               token_boundary[:length].astype(bool).tolist(),
                               rng, self.masking, self.vocabulary)
        size = self.masking.max_predictions_per_seq
        count = len(masked.masked_lm_positions)
        new_ids = original.copy()
        new_ids[:length] = masked.input_ids
        new_positions = np.zeros(size, np.int32)
        new_positions[:count] = masked.masked_lm_positions
        new_labels = np.zeros(size, np.int32)
        new_labels[:count] = masked.masked_lm_ids
        new_weights = np.zeros(size, np.float32)
        new_weights[:count] = 1.0
        return new_ids.astype(np.int32), new_positions, new_labels, new_weights

    def __call__(self, features: dict, stream_positions) -> dict:
        """A batch in TensorFlow ops: the masks of `remask` for every row."""
        input_ids = features["input_ids"]
        size = tf.shape(input_ids)[1]
        predictions = self.masking.max_predictions_per_seq
        # Undo the stored masks: the stored labels go back to their positions (as in `remask`:
        # one_hot ignores positions outside the sequence; a repeated position keeps its last).
        stored = tf.one_hot(features["masked_lm_positions"], size, dtype=tf.int32) * tf.cast(
            features["masked_lm_weights"] > 0, tf.int32)[:, :, None]          # [B, P, S]
        slot = tf.range(1, predictions + 1)[None, :, None]
        last = tf.argmax(stored * slot, axis=1, output_type=tf.int32)           # [B, S]
        restored = tf.gather(features["masked_lm_ids"], last, batch_dims=1)
        original = tf.where(tf.reduce_sum(stored, axis=1) > 0, restored, input_ids)
        texts = tf.strings.join([f"{SEED_TEXT_PREFIX}/{self.seed}/",
                                 tf.strings.as_string(tf.cast(stream_positions, tf.int64))])
        new_ids, masked = mask_batch(
            original, features["token_boundary"] > 0,
            tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1),
            Generators.seeded(texts), self.masking, self.vocabulary)
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
