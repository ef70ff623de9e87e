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

import tensorflow as tf

from albert import io
from albert.savedmodel.tracking import Untracked, tf_variables

FEATURES = ("input_ids", "input_mask", "segment_ids")


class TaskExport(tf.__internal__.tracking.AutoTrackable):
    """The task SavedModel's root: `serving_default` (serialised examples) and `serve_tensors`
    (the three int32 tensors), with `variables` / `trainable_variables` holding each weight once."""

    def __init__(self, model, max_seq_length: int, regression: bool,
                 threshold: Optional[float], num_choices: Optional[int]):
        super().__init__()
        self._model = Untracked(model)
        self._regression = regression
        self._threshold = None if threshold is None or math.isnan(threshold) else float(threshold)
        self.variables = tf_variables(model.variables)
        self.trainable_variables = tf_variables(model.trainable_variables)
        width = max_seq_length * (num_choices or 1)
        self._shape = ([-1, max_seq_length] if num_choices is None
                       else [-1, num_choices, max_seq_length])
        self._spec = {name: tf.io.FixedLenFeature([width], tf.int64) for name in FEATURES}
        rank = 2 if num_choices is None else 3
        self.serve_tensors = tf.function(self._outputs, input_signature=[
            tf.TensorSpec([None] * rank, tf.int32, name=name) for name in FEATURES])
        self.serving_default = tf.function(self._serve_examples, input_signature=[
            tf.TensorSpec([None], tf.string, name="examples")])

    def _outputs(self, input_ids, input_mask, segment_ids):
        logits = self._model.model({"input_word_ids": input_ids, "input_mask": input_mask,
                                    "input_type_ids": segment_ids}, training=False)["logits"]
        if self._regression:
            result = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            result = {"probabilities": tf.nn.softmax(logits, axis=-1),
                      "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if self._threshold is not None:
            result["threshold"] = tf.constant(self._threshold, tf.float32)
        return result

    def _serve_examples(self, examples):
        parsed = tf.io.parse_example(examples, self._spec)
        return self._outputs(*(tf.reshape(tf.cast(parsed[name], tf.int32), self._shape)
                               for name in FEATURES))


def export_classifier(model, export_dir: str, max_seq_length: int, regression: bool = False,
                      threshold: Optional[float] = None, num_choices: Optional[int] = None,
                      overwrite: bool = False) -> str:
    """Writes the SavedModel of `model` (an `AlbertClassifier`, or an `AlbertMultipleChoice`
    with `num_choices`) to `export_dir`, atomically."""
    root = TaskExport(model, max_seq_length, regression, threshold, num_choices)
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    with io.new_directory(export_dir, overwrite) as scratch:
        tf.saved_model.save(root, scratch, options=options, signatures={
            "serving_default": root.serving_default, "serve_tensors": root.serve_tensors})
    return export_dir
