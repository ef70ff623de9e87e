"""tf.data input pipelines for pretraining (SPEC §5.3).

Training: files shuffled and interleaved, records shuffled, parsed, batched
with `drop_remainder`, prefetched. Every shuffle is seeded and the
interleave is deterministic, so a run's data order is a function of its
flags — which is what lets a resumed run reproduce an uninterrupted one, and
several workers reproduce one process (`AutoShardPolicy.DATA`).
Evaluation: records in file order, once.

With `masked_lm_budget > 0` masks are drawn afresh every time a record is
read, by the same whole-word n-gram algorithm `create_pretraining_data`
uses (the original parsed `token_boundary` for this but never implemented
it, and crashed).
"""

import random
from typing import List, Optional

import numpy as np
import tensorflow as tf

from albert.data.masking import MaskingConfig, MaskingVocabulary, mask_sequence
from albert.errors import InputError

MODEL_INPUT_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The pretraining record schema (SPEC §4.6)."""
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    predictions = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    return {
        "input_ids": sequence, "input_mask": sequence, "segment_ids": sequence,
        "token_boundary": sequence,
        "masked_lm_positions": predictions, "masked_lm_ids": predictions,
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def check_record_files(files: List[str], max_seq_length: int, max_predictions_per_seq: int) -> None:
    """Reads the first record of every file; raises InputError naming the problem.

    Catches what would otherwise surface as an opaque parse error inside the
    training loop: missing or empty files, corrupt records, and feature
    lengths that disagree with `--max_seq_length` / `--max_predictions_per_seq`.
    """
    expected = {name: spec.shape[0] for name, spec in
                feature_spec(max_seq_length, max_predictions_per_seq).items()}
    flag_of = {"input_ids": "max_seq_length", "masked_lm_positions": "max_predictions_per_seq"}
    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
            raise InputError(f"{path} is not a readable TFRecord file: {error.message}") from None
        if first is None:
            raise InputError(f"{path} holds no records")
        try:
            example = tf.train.Example.FromString(first.numpy())
        except Exception:  # protobuf's DecodeError
            raise InputError(f"{path} does not hold tf.train.Example records") from None
        features = example.features.feature
        for name, length in expected.items():
            if name == "token_boundary" and name not in features:
                continue  # data from before token_boundary existed
            if name not in features:
                raise InputError(f"{path}: records lack the feature {name!r}; is this "
                                 "create_pretraining_data output?")
            values = features[name]
            found = len(values.int64_list.value) or len(values.float_list.value)
            if found != length:
                hint = flag_of.get(name, "max_seq_length" if length == max_seq_length
                                   else "max_predictions_per_seq")
                raise InputError(f"{path}: {name} has {found} values but --{hint} gives {length}; "
                                 f"use the value the data was created with")


def _parse_batch(serialized, spec):
    examples = tf.io.parse_example(serialized, spec)
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in examples.items()}


def _rename_for_model(features):
    return {MODEL_INPUT_NAMES.get(name, name): value for name, value in features.items()}


class DynamicMasking:
    """Redraws masks from `token_boundary` (tf.numpy_function around `mask_sequence`)."""

    def __init__(self, masking: MaskingConfig, vocabulary: MaskingVocabulary, seed: int):
        self.masking = masking
        self.vocabulary = vocabulary
        self.seed = seed

    def remask(self, index, input_ids, input_mask, token_boundary, positions, ids, weights):
        """One record (numpy): undo its stored masks, draw new ones seeded by its stream index."""
        length = int(input_mask.sum())
        original = input_ids.copy()
        real = weights > 0
        original[positions[real]] = ids[real]
        rng = random.Random(f"albert-dynamic-masking/{self.seed}/{int(index)}")
        masked = mask_sequence(original[:length].tolist(), token_boundary[:length].astype(bool).tolist(),
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

    def _remask_batch(self, indices, *arrays):
        rows = [self.remask(index, *(array[row] for array in arrays))
                for row, index in enumerate(indices)]
        return tuple(np.stack(column) for column in zip(*rows))

    def __call__(self, indices, features):
        names = ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
        outputs = tf.numpy_function(
            self._remask_batch,
            [indices, features["input_ids"], features["input_mask"], features["token_boundary"],
             features["masked_lm_positions"], features["masked_lm_ids"],
             features["masked_lm_weights"]],
            [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
        features = dict(features)
        for name, value in zip(names, outputs):
            value.set_shape(features[name].shape)
            features[name] = value
        return indices, features


def pretraining_dataset(files: List[str], max_seq_length: int, max_predictions_per_seq: int,
                        batch_size: int, is_training: bool, seed: int = 12345,
                        shuffle_buffer_size: int = 100, cycle_length: int = 4,
                        dynamic_masking: Optional[DynamicMasking] = None,
                        num_shards: int = 1, shard_index: int = 0) -> tf.data.Dataset:
    """Batches of model inputs and labels from pretraining TFRecords.

    With `num_shards > 1` (one shard per worker) every worker reads the same
    seeded record stream and parses only every `num_shards`-th record, so the
    workers' batches of step i together form exactly the batch of step i of
    a single process reading with `batch_size * num_shards`.
    """
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    if is_training:
        dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files))
        dataset = dataset.repeat()
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.interleave(tf.data.TFRecordDataset,
                                     cycle_length=min(cycle_length, len(files)),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed + 1, reshuffle_each_iteration=True)
    else:
        dataset = tf.data.TFRecordDataset(files)
    # The position in the (global) record stream seeds dynamic masks.
    dataset = dataset.enumerate()
    if num_shards > 1:
        dataset = dataset.shard(num_shards, shard_index)
    # Parsing whole batches is several times cheaper than record by record.
    dataset = dataset.batch(batch_size, drop_remainder=is_training)
    dataset = dataset.map(lambda indices, records: (indices, _parse_batch(records, spec)),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if dynamic_masking is not None:
        dataset = dataset.map(dynamic_masking, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.map(lambda indices, features: _rename_for_model(features))
    return dataset.prefetch(tf.data.AUTOTUNE)
