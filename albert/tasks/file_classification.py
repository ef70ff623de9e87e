"""Classification on a user's own files: the task, its feature caches, predictions and report.

What `run_classifier.py --train_file/--validation_file/--test_file` and
`python -m albert.predict` add to the GLUE path; the training loop, the caches'
reuse rules, best checkpoint, restarts and export are the GLUE path's own.

Files written into the run directory besides the GLUE path's:
* `run_settings.json` holds the task (`task_type`, `text_columns`, `label_column`,
  `labels` in their fixed order, `baseline`) with the feature settings, so evaluation,
  prediction and export of the run need no flags for them; `labels.txt` lists the labels,
  one a line, in the order of the model's outputs;
* `spm.model` (or `vocab.txt`): the vocabulary the run was tokenized with;
* `custom_train.tf_record`, `custom_eval.tf_record`: the feature caches (in --cached_dir);
* `eval_report.{json,md}`, `confusion_matrix.png`: model.ckpt-best on the validation file;
* `test_predictions.<csv|tsv|jsonl>`: every test row with `prediction` and, for
  classification, `probability_<label>` for each label; for multi-label, `prediction`
  holds the predicted labels joined by the task's separator (a list in JSON Lines).
"""

import csv
import io as std_io
import json
import logging
import os
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from albert import io
from albert.errors import InputError
from albert.evaluation import classification_report
from albert.finetuning_data.feature_cache import FeatureCache, files_fingerprint, tokenizer_settings
from albert.finetuning_data.glue import FeatureSerializer, convert_examples
from albert.finetuning_data.labelled_files import (DEFAULT_LABEL_SEPARATOR, DEFAULT_THRESHOLD,
                                                   ColumnSpec, FileTask, Row, file_format,
                                                   infer_task, iter_rows)
from albert.tasks.classification import (bucketed_logits, predictions_from_logits,
                                         stack_features)
from albert.tasks.finetuning import RUN_SETTINGS_FILE

logger = logging.getLogger("albert")

LABELS_FILE = "labels.txt"
SPM_FILE = "spm.model"
VOCAB_FILE = "vocab.txt"
PREDICTIONS_STEM = "test_predictions"
CACHE_NAMES = {"train": "custom_train.tf_record", "dev": "custom_eval.tf_record"}
# Training files from this size on (about 30,000 short rows) have their features made in
# worker processes, whose start costs a few seconds.
PARALLEL_FEATURES_MIN_BYTES = 4 << 20


def task_from_training_file(pattern: str, fmt: Optional[str], columns: ColumnSpec,
                            task_type: Optional[str],
                            label_separator: str = DEFAULT_LABEL_SEPARATOR,
                            threshold: float = DEFAULT_THRESHOLD) -> FileTask:
    """The task of the training file(s), from one streaming pass that checks every row."""
    return infer_task(iter_rows(pattern, fmt, (*columns.text_columns, columns.label_column),
                                "--train_file"), columns, task_type, label_separator, threshold)


def task_of_run(directory: str) -> Optional[FileTask]:
    """The task recorded in a run directory's run_settings.json (None: not a files run)."""
    path = io.join(directory, RUN_SETTINGS_FILE)
    if not io.exists(path):
        return None
    settings = io.read_json(path)
    if "task_type" not in settings:
        return None
    return FileTask.from_settings(settings)


class LabelledExamples:
    """The examples of a labelled file, read again from the file at each iteration: a cache
    is written from them without holding them in memory."""

    def __init__(self, pattern: str, fmt: Optional[str], task: FileTask, preprocess,
                 split: str, what: str, source_bytes: int = 0):
        self.pattern, self.fmt, self.task, self.preprocess = pattern, fmt, task, preprocess
        self.split, self.what, self.source_bytes = split, what, source_bytes

    def __iter__(self):
        columns = (*self.task.columns.text_columns, self.task.columns.label_column)
        return self.task.iter_examples(iter_rows(self.pattern, self.fmt, columns, self.what),
                                       self.preprocess, labelled=True, split=self.split)


