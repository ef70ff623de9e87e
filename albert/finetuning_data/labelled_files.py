"""A user's own labelled text files: CSV, TSV and JSON Lines, read into classification examples.

`run_classifier.py --train_file/--validation_file/--test_file` and `python -m albert.predict`
read their files here. The rules:

* Format: from the extension (`.csv`, `.tsv`/`.tab`, `.jsonl`/`.json`/`.ndjson`, each
  optionally `.gz`) or `--file_format`. A pattern may be a comma-separated list of files
  and globs (sharded files), local or any URL TensorFlow's file layer reads.
* CSV: the standard dialect (RFC 4180): fields may be quoted, and a quoted field may hold
  commas, tabs, quotes (doubled) and line breaks. The first row names the columns.
* TSV: a row ends at a line feed and fields are split at tabs; quotes are ordinary
  characters (as in GLUE's files), so text holding quotes is read as it is. The first row
  names the columns.
* JSON Lines: one JSON object per line; its keys are the columns. Blank lines are skipped.
* A UTF-8 byte-order mark is dropped and Windows line ends are read as line ends; a file
  that is not UTF-8 is refused.

Every mistake is an `InputError` naming the file, and the line or column where there is
one, before anything is written.
"""

import collections
import contextlib
import csv
import dataclasses
import io as std_io
import json
import logging
import itertools
import math
import sys
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from albert import io
from albert.errors import InputError
from albert.evaluation.classification_report import (classification_metrics,
                                                     multi_label_metrics, regression_metrics)
from albert.finetuning_data.glue import InputExample

logger = logging.getLogger("albert")

FORMATS = ("csv", "tsv", "jsonl")
_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl",
               ".json": "jsonl", ".ndjson": "jsonl"}
CLASSIFICATION, REGRESSION, MULTI_LABEL = "classification", "regression", "multi_label"
TASK_TYPES = (CLASSIFICATION, REGRESSION, MULTI_LABEL)
DEFAULT_LABEL_SEPARATOR = ";"
DEFAULT_THRESHOLD = 0.5
# The csv module refuses fields over 131,072 characters by default; a document is longer.
csv.field_size_limit(sys.maxsize)


def file_format(path: str, given: Optional[str] = None) -> str:
    """`given` (a --file_format value) or the format that `path`'s extension names."""
    if given:
        if given not in FORMATS:
            raise InputError(f"--file_format must be one of {', '.join(FORMATS)}, not {given!r}")
        return given
    name = path[:-3] if path.endswith(".gz") else path
    for extension, fmt in _EXTENSIONS.items():
        if name.lower().endswith(extension):
            return fmt
    raise InputError(f"{path}: cannot tell the format from the extension; name it .csv, .tsv "
                     f"or .jsonl, or pass --file_format ({', '.join(FORMATS)})")


@contextlib.contextmanager
def utf8_lines(path: str):
    """The file's lines as read, decoded as UTF-8 without a byte-order mark, ends kept; a
    line ends only at a line feed (CR LF too), not at U+2028 and the like, which text holds.
    Read as they come (a file larger than memory streams); a byte that is not UTF-8 is an
    `InputError` when it is reached, before anything is written from the file."""
    with io.open_binary_maybe_gzip(path) as handle:
        text = std_io.TextIOWrapper(handle, encoding="utf-8-sig", newline="\n")

        def lines():
            try:
                yield from text
            except UnicodeDecodeError as error:
                raise InputError(f"{path} is not UTF-8 text ({error.reason} at a byte of "
                                 f"value 0x{error.object[error.start]:02x}); save it as UTF-8"
                                 ) from None

        yield lines()


@dataclasses.dataclass(frozen=True)
class Row:
    """One record of a file: its fields by column name and where it starts ("file:line")."""

    where: str
    fields: Dict[str, object]


