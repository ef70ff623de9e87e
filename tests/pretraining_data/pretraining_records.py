"""Reading pretraining TFRecords back for the tests, with the package's one schema."""

import numpy as np
import tensorflow as tf

from albert.pretraining_data.schema import PretrainingSchema


def read_records(paths, max_seq_length, max_predictions_per_seq):
    """Every record parsed with tf.io.parse_single_example, as numpy dicts."""
    spec = PretrainingSchema(max_seq_length, max_predictions_per_seq).tf_feature_spec()
    records = []
    for raw in tf.data.TFRecordDataset(paths):
        parsed = tf.io.parse_single_example(raw, spec)
        records.append({key: value.numpy() for key, value in parsed.items()})
    return records


def replacement_counts(records, mask_id):
    counts = {"mask": 0, "kept": 0, "random": 0}
    for record in records:
        real = record["masked_lm_weights"] > 0
        shown = record["input_ids"][record["masked_lm_positions"][real]]
        original = record["masked_lm_ids"][real]
        counts["mask"] += int(np.sum(shown == mask_id))
        counts["kept"] += int(np.sum((shown != mask_id) & (shown == original)))
        counts["random"] += int(np.sum((shown != mask_id) & (shown != original)))
    return counts


def fills_budget(record, masked_lm_prob, max_predictions_per_seq):
    """Whether the masked count equals min(max_predictions, max(1, round(len * prob))).

    The count never exceeds the budget. It can fall short: like the original,
    masking shrinks a drawn n-gram only when it exceeds the budget, not when
    it overlaps words already masked, so late candidates can all be skipped.
    """
    length = int(record["input_mask"].sum())
    budget = min(max_predictions_per_seq, max(1, int(round(length * masked_lm_prob))))
    count = int((record["masked_lm_weights"] > 0).sum())
    assert count <= budget
    return count == budget


MASK_FEATURES = ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def redraw(dynamic, records, positions, batch_size=512):
    """The records with masks drawn by `dynamic` (albert.pretraining_data.inputs.DynamicMasking)
    as the input pipeline draws them, record i at stream position positions[i]."""
    names = MASK_FEATURES + ("input_mask", "token_boundary")
    draw = tf.function(dynamic.__call__, reduce_retracing=True)  # eager loops are slow
    redrawn = []
    for start in range(0, len(records), batch_size):
        rows = records[start:start + batch_size]
        features = {name: tf.constant(np.stack([r[name] for r in rows]).astype(
            np.float32 if name == "masked_lm_weights" else np.int32)) for name in names}
        drawn = draw(features, tf.constant(positions[start:start + batch_size], tf.int64))
        for row, record in enumerate(rows):
            redrawn.append(dict(record, **{name: drawn[name][row].numpy()
                                           for name in MASK_FEATURES}))
    return redrawn


def original_ids(record):
    """The record's token ids before its masks (the stored labels put back)."""
    ids = record["input_ids"].copy()
    real = record["masked_lm_weights"] > 0
    ids[record["masked_lm_positions"][real]] = record["masked_lm_ids"][real]
    return ids
