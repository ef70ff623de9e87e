"""A fine-tuned SQuAD v1.1 model as `run_squad_v1.py --export_dir` writes it.

The original's export, which the TFLite Task Library's `BertQuestionAnswerer`
reads, is two things in `--export_dir`:

* `saved_model/<unix seconds>/`: a SavedModel whose `serving_default` takes
  `input_ids`, `input_mask`, `segment_ids` (int32, `[1, max_seq_length]`:
  one window at a time, as the original's placeholders) and returns
  `start_log_prob` and `end_log_prob` (float32 `[1, max_seq_length]`, the raw
  start and end logits, under the names the original's predictions carry).
  It loads with `tf.saved_model.load` without importing `albert`.
* `albert_model.tflite`: the same model converted to TFLite (built-in ops
  only), input tensors `input_ids`, `input_mask`, `segment_ids` and output
  tensors `start_logits`, `end_logits`, in that order, all
  `[1, max_seq_length]`, as the original's file (which, converted from a TF1
  graph, has no signature; neither has this one).

Nothing is overwritten: an existing `albert_model.tflite` is refused before
any work (`check_export_dir`), and each export is a new timestamped folder,
as the Estimator's.
"""

import time

import tensorflow as tf
# Freezing a concrete function into a GraphDef has no public API in TF 2.
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from albert import io
from albert.errors import InputError
from albert.native_logs import TFLITE_CONVERTER_NOISE, filtered_stderr
from albert.savedmodel.tracking import Untracked, tf_variables

SAVED_MODEL_DIR = "saved_model"
TFLITE_FILE = "albert_model.tflite"
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
# The original's prediction keys (its SavedModel's outputs) and graph tensor names (its
# TFLite file's outputs) for the same two tensors.
SAVED_MODEL_OUTPUTS = ("start_log_prob", "end_log_prob")
TFLITE_OUTPUTS = ("start_logits", "end_logits")


class _SquadV1Export(tf.__internal__.tracking.AutoTrackable):
    """`serving_default`: the three `[1, S]` int32 inputs → the start and end logits."""

    def __init__(self, model, max_seq_length: int, output_names):
        super().__init__()
        self._model = Untracked(model)
        self._output_names = tuple(output_names)
        self.variables = tf_variables(model.variables)
        self.serving_default = tf.function(self._serve, input_signature=[
            tf.TensorSpec([1, max_seq_length], tf.int32, name=name) for name in INPUT_NAMES])

    def _serve(self, input_ids, input_mask, segment_ids):
        outputs = self._model.model({"input_word_ids": input_ids, "input_mask": input_mask,
                                     "input_type_ids": segment_ids}, training=False)
        start, end = self._output_names
        # Named ops, so that the frozen graph has tensors of these names (convert_to_tflite).
        return {start: tf.identity(outputs["start_logits"], name=start),
                end: tf.identity(outputs["end_logits"], name=end)}


def check_export_dir(export_dir: str) -> None:
    """Refuses an --export_dir that already holds an albert_model.tflite (before any work)."""
    if io.exists(io.join(export_dir, TFLITE_FILE)):
        raise InputError(f"{io.join(export_dir, TFLITE_FILE)} already exists; remove it or "
                         "choose another --export_dir")


def export_squad_v1(model, export_dir: str, max_seq_length: int) -> list:
    """Writes `saved_model/<seconds>/` and `albert_model.tflite` of `model` (an
    `AlbertSquadV1`) into `export_dir`; returns the two paths."""
    check_export_dir(export_dir)
    # Converted first: a conversion that fails leaves nothing behind.
    tflite_content = convert_to_tflite(model, max_seq_length)
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    saved_model = _new_timestamped_dir(io.join(export_dir, SAVED_MODEL_DIR))
    with io.new_directory(saved_model) as scratch:
        root = _SquadV1Export(model, max_seq_length, SAVED_MODEL_OUTPUTS)
        tf.saved_model.save(root, scratch, signatures={"serving_default": root.serving_default},
                            options=options)
    tflite_path = io.join(export_dir, TFLITE_FILE)
    io.write_bytes_atomically(tflite_path, tflite_content)
    return [saved_model, tflite_path]


def convert_to_tflite(model, max_seq_length: int) -> bytes:
    """The TFLite flatbuffer, its tensors named and ordered as the original's.

    The TF2 converter names a signature's tensors `serving_default_input_ids:0`
    and `StatefulPartitionedCall:0` and orders them as it likes; readers of the
    original's file (the Task Library's question answerer among them) find
    them by the names `input_ids`, `input_mask`, `segment_ids`,
    `start_logits`, `end_logits`, in that order. A frozen graph of the serving
    function keeps those names, so it is converted the way the original
    converted its graph: by input and output array names.
    """
    root = _SquadV1Export(model, max_seq_length, TFLITE_OUTPUTS)
    frozen = convert_variables_to_constants_v2(root.serving_default.get_concrete_function())
    with io.local_scratch_dir() as scratch, filtered_stderr(TFLITE_CONVERTER_NOISE):
        graph_file = tf.io.write_graph(frozen.graph.as_graph_def(), scratch, "frozen.pb",
                                       as_text=False)
        converter = tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(
            graph_file, list(INPUT_NAMES), list(TFLITE_OUTPUTS))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        return converter.convert()


def _new_timestamped_dir(base: str) -> str:
    """`<base>/<unix seconds>`, as the Estimator names its exports; the next free second if
    that one is taken."""
    seconds = int(time.time())
    while io.exists(io.join(base, str(seconds))):
        seconds += 1
    return io.join(base, str(seconds))