def _records(path: str, lines, fmt: str) -> Iterator[Tuple[int, List[str]]]:
    """(first line number, fields) of each non-empty record of a CSV or TSV file."""
    if fmt == "csv":
        reader = csv.reader(lines, strict=True)
        start = 1
        try:
            for record in reader:
                if record and record != [""]:
                    yield start, record
                start = reader.line_num + 1
        except csv.Error as error:
            raise InputError(f"{path}:{start}: {error} (a quoted field must end with a quote)"
                             ) from None
        return
    for number, line in enumerate(lines, start=1):
        line = line[:-1] if line.endswith("\n") else line
        line = line[:-1] if line.endswith("\r") else line
        if line:
            yield number, line.split("\t")


def _delimited_rows(path: str, lines, fmt: str) -> Iterator[Row]:
    """The rows of a CSV or TSV file, named by its header; the first row yielded is the
    header's own, without fields."""
    records = _records(path, lines, fmt)
    first = next(records, None)
    if first is None:
        raise InputError(f"{path} is empty: a header row naming the columns and one row per "
                         "example are needed")
    header = [name.strip() for name in first[1]]
    yield Row(f"{path}:{first[0]}", {})   # the header: a row without fields
    for number, record in records:
        if len(record) != len(header):
            raise InputError(f"{path}:{number}: {len(record)} fields, the header has "
                             f"{len(header)} ({', '.join(header)})")
        yield Row(f"{path}:{number}", dict(zip(header, record)))


def _json_rows(path: str, lines) -> Iterator[Row]:
    found = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not a JSON object ({error.msg})") from None
        if not isinstance(value, dict):
            raise InputError(f"{path}:{number}: a JSON object per line is needed, found "
                             f"{type(value).__name__}")
        found = True
        yield Row(f"{path}:{number}", value)
    if not found:
        raise InputError(f"{path} is empty: one JSON object per line is needed")


def iter_rows(pattern: str, given_format: Optional[str], columns: Sequence[str],
              what: str) -> Iterator[Row]:
    """The rows of every file of `pattern`, one at a time; `columns` must be in each row.

    `what` names the flag in errors (e.g. "--train_file")."""
    paths = io.expand_file_patterns(pattern, what)
    count = 0
    for path in paths:
        fmt = file_format(path, given_format)
        with utf8_lines(path) as lines:
            rows = _json_rows(path, lines) if fmt == "jsonl" else _delimited_rows(path, lines, fmt)
            header = None
            for row in rows:
                if fmt != "jsonl" and header is None:
                    header = row   # the header's own row
                    continue
                missing = [name for name in columns if name not in row.fields]
                if missing:
                    where = path if fmt != "jsonl" else row.where
                    raise InputError(
                        f"{where}: no column {', '.join(map(repr, missing))} ({what}); its "
                        f"columns are {', '.join(map(repr, row.fields)) or 'none'}"
                        + ("" if fmt == "jsonl" else " (is its first row a header?)"))
                count += 1
                yield row
    if not count:
        raise InputError(f"{pattern} ({what}) holds no examples, only a header")


def read_rows(pattern: str, given_format: Optional[str], columns: Sequence[str],
              what: str) -> Tuple[List[str], List[Row]]:
    """(the first row's columns, every row) of `pattern`, in memory (`iter_rows` streams)."""
    rows = list(iter_rows(pattern, given_format, columns, what))
    return list(rows[0].fields), rows


@dataclasses.dataclass(frozen=True)
class ColumnSpec:
    """Which columns hold the text (one, or a pair) and the label."""

    text_columns: Tuple[str, ...]
    label_column: str

    @classmethod
    def from_flags(cls, text_columns: str, label_column: str) -> "ColumnSpec":
        names = tuple(name.strip() for name in text_columns.split(",") if name.strip())
        if len(names) not in (1, 2):
            raise InputError(f"--text_columns names one column or two (a pair), not "
                             f"{text_columns!r}")
        if not label_column.strip():
            raise InputError("--label_column is empty")
        return cls(names, label_column.strip())


