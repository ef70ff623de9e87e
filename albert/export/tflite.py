"""TFLite files of the encoder and of task models: quantised, one signature per length bucket.

A sentence of 12 tokens should not be run at 128. Each file carries one
signature per *length bucket* — `length_16`, `length_32`, `length_64`, ...
below the export's `seq_length`, and `serving_default` at `seq_length` —
all over the same weights (the converter keeps each constant once). Every
signature takes `input_word_ids`, `input_mask`, `input_type_ids` of shape
`[batch, L]` (`[batch, num_choices, L]` for multiple choice) with any batch
size; `albert.export.tflite_runner` picks the smallest bucket that holds a
batch's real tokens, as users of the file can.

Quantisation (`QUANTIZATIONS`):
* `none`: float32.
* `float16`: weights stored as float16, computed in float32.
* `dynamic_int8`: weights int8, activations quantised on the fly (no calibration).
* `int8`: full integer — weights and activations int8, activation ranges
  calibrated on representative inputs (the user's own text through the
  tokenizer); only the int32 ids go in and float32 outputs come out.
"""

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from albert import io
from albert.savedmodel.tracking import Untracked, tf_variables
from albert.native_logs import TFLITE_CONVERTER_NOISE, filtered_stderr

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "int8")
DEFAULT_SIGNATURE = "serving_default"
BUCKET_LENGTHS = (16, 32, 64, 128, 256, 512)

# {signature name: int32 inputs of that signature's length}, one dict per calibration example
Calibration = Callable[[], object]


def length_buckets(seq_length: int) -> List[int]:
    """The bucket lengths of an export at `seq_length`: the standard ones below it, then it."""
    return [length for length in BUCKET_LENGTHS if length < seq_length] + [seq_length]


def signature_name(length: int, seq_length: int) -> str:
    return DEFAULT_SIGNATURE if length == seq_length else f"length_{length}"


class _BucketedModel(tf.__internal__.tracking.AutoTrackable):
    """One `tf.function` per length bucket over the same model (held out of the object graph,
    its tf.Variables listed once)."""

    def __init__(self, model, seq_length: int, output_names: Sequence[str],
                 num_choices: Optional[int] = None):
        super().__init__()
        self._model = Untracked(model)
        self._variables = tf_variables(model.variables)
        self._output_names = tuple(output_names)
        self.bucket_functions = {}
        for length in length_buckets(seq_length):
            shape = [None, length] if num_choices is None else [None, num_choices, length]
            specs = [tf.TensorSpec(shape, tf.int32, name=key) for key in INPUT_KEYS]
            self.bucket_functions[signature_name(length, seq_length)] = tf.function(
                self._serve, input_signature=specs)

    def _serve(self, input_word_ids, input_mask, input_type_ids):
        outputs = self._model.model({"input_word_ids": input_word_ids, "input_mask": input_mask,
                                     "input_type_ids": input_type_ids}, training=False)
        return {name: outputs[name] for name in self._output_names}


def convert(model, seq_length: int, output_names: Sequence[str], quantization: str = "none",
            calibration: Optional[Dict[int, Dict[str, np.ndarray]]] = None,
            num_choices: Optional[int] = None) -> bytes:
    """The TFLite flatbuffer of `model` with a signature per length bucket.

    Built-in TFLite ops only (no Flex delegate needed). `calibration`
    (`int8` only): {bucket length: int32 inputs `[N, ..., length]`}, the
    representative examples each bucket's activation ranges are measured on.
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {QUANTIZATIONS}, got {quantization!r}")
    if quantization == "int8" and not calibration:
        raise ValueError("int8 quantization needs calibration inputs")
    with io.local_scratch_dir() as scratch, filtered_stderr(TFLITE_CONVERTER_NOISE):
        root = _BucketedModel(model, seq_length, output_names, num_choices)
        tf.saved_model.save(root, scratch, signatures=root.bucket_functions,
                            options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
        converter = tf.lite.TFLiteConverter.from_saved_model(
            scratch, signature_keys=list(root.bucket_functions))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantization != "none":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantization == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if quantization == "int8":
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.representative_dataset = lambda: _representative(calibration, seq_length)
        return converter.convert()


def _representative(calibration: Dict[int, Dict[str, np.ndarray]], seq_length: int):
    """(signature, one example's inputs) for every bucket, as the converter asks for them."""
    for length in length_buckets(seq_length):
        inputs = calibration[length]
        for row in range(len(inputs["input_word_ids"])):
            yield signature_name(length, seq_length), {
                key: inputs[key][row:row + 1] for key in INPUT_KEYS}


def fit_to_bucket(inputs: Dict[str, np.ndarray], length: int) -> Dict[str, np.ndarray]:
    """Inputs padded (zeros) or cut to `length` on the last axis; cutting drops padding only
    when `length` holds every example's real tokens."""
    width = inputs["input_word_ids"].shape[-1]
    if width >= length:
        return {key: np.ascontiguousarray(inputs[key][..., :length], np.int32)
                for key in INPUT_KEYS}
    pad = [(0, 0)] * (inputs["input_word_ids"].ndim - 1) + [(0, length - width)]
    return {key: np.pad(inputs[key], pad).astype(np.int32) for key in INPUT_KEYS}


def real_length(input_mask: np.ndarray) -> int:
    """The number of positions a batch needs: the last real token of any example, plus one."""
    columns = np.nonzero(np.asarray(input_mask).reshape(-1, input_mask.shape[-1]).any(axis=0))[0]
    return int(columns[-1]) + 1 if len(columns) else 1
