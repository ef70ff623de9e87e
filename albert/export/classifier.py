"""A fine-tuned task model as a SavedModel with the original's serving contract.

`serving_default` takes a batch of serialised `tf.train.Example` strings
(shape `[None]`) holding `input_ids`, `input_mask`, `segment_ids` (int64 ×
`max_seq_length`, or × `num_choices · max_seq_length` for multiple choice,
the options' sequences one after the other), as the original's export did,
and returns `probabilities` (`[B, num_labels]` or `[B, num_choices]`;
regression: the raw `[B, 1]` score), `predictions` (`[B]`: arg-max, or the
score) and, when a threshold is given, a constant float32 `threshold`.
`serve_tensors` takes the three int32 tensors `input_ids`, `input_mask`,
`segment_ids` (`[B, S]`, or `[B, num_choices, S]`; any `S` up to
`max_position_embeddings`) directly. The SavedModel loads with
`tf.saved_model.load` without importing `albert`.
"""

import math
from typing import Optional

import keras
import tensorflow as tf

from albert import io

FEATURES = ("input_ids", "input_mask", "segment_ids")


def export_classifier(model, export_dir: str, max_seq_length: int, regression: bool = False,
                      threshold: Optional[float] = None, num_choices: Optional[int] = None,
                      overwrite: bool = False) -> str:
    """Writes the SavedModel of `model` (an `AlbertClassifier`, or an `AlbertMultipleChoice`
    with `num_choices`) to `export_dir`, atomically."""
    width = max_seq_length * (num_choices or 1)
    shape = [-1, max_seq_length] if num_choices is None else [-1, num_choices, max_seq_length]
    spec = {name: tf.io.FixedLenFeature([width], tf.int64) for name in FEATURES}

    def outputs(input_ids, input_mask, segment_ids):
        logits = model({"input_word_ids": input_ids, "input_mask": input_mask,
                        "input_type_ids": segment_ids}, training=False)["logits"]
        if regression:
            result = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            result = {"probabilities": tf.nn.softmax(logits, axis=-1),
                      "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if threshold is not None and not math.isnan(threshold):
            result["threshold"] = tf.constant(threshold, tf.float32)
        return result

    def serve_examples(examples):
        parsed = tf.io.parse_example(examples, spec)
        return outputs(*(tf.reshape(tf.cast(parsed[name], tf.int32), shape) for name in FEATURES))

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", serve_examples,
                         input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    rank = 2 if num_choices is None else 3
    archive.add_endpoint("serve_tensors", outputs, input_signature=[
        tf.TensorSpec([None] * rank, tf.int32, name=name) for name in FEATURES])
    with io.new_directory(export_dir, overwrite) as scratch:
        archive.write_out(scratch, verbose=False)
    return export_dir