def _text(row: Row, column: str) -> str:
    value = row.fields[column]
    text = "" if value is None else str(value)
    if not text.strip():
        raise InputError(f"{row.where}: the text in column {column!r} is empty")
    return text


def _label_text(row: Row, column: str) -> str:
    value = row.fields[column]
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise InputError(f"{row.where}: label {value!r} in column {column!r} is not a class "
                         "name or a number")
    text = str(value).strip()
    if not text:
        raise InputError(f"{row.where}: the label in column {column!r} is empty")
    return text


def _label_set(row: Row, column: str, separator: str) -> Tuple[str, ...]:
    """A multi-label row's labels: a JSON list, or a text of names separated by `separator`
    (spaces around each name dropped). An empty list or text is a row with no label."""
    value = row.fields[column]
    if isinstance(value, list):
        names = []
        for name in value:
            if isinstance(name, bool) or not isinstance(name, (str, int)):
                raise InputError(f"{row.where}: label {name!r} in the list of column {column!r} "
                                 "is not a class name")
            names.append(str(name).strip())
    elif value is None or isinstance(value, (str, int)) and not isinstance(value, bool):
        names = [] if value is None else [part.strip() for part in str(value).split(separator)]
    else:
        raise InputError(f"{row.where}: label {value!r} in column {column!r} is not a list of "
                         f"class names (a JSON list, or names separated by {separator!r})")
    names = [name for name in names if name]
    if len(set(names)) != len(names):
        raise InputError(f"{row.where}: a label is repeated in {value!r} (column {column!r})")
    return tuple(names)


def _number(text: str) -> Optional[float]:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclasses.dataclass(frozen=True)
class FileTask:
    """A classification, regression or multi-label task read from a user's files.

    Stands where a `GlueTask` stands in the fine-tuning path: its labels (None for
    regression, else the class names in their fixed order: numerically for integer labels,
    else alphabetically), the metric that picks the best checkpoint and the metrics of an
    evaluation.

    Multi-label (`multi_label`): each example has any number of the labels (none too); the
    model gives each label an independent sigmoid probability and predicts the labels whose
    probability reaches `threshold`.
    """

    columns: ColumnSpec
    labels: Optional[Tuple[str, ...]]
    #: what a model that learned nothing answers: the commonest training label's index, the
    #: training labels' mean (regression), or (multi-label) the indices of the labels that
    #: more than half of the training examples have
    baseline: object = None
    name: str = "custom"
    multi_label: bool = False
    label_separator: str = DEFAULT_LABEL_SEPARATOR
    threshold: float = DEFAULT_THRESHOLD

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def is_multi_label(self) -> bool:
        return self.multi_label

    @property
    def multi_label_threshold(self) -> Optional[float]:
        """The probability at which a label is predicted (None: not a multi-label task)."""
        return self.threshold if self.multi_label else None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def best_metric(self) -> str:
        if self.multi_label:
            return "micro_f1"
        return "pearson" if self.is_regression else "eval_accuracy"

    @property
    def task_type(self) -> str:
        if self.multi_label:
            return MULTI_LABEL
        return REGRESSION if self.is_regression else CLASSIFICATION

    def metrics(self, predictions, labels, loss: float) -> Dict[str, float]:
        if self.is_regression:
            return regression_metrics(predictions, labels, loss, self.baseline)
        if self.multi_label:
            return multi_label_metrics(predictions, labels, self.labels, loss, self.baseline)
        return classification_metrics(predictions, labels, self.labels, loss,
                                      None if self.baseline is None else int(self.baseline))

    def settings(self) -> dict:
        """What the run directory keeps of the task (run_settings.json)."""
        return {"task": self.name, "task_type": self.task_type,
                "text_columns": list(self.columns.text_columns),
                "label_column": self.columns.label_column,
                "labels": None if self.labels is None else list(self.labels),
                "baseline": list(self.baseline) if self.multi_label else self.baseline,
                **({"label_separator": self.label_separator, "threshold": self.threshold}
                   if self.multi_label else {})}

    @classmethod
    def from_settings(cls, settings: dict) -> "FileTask":
        labels = settings.get("labels")
        multi_label = settings.get("task_type") == MULTI_LABEL
        baseline = settings.get("baseline")
        return cls(ColumnSpec(tuple(settings["text_columns"]), settings["label_column"]),
                   None if labels is None else tuple(labels),
                   tuple(baseline) if multi_label else baseline, multi_label=multi_label,
                   label_separator=settings.get("label_separator", DEFAULT_LABEL_SEPARATOR),
                   threshold=settings.get("threshold", DEFAULT_THRESHOLD))

    def iter_examples(self, rows: Iterable[Row], preprocess, labelled: bool,
                      split: str) -> Iterator[InputExample]:
        """`rows` as examples, one at a time; with `labelled`, every label must be one of
        the task's."""
        text_a_column, *rest = self.columns.text_columns
        for index, row in enumerate(rows):
            text_a = preprocess(_text(row, text_a_column))
            text_b = preprocess(_text(row, rest[0])) if rest else None
            label = self._label(row) if labelled else self.placeholder
            yield InputExample(f"{split}-{index}", text_a, text_b, label)

    def examples(self, rows: Iterable[Row], preprocess, labelled: bool,
                 split: str) -> List[InputExample]:
        return list(self.iter_examples(rows, preprocess, labelled, split))

    @property
    def placeholder(self):
        if self.multi_label:
            return ()
        return 0.0 if self.is_regression else self.labels[0]

    def _label(self, row: Row):
        if self.multi_label:
            names = _label_set(row, self.columns.label_column, self.label_separator)
            unseen = [name for name in names if name not in self.labels]
            if unseen:
                raise InputError(f"{row.where}: label {unseen[0]!r} was never seen in the "
                                 f"training file (its labels: {_shown(self.labels)})")
            return names
        text = _label_text(row, self.columns.label_column)
        if self.is_regression:
            value = _number(text)
            if value is None:
                raise InputError(f"{row.where}: label {text!r} is not a number (this is a "
                                 "regression task)")
            return value
        if text not in self.labels:
            canonical = _canonical_integer(text)
            if canonical in self.labels:
                return canonical
            raise InputError(f"{row.where}: label {text!r} was never seen in the training file "
                             f"(its labels: {_shown(self.labels)})")
        return text