def check_test_file(pattern: str, fmt: Optional[str], task: FileTask, preprocess,
                    what: str = "--test_file") -> None:
    """Reads every row to predict once (streaming), so that a bad one stops the run before
    it trains; the labels, if any, are an ordinary column."""
    for _ in task.iter_examples(test_rows(pattern, fmt, task, what), preprocess,
                                labelled=False, split="test"):
        pass


def test_rows(pattern: str, fmt: Optional[str], task: FileTask, what: str = "--test_file"):
    return iter_rows(pattern, fmt, task.columns.text_columns, what)


def plan_cache(task: FileTask, pattern: str, fmt: Optional[str], split: str, cache_path: str,
               max_seq_length: int, tokenizer, checked: bool = False) -> FeatureCache:
    """A split's cache: reused when made from the same files with the same settings, else
    planned from the files, which stream. Every row is checked before the plan is returned
    (one pass; `checked`: the training file's scan already did), so that a bad row anywhere
    leaves no cache written."""
    what = "--train_file" if split == "train" else "--validation_file"
    paths = io.expand_file_patterns(pattern, what)
    settings = {**task.settings(), "split": split, "max_seq_length": max_seq_length,
                **tokenizer_settings(tokenizer), "source_sha256": files_fingerprint(paths)}

    def read():
        examples = LabelledExamples(pattern, fmt, task, tokenizer.preprocess, split, what,
                                    sum(io.size(path) for path in paths))
        if not checked:
            for _ in examples:
                pass
        return examples

    return FeatureCache.plan(cache_path, settings, read)


def write_cache(cache: FeatureCache, task: FileTask, max_seq_length: int, tokenizer) -> int:
    return cache.write(FeatureSerializer(task, max_seq_length, tokenizer),
                       feature_workers(cache.examples))


def feature_workers(examples: Optional[LabelledExamples]) -> int:
    """Processes that make a cache's records: one per core (at most 4) for files of
    `PARALLEL_FEATURES_MIN_BYTES` or more, else this process alone, as starting workers
    costs more than they save on a small file. The records are the same either way."""
    if examples is None or examples.source_bytes < PARALLEL_FEATURES_MIN_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


def vocabulary_file(tokenizer) -> tuple:
    """(file name, bytes) of the tokenizer's vocabulary, kept in the run directory."""
    proto = getattr(tokenizer, "model_proto", None)
    if proto is not None:
        return SPM_FILE, proto
    return VOCAB_FILE, ("\n".join(tokenizer.vocab_words) + "\n").encode("utf-8")


def write_run_extras(output_dir: str, task: FileTask, tokenizer) -> None:
    """labels.txt and the vocabulary, beside the run's checkpoints (once; same content)."""
    if task.labels is not None:
        io.write_text_atomically(io.join(output_dir, LABELS_FILE),
                                 "".join(f"{label}\n" for label in task.labels))
    name, content = vocabulary_file(tokenizer)
    path = io.join(output_dir, name)
    if not io.exists(path) or io.read_bytes(path) != content:
        io.write_bytes_atomically(path, content)


def predictions_path(output_dir: str, test_pattern: str, fmt: Optional[str]) -> str:
    first = io.expand_file_patterns(test_pattern, "--test_file")[0]
    return io.join(output_dir, f"{PREDICTIONS_STEM}.{file_format(first, fmt)}")


def prediction_columns(task: FileTask) -> List[str]:
    if task.is_regression:
        return ["prediction"]
    return ["prediction", *(f"probability_{label}" for label in task.labels)]


def prediction_fields(task: FileTask, probabilities: np.ndarray,
                      predictions: np.ndarray) -> List[Dict[str, object]]:
    """Per example: the predicted label (or score) and each label's probability."""
    if task.is_regression:
        return [{"prediction": float(value)} for value in predictions]
    if task.is_multi_label:
        return [{"prediction": [name for name, on in zip(task.labels, chosen) if on],
                 **{f"probability_{label}": float(p) for label, p in zip(task.labels, row)}}
                for chosen, row in zip(predictions, probabilities)]
    return [{"prediction": task.labels[int(index)],
             **{f"probability_{label}": float(p) for label, p in zip(task.labels, row)}}
            for index, row in zip(predictions, probabilities)]


