"""GLUE: the original's task processors, feature conversion and feature caches.

Processors read the GLUE TSV files the way the original does: tab-separated,
no quote character (quotes are literal), the header row skipped except in
CoLA's train and dev files, every text field, guid and string label passed
through the tokenizer's `preprocess_text` (SentencePiece models; lower-casing
with `do_lower_case`). A row with too few columns or an unknown label is an
error naming the file and line; QQP's short rows are skipped, as the
original does, and counted in the log. A row ends only at a line feed
(`io.split_lines`), so separators inside text (U+2028, form feeds) stay in
their field. An STS-B score that is not a finite number is an error; one
outside 0-5 is counted in a warning.

Feature conversion: pieces of A (and B); pairs are truncated by popping the
last piece of the longer side (B on ties) until `len(A) + len(B) <=
max_seq_length - 3`, singles keep their first `max_seq_length - 2` pieces;
`[CLS] A [SEP] (B [SEP])` with segment 0 up to the first `[SEP]`, 1 after;
zero-padded. Labels are indices into the task's label list; STS-B keeps the
float score.
"""

import dataclasses
import logging
import math
from typing import Dict, List, Optional, Sequence, Tuple

from albert import io
from albert.finetuning_data.feature_cache import (FeatureCache, files_fingerprint,
                                      tokenizer_settings)
from albert.errors import InputError
from albert.evaluation.glue_metrics import glue_metrics
from albert.records.example_proto import encode_example

logger = logging.getLogger("albert")

