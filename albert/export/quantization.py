"""Calibration text and the quantisation report of a TFLite export.

`--calibration_file` is the user's own text, one example per line (a tab
separates the two segments of a pair), tokenized as the preprocessor does.
For `int8` its first half calibrates the activation ranges; the report is
measured on the other half, so the errors it gives are out of sample. For
the other modes every line goes to the report.

`quantization_report.json` holds the file's size against the float32 file
of the same export (converted for the comparison) and the float32 weights, and the largest and mean absolute difference of each output from
the float32 Keras model on the report's examples (`sequence_output` at real
tokens only); for task models also the share of predictions that agree with
float32.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert import io
from albert.errors import InputError
from albert.export.tflite import INPUT_KEYS, fit_to_bucket, length_buckets, real_length
from albert.finetuning_data.glue import TASKS, InputExample, convert_example

MAX_EXAMPLES = 500  # per role (calibration, report): enough for stable ranges, quick to run
REPORT_FILE = "quantization_report.json"


def read_calibration_texts(path: str) -> List[Tuple[str, Optional[str]]]:
    """(text_a, text_b or None) per non-empty line of `path`."""
    texts = []
    for line in io.read_lines(path):
        if line.strip():
            first, _, second = line.partition("\t")
            texts.append((first, second or None))
    if not texts:
        raise InputError(f"--calibration_file={path} holds no text")
    return texts


def split_roles(texts: Sequence, quantization: str) -> Tuple[list, list]:
    """(calibration texts, report texts): int8 calibrates on the first half and reports on the
    rest; the other modes report on everything."""
    if quantization != "int8":
        return [], list(texts[:MAX_EXAMPLES])
    if len(texts) < 2:
        raise InputError("int8 calibration needs at least 2 lines in --calibration_file (half "
                         "calibrate, half measure the error)")
    half = len(texts) // 2
    return list(texts[:half][:MAX_EXAMPLES]), list(texts[half:][:MAX_EXAMPLES])


def encode_texts(texts, tokenizer, seq_length: int,
                 num_choices: Optional[int] = None) -> Dict[str, np.ndarray]:
    """int32 inputs `[N, seq_length]` (`[N, num_choices, seq_length]`: the text in every option),
    packed as the fine-tuning scripts and the preprocessor pack them."""
    features = [convert_example(InputExample(str(index), tokenizer.preprocess(a),
                                             tokenizer.preprocess(b) if b else None, "0"),
                                TASKS["mrpc" if b else "sst-2"], seq_length, tokenizer)
                for index, (a, b) in enumerate(texts)]
    arrays = {"input_word_ids": np.array([f.input_ids for f in features], np.int32),
              "input_mask": np.array([f.input_mask for f in features], np.int32),
              "input_type_ids": np.array([f.segment_ids for f in features], np.int32)}
    if num_choices:
        arrays = {key: np.repeat(value[:, None, :], num_choices, axis=1)
                  for key, value in arrays.items()}
    return arrays


def calibration_by_bucket(inputs: Dict[str, np.ndarray],
                          seq_length: int) -> Dict[int, Dict[str, np.ndarray]]:
    """{bucket length: the examples whose real tokens fit it, cut to it}; a bucket no example
    fits gets the shortest ones cut to it (its ranges still come from real text)."""
    lengths = np.array([real_length(mask[None]) for mask in inputs["input_mask"]])
    buckets = {}
    for length in length_buckets(seq_length):
        rows = np.nonzero(lengths <= length)[0]
        if not len(rows):
            rows = np.argsort(lengths, kind="stable")[:max(1, len(lengths) // 4)]
        buckets[length] = fit_to_bucket({key: inputs[key][rows] for key in INPUT_KEYS}, length)
    return buckets


def _errors(reference: np.ndarray, measured: np.ndarray) -> Dict[str, float]:
    difference = np.abs(reference.astype(np.float64) - measured.astype(np.float64))
    return {"max_abs_error": float(difference.max()), "mean_abs_error": float(difference.mean())}


def quantization_report(model, runner, inputs: Dict[str, np.ndarray], output_names: Sequence[str],
                        quantization: str, file_bytes: int, float32_file_bytes: int,
                        regression: bool = False, batch_size: int = 32) -> dict:
    """The report of a TFLite file (run through `runner`, a `TFLiteRunner`) against `model`
    in float32 on `inputs` (examples run one batch at a time, each at its bucket)."""
    weight_bytes = int(sum(np.prod(v.shape) * 4 for v in model.weights))
    report = {"quantization": quantization, "file_bytes": file_bytes,
              "float32_file_bytes": float32_file_bytes,
              "file_to_float32_file": round(file_bytes / float32_file_bytes, 4),
              "float32_weight_bytes": weight_bytes,
              "examples": int(len(inputs["input_word_ids"])), "outputs": {}}
    if not report["examples"]:
        report["note"] = "no --calibration_file: the errors were not measured"
        return report
    order = np.argsort([real_length(mask[None]) for mask in inputs["input_mask"]], kind="stable")
    reference = {name: [] for name in output_names}
    measured = {name: [] for name in output_names}
    for start in range(0, len(order), batch_size):   # similar lengths together, as in serving
        rows = order[start:start + batch_size]
        batch = {key: inputs[key][rows] for key in INPUT_KEYS}
        lite = runner(batch)
        keras_outputs = model({key: value for key, value in batch.items()}, training=False)
        for name in output_names:
            expected = np.asarray(keras_outputs[name])
            got = np.asarray(lite[name])
            if name == "sequence_output":   # real tokens only
                width = got.shape[1]   # the bucket's length
                mask = batch["input_mask"][:, :width].astype(bool)
                expected, got = expected[:, :width][mask], got[mask]
            reference[name].append(expected.reshape(-1, *expected.shape[1:]))
            measured[name].append(got.reshape(-1, *got.shape[1:]))
    for name in output_names:
        expected = np.concatenate(reference[name])
        got = np.concatenate(measured[name])
        report["outputs"][name] = _errors(expected, got)
        if name == "logits" and not regression:
            report["prediction_agreement"] = float(
                np.mean(expected.argmax(-1) == got.argmax(-1)))
    return report