def format_rows(fmt: str, columns: Sequence[str], records: Sequence[Dict[str, object]],
                header: bool = True) -> str:
    """`records` as a CSV (quoted where needed), TSV or JSON Lines text, with a header line
    (CSV, TSV) unless `header` is False."""
    if fmt == "jsonl":
        return "".join(json.dumps({c: record.get(c) for c in columns}, ensure_ascii=False) + "\n"
                       for record in records)
    if fmt == "csv":
        buffer = std_io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if header:
            writer.writerow(columns)
        for record in records:
            writer.writerow([_plain(record.get(c)) for c in columns])
        return buffer.getvalue()
    for record in records:
        for column in columns:
            value = _plain(record.get(column))
            if "\t" in value or "\n" in value:
                raise InputError(f"column {column!r} holds a tab or line break, which a TSV "
                                 "cannot hold; predict into a .csv or .jsonl file")
    return "".join("\t".join(_plain(record.get(c)) for c in columns) + "\n"
                   for record in [dict(zip(columns, columns))] * header + list(records))


def _plain(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def write_predictions(path: str, rows: Iterable[Row], task: FileTask, predict_chunk,
                      progress=None) -> int:
    """Every input row with its prediction columns, in `path`'s format, written chunk by chunk
    as the rows stream in (`predict_chunk(rows) -> (probabilities, predictions)`) into a
    temporary file that becomes `path` only when complete. Returns the rows written."""
    fmt = file_format(path)
    added = prediction_columns(task)
    columns, count = None, 0
    with io.atomic_output_file(path) as temporary:
        with io.open_file(temporary, "w") as handle:
            for chunk in _chunks(rows, PREDICTION_CHUNK):
                probabilities, predictions = predict_chunk(chunk)
                if columns is None:
                    columns = [*(name for name in chunk[0].fields if name not in added), *added]
                records = [{**row.fields, **fields} for row, fields
                           in zip(chunk, prediction_fields(task, probabilities, predictions))]
                if task.is_multi_label and fmt != "jsonl":
                    for record in records:
                        record["prediction"] = task.label_separator.join(record["prediction"])
                handle.write(format_rows(fmt, columns, records, header=count == 0))
                count += len(chunk)
                if progress is not None:
                    progress.update(len(chunk))
    return count


def _chunks(rows: Iterable, size: int):
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


PREDICTION_CHUNK = 4096   # rows tokenized and predicted together (memory stays flat)


def predict(model, task: FileTask, examples: Sequence, tokenizer, max_seq_length: int,
            batch_size: int, jit_compile: bool = False, progress=None):
    """(probabilities, predictions) of `examples`, in order, on length-bucketed batches of
    each chunk of rows (as every evaluation here); `progress.update(n)` per chunk."""
    parts = []
    for start in range(0, len(examples), PREDICTION_CHUNK):
        chunk = examples[start:start + PREDICTION_CHUNK]
        features = stack_features(convert_examples(chunk, task, max_seq_length, tokenizer),
                                  task.is_regression or task.is_multi_label)
        parts.append(bucketed_logits(model, features, batch_size, jit_compile))
        if progress is not None:
            progress.update(len(chunk))
    logits = (np.concatenate(parts) if parts
              else np.zeros((0, task.num_labels), np.float32))
    return predictions_from_logits(logits, task.is_regression, task.multi_label_threshold)


def write_evaluation_report(output_dir: str, task: FileTask, predictions, labels, loss: float,
                            checkpoint: str) -> List[str]:
    if task.baseline is None or task.is_regression or task.is_multi_label:
        baseline = task.baseline
    else:
        baseline = int(task.baseline)
    result = classification_report.report(predictions, labels, task.labels, loss, baseline)
    return classification_report.write_report(output_dir, result, checkpoint)