def _shown(labels: Sequence[str]) -> str:
    return ", ".join(labels[:20]) + (", ..." if len(labels) > 20 else "")


def _canonical_integer(text: str) -> str:
    """'01', '+1' and '1.0' name the class '1' when the labels are integers."""
    number = _number(text)
    return str(int(number)) if number is not None and number == int(number) else text


# Distinct training labels a classification may have (beyond, the column is not classes).
MAX_CLASSES = 10000


def infer_task(rows: Iterable[Row], columns: ColumnSpec, task_type: Optional[str],
               label_separator: str = DEFAULT_LABEL_SEPARATOR,
               threshold: float = DEFAULT_THRESHOLD) -> FileTask:
    """The task the training rows define: regression, classification or multi-label, and
    the labels.

    One pass over `rows` (which may stream from files): every text must be non-empty and
    every label a class name or a number. Without `task_type`, labels that are JSON lists make
    a multi-label task, labels that are all numbers and not all integers a regression task,
    anything else (words, or integers) classification; the choice is said in the log.
    Multi-label from a CSV or TSV (names separated by `label_separator`) is asked for with
    `task_type="multi_label"`: a separator inside a class name is not told apart otherwise."""
    if task_type not in (None, *TASK_TYPES):
        raise InputError(f"--task_type must be one of {', '.join(TASK_TYPES)}, not {task_type!r}")
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        raise InputError("the training file holds no examples")
    if task_type is None and isinstance(first.fields.get(columns.label_column), list):
        logger.info("--task_type not given: the labels of column %r are lists, so this is "
                    "multi_label", columns.label_column)
        task_type = MULTI_LABEL
    rows = itertools.chain([first], rows)
    if task_type == MULTI_LABEL:
        return _infer_multi_label(rows, columns, label_separator, threshold)
    counts: collections.Counter = collections.Counter()
    total, count, integers = 0.0, 0, True
    first_word = None        # (where, text) of the first label that is not a number
    source = None
    for row in rows:
        source = source or row.where.rsplit(":", 1)[0]
        for column in columns.text_columns:
            _text(row, column)
        text = _label_text(row, columns.label_column)
        value = _number(text)
        if value is None:
            if first_word is None:
                first_word = (row.where, text)
                if task_type == REGRESSION:
                    break
        else:
            total += value
            integers = integers and value == int(value)
        count += 1
        if task_type != REGRESSION and len(counts) <= MAX_CLASSES:
            counts[text] += 1
    all_numbers = first_word is None
    if task_type is None:
        task_type = REGRESSION if all_numbers and not integers else CLASSIFICATION
        logger.info("--task_type not given: the labels of column %r are %s, so this is %s%s",
                    columns.label_column,
                    "integers" if all_numbers and integers else
                    "numbers" if all_numbers else "words", task_type,
                    " (pass --task_type=regression to predict them as numbers)"
                    if all_numbers and integers else "")
    if task_type == REGRESSION:
        if not all_numbers:
            raise InputError(f"{first_word[0]}: label {first_word[1]!r} is not a number (this "
                             "is a regression task)")
        return FileTask(columns, None, total / count)
    if len(counts) > MAX_CLASSES:
        raise InputError(f"{source}: more than {MAX_CLASSES:,} distinct labels in column "
                         f"{columns.label_column!r}; is it a class column? (--task_type="
                         "regression for numbers)")
    if all_numbers and integers:
        merged: collections.Counter = collections.Counter()
        for text, number in counts.items():
            merged[str(int(float(text)))] += number
        counts = merged
        labels = sorted(counts, key=int)
    else:
        labels = sorted(counts)
    if len(labels) < 2:
        raise InputError(f"{source}: every label in column {columns.label_column!r} is "
                         f"{labels[0]!r}; a classifier needs at least two classes")
    commonest = max(labels, key=lambda label: (counts[label], -labels.index(label)))
    return FileTask(columns, tuple(labels), float(labels.index(commonest)))