MNLI_LABELS = ("contradiction", "entailment", "neutral")
ENTAILMENT_LABELS = ("entailment", "not_entailment")
BINARY_LABELS = ("0", "1")


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where a split's fields are: column indices (-1 = last) or a guid rule."""

    text_a: int
    text_b: Optional[int] = None
    label: Optional[int] = None
    guid: Optional[int] = 0           # None: "<set>-<row>"
    header: bool = True               # the first row is a header


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One task of the original's `run_classifier.py`.

    `labels` is None for regression (STS-B). `server_files` are the names the
    GLUE server expects for its test predictions (two for MNLI: matched and
    mismatched are separate tasks here, `mnli` and `mismnli`).
    """

    name: str
    directory: str
    files: Dict[str, str]             # split -> file name ("train", "dev", "test")
    labeled: Columns                  # train and dev
    test: Columns
    labels: Optional[Tuple[str, ...]]
    placeholder: str                  # the test files' label
    best_metric: str
    server_file: str
    skip_short_rows: bool = False     # QQP: rows with missing columns are skipped
    predict_only: bool = False        # AX: test only, with an MNLI model

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    is_multi_label = False          # every GLUE example has one label
    multi_label_threshold = None

    def metrics(self, predictions, labels, loss: float) -> Dict[str, float]:
        """The original's metrics of the task (and the leaderboard's extras)."""
        return glue_metrics(self.name, predictions, labels, loss)

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)


_PAIR = Columns(text_a=1, text_b=2, label=-1)
_PAIR_TEST = Columns(text_a=1, text_b=2)
_MNLI = Columns(text_a=8, text_b=9, label=-1)
_MNLI_TEST = Columns(text_a=8, text_b=9)

TASKS: Dict[str, GlueTask] = {task.name: task for task in (
    GlueTask("cola", "CoLA", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             Columns(text_a=3, label=1, guid=None, header=False), Columns(text_a=1),
             BINARY_LABELS, "0", "matthew_corr", "CoLA.tsv"),
    GlueTask("sst-2", "SST-2", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             Columns(text_a=0, label=1, guid=None), Columns(text_a=1),
             BINARY_LABELS, "0", "eval_accuracy", "SST-2.tsv"),
    GlueTask("mrpc", "MRPC", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             Columns(text_a=3, text_b=4, label=0, guid=None), Columns(text_a=3, text_b=4),
             BINARY_LABELS, "0", "eval_accuracy", "MRPC.tsv"),
    GlueTask("sts-b", "STS-B", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             Columns(text_a=7, text_b=8, label=-1), Columns(text_a=7, text_b=8),
             None, "0", "pearson", "STS-B.tsv"),
    GlueTask("qqp", "QQP", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             Columns(text_a=3, text_b=4, label=5), _PAIR_TEST,
             BINARY_LABELS, "0", "eval_accuracy", "QQP.tsv", skip_short_rows=True),
    GlueTask("mnli", "MNLI", {"train": "train.tsv", "dev": "dev_matched.tsv",
                              "test": "test_matched.tsv"},
             _MNLI, _MNLI_TEST, MNLI_LABELS, "contradiction", "eval_accuracy", "MNLI-m.tsv"),
    GlueTask("mismnli", "MNLI", {"train": "train.tsv", "dev": "dev_mismatched.tsv",
                                 "test": "test_mismatched.tsv"},
             _MNLI, _MNLI_TEST, MNLI_LABELS, "contradiction", "eval_accuracy", "MNLI-mm.tsv"),
    GlueTask("qnli", "QNLI", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             _PAIR, _PAIR_TEST, ENTAILMENT_LABELS, "entailment", "eval_accuracy", "QNLI.tsv"),
    GlueTask("rte", "RTE", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             _PAIR, _PAIR_TEST, ENTAILMENT_LABELS, "entailment", "eval_accuracy", "RTE.tsv"),
    GlueTask("wnli", "WNLI", {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
             _PAIR, _PAIR_TEST, BINARY_LABELS, "0", "eval_accuracy", "WNLI.tsv"),
    # The diagnostic set: predictions of an MNLI model, submitted as AX.tsv.
    GlueTask("ax", "diagnostic", {"test": "diagnostic.tsv"}, _MNLI, _PAIR_TEST, MNLI_LABELS,
             "contradiction", "eval_accuracy", "AX.tsv", predict_only=True),
)}


def get_task(name: str) -> GlueTask:
    try:
        return TASKS[name.lower()]
    except KeyError:
        raise InputError(f"Unknown --task_name {name!r}; GLUE tasks: {', '.join(TASKS)}") from None


@dataclasses.dataclass(frozen=True)
class InputExample:
    guid: str
    text_a: str
    text_b: Optional[str]
    label: object  # label string, or a float for regression


def _read_tsv(path: str) -> List[List[str]]:
    """The rows of a TSV file as the original's reader saw them.

    The original reads with `csv.reader(delimiter=TAB, quotechar=None)` on
    the file's lines: with no quote character that is a split at tabs, and an
    empty line is a row without columns. Split here directly, so a row ends
    only at a line feed (`io.split_lines`) and a field has no length limit
    (the csv module refuses fields over 131,072 characters). A lone CR inside
    a field, which made the original's reader fail, stays in the field.
    """
    if not io.exists(path):
        raise InputError(f"No such file: {path}")
    return [line.split("\t") if line else [] for line in io.read_lines(path)]


def read_examples(task: GlueTask, data_dir: str, split: str,
                  preprocess=lambda text: text) -> List[InputExample]:
    """The examples of `split` ("train", "dev" or "test") of `task` in `data_dir`."""
    if split not in task.files:
        raise InputError(f"Task {task.name} has no {split} set")
    path = io.join(data_dir, task.directory, task.files[split])
    columns = task.test if split == "test" else task.labeled
    rows = _read_tsv(path)
    needed = [c for c in (columns.text_a, columns.text_b, columns.label, columns.guid)
              if c is not None]
    # A label in the last column must be a column of its own.
    width = max(c for c in needed if c >= 0) + 1 + (split != "test" and columns.label == -1)
    examples, skipped, outside = [], 0, []
    for row_index, row in enumerate(rows):
        if row_index == 0 and columns.header:
            continue
        line = f"{path}:{row_index + 1}"
        if len(row) < width:
            if task.skip_short_rows:
                skipped += 1
                continue
            raise InputError(f"{line}: {len(row)} columns, {task.name} {split} rows need at "
                             f"least {width}")
        guid = (f"{split}-{row_index}" if columns.guid is None
                else preprocess(row[columns.guid]))
        text_a = preprocess(row[columns.text_a])
        text_b = preprocess(row[columns.text_b]) if columns.text_b is not None else None
        if split == "test" or columns.label is None:
            label = task.placeholder if task.labels is not None else 0.0
        elif task.is_regression:
            label = _score(row[columns.label], line)
            if not SCORE_RANGE[0] <= label <= SCORE_RANGE[1]:
                outside.append(line)
        else:
            label = preprocess(row[columns.label])
            if label not in task.labels:
                raise InputError(f"{line}: label {label!r} is not one of {', '.join(task.labels)}")
        examples.append(InputExample(guid, text_a, text_b, label))
    if skipped:
        logger.info("%s: skipped %d rows with missing columns, as the original does", path, skipped)
    if outside:
        logger.warning("%s: %d scores outside %g-%g (first at %s); GLUE's similarity scores lie "
                       "in that range", path, len(outside), *SCORE_RANGE, outside[0])
    return examples


# STS-B's similarity scores: 0 (unrelated) to 5 (equivalent).
SCORE_RANGE = (0.0, 5.0)


def _score(text: str, line: str) -> float:
    """A regression label (not preprocessed, as the original); NaN or infinity is refused
    here, where the file and line are known, not by a diverging loss later."""
    try:
        score = float(text)
    except ValueError:
        raise InputError(f"{line}: score {text!r} is not a number") from None
    if not math.isfinite(score):
        raise InputError(f"{line}: score {text!r} is not a finite number")
    return score


@dataclasses.dataclass
class InputFeatures:
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    label_id: object  # int; float for regression; a 0/1 float per label for multi-label
    length: int       # real tokens, for length bucketing


def truncate_pair(tokens_a: List, tokens_b: List, max_length: int) -> None:
    """Pops the last piece of the longer list (B on ties) until both fit."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def convert_example(example: InputExample, task: GlueTask, max_seq_length: int,
                    tokenizer) -> InputFeatures:
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else []
    if tokens_b:
        truncate_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        tokens_a = tokens_a[:max_seq_length - 2]
    ids = ([tokenizer.cls_id] + tokenizer.convert_tokens_to_ids(tokens_a) + [tokenizer.sep_id])
    segment_ids = [0] * len(ids)
    if tokens_b:
        ids += tokenizer.convert_tokens_to_ids(tokens_b) + [tokenizer.sep_id]
        segment_ids += [1] * (len(tokens_b) + 1)
    length = len(ids)
    padding = [0] * (max_seq_length - length)
    if task.is_multi_label:
        label = [float(name in example.label) for name in task.labels]
    else:
        label = float(example.label) if task.is_regression else task.labels.index(example.label)
    return InputFeatures(ids + padding, [1] * length + padding, segment_ids + padding, label, length)


