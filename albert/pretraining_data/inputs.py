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
implemented it, and crashed).
"""

import random
from typing import Optional

import numpy as np
import tensorflow as tf

from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary, mask_sequence
from albert.pretraining_data.schema import PretrainingSchema

MODEL_INPUT_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def rename_for_model(features: dict) -> dict:
    return {MODEL_INPUT_NAMES.get(name, name): value for name, value in features.items()}


class DynamicMasking:
    """Redraws masks from `token_boundary` (tf.numpy_function around `mask_sequence`)."""

    def __init__(self, masking: MaskingConfig, vocabulary: MaskingVocabulary, seed: int):
        self.masking = masking
        self.vocabulary = vocabulary
        self.seed = seed

    def remask(self, position, input_ids, input_mask, token_boundary, positions, ids, weights):
        """One record (numpy): undo its stored masks, draw new ones seeded by its stream position."""
        length = int(input_mask.sum())
        original = input_ids.copy()
        real = weights > 0
        original[positions[real]] = ids[real]
        rng = random.Random(f"albert-dynamic-masking/{self.seed}/{int(position)}")
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

    def _remask_batch(self, stream_positions, *arrays):
        rows = [self.remask(position, *(array[row] for array in arrays))
                for row, position in enumerate(stream_positions)]
        return tuple(np.stack(column) for column in zip(*rows))

    def __call__(self, features: dict, stream_positions) -> dict:
        names = ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
        outputs = tf.numpy_function(
            self._remask_batch,
            [stream_positions, features["input_ids"], features["input_mask"],
             features["token_boundary"], features["masked_lm_positions"],
             features["masked_lm_ids"], features["masked_lm_weights"]],
            [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
        features = dict(features)
        for name, value in zip(names, outputs):
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