def _infer_multi_label(rows: Iterable[Row], columns: ColumnSpec, separator: str,
                       threshold: float) -> FileTask:
    """A multi-label task: the labels (alphabetical, or numerical when all are integers) and
    the baseline, the labels that more than half of the training examples have."""
    if not 0.0 < threshold < 1.0:
        raise InputError(f"--multi_label_threshold must lie between 0 and 1, not {threshold}")
    if not separator:
        raise InputError("--label_separator is empty")
    counts: collections.Counter = collections.Counter()
    examples, source = 0, None
    for row in rows:
        source = source or row.where.rsplit(":", 1)[0]
        for column in columns.text_columns:
            _text(row, column)
        counts.update(_label_set(row, columns.label_column, separator))
        examples += 1
        if len(counts) > MAX_CLASSES:
            raise InputError(f"{source}: more than {MAX_CLASSES:,} distinct labels in column "
                             f"{columns.label_column!r}; is it a label column?")
    if not counts:
        raise InputError(f"{source}: no example in column {columns.label_column!r} has a label")
    integers = all(_number(name) is not None and _number(name) == int(_number(name))
                   and str(int(_number(name))) == name for name in counts)
    labels = sorted(counts, key=int) if integers else sorted(counts)
    baseline = tuple(index for index, name in enumerate(labels) if counts[name] * 2 > examples)
    logger.info("Multi-label task: %d labels over %d training examples (%.2f a example); a "
                "label is predicted at probability >= %g", len(labels), examples,
                sum(counts.values()) / examples, threshold)
    return FileTask(columns, tuple(labels), baseline, multi_label=True,
                    label_separator=separator, threshold=threshold)