def convert_examples(examples: Sequence[InputExample], task: GlueTask, max_seq_length: int,
                     tokenizer) -> List[InputFeatures]:
    return [convert_example(example, task, max_seq_length, tokenizer) for example in examples]


# ------------------------------------------------------------------- caches
def feature_schema(max_seq_length: int, regression: bool) -> Dict[str, Tuple[str, int]]:
    """The original's GLUE TFRecord features: {name: (kind, length)}."""
    return {"input_ids": ("int64", max_seq_length), "input_mask": ("int64", max_seq_length),
            "segment_ids": ("int64", max_seq_length),
            "label_ids": ("float" if regression else "int64", 1),
            "is_real_example": ("int64", 1)}


def cache_settings(task: GlueTask, data_dir: str, split: str, max_seq_length: int,
                   tokenizer) -> dict:
    source = io.join(data_dir, task.directory, task.files[split])
    return {"task": task.name, "split": split, "max_seq_length": max_seq_length,
            **tokenizer_settings(tokenizer), "source_sha256": files_fingerprint([source])}


def serialize_features(features: InputFeatures, regression: bool) -> bytes:
    return encode_example({
        "input_ids": ("int64", features.input_ids), "input_mask": ("int64", features.input_mask),
        "segment_ids": ("int64", features.segment_ids),
        "label_ids": (("float", features.label_id) if isinstance(features.label_id, list)
                      else ("float", [features.label_id]) if regression
                      else ("int64", [features.label_id])),
        "is_real_example": ("int64", [1])})


def plan_cache(task: GlueTask, data_dir: str, split: str, cache_path: str,
               max_seq_length: int, tokenizer) -> FeatureCache:
    """The cache of a split (`<task>_train.tf_record`, `<task>_eval.tf_record`): reused when
    made with these settings, else its examples are read to be rebuilt (`FeatureCache`)."""
    if split not in task.files:
        raise InputError(f"Task {task.name} has no {split} set")
    source = io.join(data_dir, task.directory, task.files[split])
    if not io.exists(source):
        raise InputError(f"No such file: {source}")

    def read():
        examples = read_examples(task, data_dir, split, tokenizer.preprocess)
        if not examples:
            raise InputError(f"{source} holds no examples")
        return examples

    return FeatureCache.plan(cache_path, cache_settings(task, data_dir, split, max_seq_length,
                                                        tokenizer), read)


@dataclasses.dataclass(frozen=True)
class FeatureSerializer:
    """An example's cache record: its features, serialised. Picklable (with a picklable task
    and tokenizer), so that worker processes can make the records of a large file."""

    task: object  # a GlueTask or a FileTask
    max_seq_length: int
    tokenizer: object

    def __call__(self, example: InputExample) -> bytes:
        return serialize_features(convert_example(example, self.task, self.max_seq_length,
                                                  self.tokenizer), self.task.is_regression)


def write_cache(cache: FeatureCache, task: GlueTask, max_seq_length: int, tokenizer) -> int:
    """Writes a planned cache if it needs rebuilding; returns its number of records."""
    return cache.write(FeatureSerializer(task, max_seq_length, tokenizer))


def ensure_cache(task: GlueTask, data_dir: str, split: str, cache_path: str,
                 max_seq_length: int, tokenizer) -> int:
    """Makes (or reuses) the feature cache of one split; returns its number of records."""
    cache = plan_cache(task, data_dir, split, cache_path, max_seq_length, tokenizer)
    return write_cache(cache, task, max_seq_length, tokenizer)
