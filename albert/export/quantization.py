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
float32. With a GLUE task's dev set (`--task_name`, `--data_dir`, classifier
exports) it adds `dev_set`: the task's metrics on the dev examples with the
float32 model and with the .tflite file, and their agreement.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert import io
from albert.errors import InputError
from albert.evaluation.glue_metrics import glue_metrics
from albert.export.tflite import INPUT_KEYS, fit_to_bucket, length_buckets, real_length
from albert.finetuning_data.glue import (TASKS, GlueTask, InputExample, convert_example,
                                         read_examples)
from albert.tasks.classification import (classification_loss, predictions_from_logits,
                                         stack_features)

MAX_EXAMPLES = 500  # per role (calibration, report): enough for stable ranges, quick to run
# Dev-set examples compared (the first ones of the file): every GLUE dev set but MNLI's and
# QQP's whole, and the metric of a few thousand examples is stable to a fraction of a point.
MAX_DEV_EXAMPLES = 5000
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


def paired_outputs(model, runner, inputs: Dict[str, np.ndarray], output_names: Sequence[str],
                   batch_size: int = 32) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    """({output: float32 Keras values}, {output: values of the .tflite file run by `runner`}),
    rows in the order of `inputs` (`sequence_output`: its real tokens only, flattened)."""
    lengths = [real_length(mask[None]) for mask in inputs["input_mask"]]
    order = np.argsort(lengths, kind="stable")
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
    if "sequence_output" not in output_names:   # one row per example: back to input order
        inverse = np.argsort(order, kind="stable")
        return ({name: np.concatenate(reference[name])[inverse] for name in output_names},
                {name: np.concatenate(measured[name])[inverse] for name in output_names})
    return ({name: np.concatenate(reference[name]) for name in output_names},
            {name: np.concatenate(measured[name]) for name in output_names})


def read_dev_set(glue_task: GlueTask, data_dir: str, tokenizer,
                 seq_length: int) -> Tuple[Dict[str, np.ndarray], np.ndarray, int]:
    """(inputs, labels, examples in the file) of the first MAX_DEV_EXAMPLES dev examples of
    `glue_task` in `data_dir` (laid out as run_classifier.py's --data_dir)."""
    examples = read_examples(glue_task, data_dir, "dev", tokenizer.preprocess)
    if not examples:
        raise InputError(f"The {glue_task.name} dev set in {data_dir} holds no example")
    features = stack_features([convert_example(example, glue_task, seq_length, tokenizer)
                               for example in examples[:MAX_DEV_EXAMPLES]],
                              glue_task.is_regression)
    labels = features.pop("label_ids")
    return features, labels, len(examples)


def dev_set_report(model, runner, glue_task: GlueTask, inputs: Dict[str, np.ndarray],
                   labels: np.ndarray, examples_in_file: int, batch_size: int = 32) -> dict:
    """The task's metrics on its dev examples with the float32 model and with the file."""
    regression = glue_task.is_regression
    reference, measured = paired_outputs(model, runner, inputs, ["logits"], batch_size)
    report = {"task": glue_task.name, "examples": int(len(labels)),
              "examples_in_file": int(examples_in_file)}
    predictions = {}
    for name, logits in (("float32", reference["logits"]), ("tflite", measured["logits"])):
        _, predictions[name] = predictions_from_logits(logits, regression)
        report[name] = glue_metrics(glue_task.name, predictions[name], labels,
                                    classification_loss(logits, labels, regression))
    if not regression:
        report["prediction_agreement"] = float(
            np.mean(predictions["float32"] == predictions["tflite"]))
    return report


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
    reference, measured = paired_outputs(model, runner, inputs, output_names, batch_size)
    for name in output_names:
        expected, got = reference[name], measured[name]
        report["outputs"][name] = _errors(expected, got)
        if name == "logits" and not regression:
            report["prediction_agreement"] = float(
                np.mean(expected.argmax(-1) == got.argmax(-1)))
    return report
