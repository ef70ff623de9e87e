"""The contract between pretraining data and training: the record schema and the data summary.

Record schema — one `tf.train.Example` per instance, as the original writes:

| feature | type | length |
|---|---|---|
| `input_ids`, `input_mask`, `segment_ids`, `token_boundary` | int64 | max_seq_length (0-padded) |
| `masked_lm_positions`, `masked_lm_ids` | int64 | max_predictions_per_seq (0-padded) |
| `masked_lm_weights` | float | max_predictions_per_seq (1.0 real, 0.0 padding) |
| `next_sentence_labels` | int64 | 1 (sentence order: 0 in order, 1 swapped / random) |

`token_boundary` (1 = the token starts a word) is written by
`create_pretraining_data.py` and read only for dynamic masking
(`--masked_lm_budget`); data from other tools may lack it.

Data summary — `create_pretraining_data.py` writes `<output>.summary.json`
beside its TFRecords. Besides statistics it records what training must agree
with: the sequence and prediction lengths, the vocabulary size, the largest
token id written, the tokenizer's special ids, whether `token_boundary` is
present, and the number of records in every output file (which lets training
start the input stream at any position without reading what comes before).
`run_pretraining.py` reads it (`load_data_contract`) and refuses data that
does not fit its flags or config. Files without a summary (e.g. written by
the original's script) are described from their first record and counted.
"""

import dataclasses
from io import BytesIO
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert import io
from albert.errors import InputError
from albert.records.tfrecord import count_records, first_record_lengths

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
LABEL_FEATURE = "next_sentence_labels"
FLOAT_FEATURES = ("masked_lm_weights",)
OPTIONAL_FEATURES = ("token_boundary",)

SUMMARY_SUFFIX = ".summary.json"
# Beside the summary: for every output file, the corpus document of each of its records
# (`documents_file_for`, `read_record_documents`).
DOCUMENTS_SUFFIX = ".documents.npz"


def documents_file_for(summary_path: str) -> str:
    """The record-to-document file that belongs to a data summary."""
    base = summary_path[:-len(SUMMARY_SUFFIX)] if summary_path.endswith(SUMMARY_SUFFIX) \
        else summary_path
    return base + DOCUMENTS_SUFFIX


def expand_record_patterns(patterns: str, what: str = "input") -> List[str]:
    """Comma-separated record files or globs -> record files.

    The summary and documents files sit beside the records they describe,
    so the original's habit `--input_file=data/train.tfrecord*` matches them
    too; a glob leaves them out.
    """
    return io.expand_file_patterns(patterns, what, skip_suffixes=(SUMMARY_SUFFIX, DOCUMENTS_SUFFIX))


def read_record_documents(record_file: str):
    """The corpus document index of each record of `record_file`, in file order, or None when
    its data has no record-to-document file (made before they were written)."""
    described = _summaries_beside([record_file]).get(record_file)
    if described is None:
        return None
    summary_path, summary = described
    name = summary.get("documents_file")
    path = io.join(io.dirname(summary_path), name) if name else None
    if path is None or not io.exists(path):
        return None
    arrays = np.load(BytesIO(io.read_bytes(path)), allow_pickle=False)
    key = io.basename(record_file)
    return np.array(arrays[key]) if key in arrays.files else None
SUMMARY_FORMAT_VERSION = 2


@dataclasses.dataclass(frozen=True)
class PretrainingSchema:
    """Feature names, types and lengths of pretraining records."""

    max_seq_length: int
    max_predictions_per_seq: int

    def features(self, with_token_boundary: bool = True) -> Dict[str, Tuple[str, int]]:
        """{name: (kind, length)} with kind "int64" or "float", in the table's order."""
        features = {}
        for name in SEQUENCE_FEATURES:
            if name != "token_boundary" or with_token_boundary:
                features[name] = ("int64", self.max_seq_length)
        for name in PREDICTION_FEATURES:
            features[name] = ("float" if name in FLOAT_FEATURES else "int64",
                              self.max_predictions_per_seq)
        features[LABEL_FEATURE] = ("int64", 1)
        return features

    def tf_feature_spec(self, with_token_boundary: bool = True) -> dict:
        """The `tf.io.parse_example` spec of the schema."""
        # Inside: create_pretraining_data.py uses this module without TensorFlow.
        import tensorflow as tf

        return {name: tf.io.FixedLenFeature([length], tf.float32 if kind == "float" else tf.int64)
                for name, (kind, length) in self.features(with_token_boundary).items()}


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    """Ids of the symbols training needs to know (dynamic masking)."""

    cls: int
    sep: int
    mask: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class DataContract:
    """What a set of pretraining files promises; see the module docstring.

    `vocab_size`, `max_token_id` and `special_ids` are None for files without
    a summary.
    """

    files: List[str]
    record_counts: List[int]
    max_seq_length: int
    max_predictions_per_seq: int
    has_token_boundary: bool
    vocab_size: Optional[int] = None
    max_token_id: Optional[int] = None
    special_ids: Optional[SpecialIds] = None
    # The span settings the masks were drawn with (`MASKING_SETTINGS`); None without a
    # summary that records them (dynamic masking then uses the defaults). Files made with
    # different settings are described in `masking_conflict` instead: only masks drawn on the
    # fly need one setting.
    masking: Optional[Dict[str, object]] = None
    masking_conflict: Optional[str] = None
    summaries: Tuple[str, ...] = ()
    # Files whose records are not known to be in a uniformly shuffled order
    # (a summary without `"shuffle": "global"`, or no summary at all).
    not_globally_shuffled: Tuple[str, ...] = ()

    @property
    def schema(self) -> PretrainingSchema:
        return PretrainingSchema(self.max_seq_length, self.max_predictions_per_seq)

    @property
    def total_records(self) -> int:
        return sum(self.record_counts)


# How create_pretraining_data drew its masks, beyond the rate: what masks drawn on the fly
# (run_pretraining.py --masked_lm_budget) must draw alike.
MASKING_SETTINGS = ("ngram", "favor_shorter_ngram", "do_whole_word_mask")


def summary_contract_fields(schema: PretrainingSchema, vocab_size: int, max_token_id: int,
                            special_ids: SpecialIds, record_counts: Dict[str, int],
                            masking: Dict[str, object]) -> dict:
    """The contract part of a data summary, as `create_pretraining_data` writes it."""
    return {
        "format_version": SUMMARY_FORMAT_VERSION,
        "max_seq_length": schema.max_seq_length,
        "max_predictions_per_seq": schema.max_predictions_per_seq,
        "vocab_size": vocab_size,
        "max_token_id": max_token_id,
        "special_ids": special_ids.as_dict(),
        "has_token_boundary": True,
        "masking": {name: masking[name] for name in MASKING_SETTINGS},
        # Keyed by file name: the summary sits in the same directory.
        "record_counts": record_counts,
    }


def _summaries_beside(files: Sequence[str]) -> Dict[str, Tuple[str, dict]]:
    """{data file: (summary path, summary)} for files listed by a summary in their directory."""
    found = {}
    for directory in sorted({io.dirname(path) for path in files}):
        for summary_path in io.glob(io.join(directory or ".", "*" + SUMMARY_SUFFIX)):
            try:
                summary = io.read_json(summary_path)
            except ValueError:
                continue  # not ours
            for name in (summary.get("record_counts") or {}):
                found[io.join(directory, name) if directory else name] = (summary_path, summary)
    return found


def _checked_lengths(path: str) -> Dict[str, int]:
    """Feature lengths of the first record, checked against the schema's shape."""
    lengths = first_record_lengths(path)
    for name in SEQUENCE_FEATURES + PREDICTION_FEATURES + (LABEL_FEATURE,):
        if name not in lengths and name not in OPTIONAL_FEATURES:
            raise InputError(f"{path}: records lack the feature {name!r}; is this "
                             "create_pretraining_data output?")
    for group, reference in ((SEQUENCE_FEATURES, "input_ids"),
                             (PREDICTION_FEATURES, "masked_lm_positions")):
        for name in group:
            if name in lengths and lengths[name] != lengths[reference]:
                raise InputError(f"{path}: {name} has {lengths[name]} values but {reference} "
                                 f"has {lengths[reference]}")
    return lengths


def load_data_contract(files: Sequence[str]) -> DataContract:
    """The contract of `files`: from their summaries, or read off the records themselves.

    Raises InputError when summaries disagree with each other or with the
    records of files that have none.
    """
    described = _summaries_beside(files)
    counts, values, sources, max_ids, boundaries, unshuffled = [], {}, [], [], [], []
    maskings = []
    for path in files:
        lengths = _checked_lengths(path)
        fields = {"max_seq_length": lengths["input_ids"],
                  "max_predictions_per_seq": lengths["masked_lm_positions"]}
        if path in described:
            summary_path, summary = described[path]
            for key in fields:
                if summary.get(key) != fields[key]:
                    raise InputError(f"{summary_path} says {key} = {summary.get(key)}, but the "
                                     f"records of {path} have {fields[key]}; the summary is stale")
            fields.update(vocab_size=summary.get("vocab_size"),
                          special_ids=summary.get("special_ids"))
            if summary.get("masking") is not None:
                maskings.append((summary["masking"], path))
            counts.append(int(summary["record_counts"][io.basename(path)]))
            max_ids.append(summary.get("max_token_id"))
            boundaries.append(bool(summary.get("has_token_boundary")))
            if summary.get("shuffle") != "global":
                unshuffled.append(path)
            if summary_path not in sources:
                sources.append(summary_path)
        else:
            counts.append(count_records(path))
            max_ids.append(None)
            boundaries.append("token_boundary" in lengths)
            unshuffled.append(path)
        for key, value in fields.items():
            if value is None:
                continue
            if key in values and values[key][0] != value:
                raise InputError(
                    f"The input files disagree on {key}: {values[key][1]} has {values[key][0]}, "
                    f"{path} has {value}; train on data made with one setting")
            values.setdefault(key, (value, path))
    for key in ("max_seq_length", "max_predictions_per_seq"):
        if key not in values:
            raise InputError(f"Cannot tell {key} of the input files")
    special = values.get("special_ids", (None,))[0]
    known_max_ids = [m for m in max_ids if m is not None]
    return DataContract(
        files=list(files), record_counts=counts,
        max_seq_length=values["max_seq_length"][0],
        max_predictions_per_seq=values["max_predictions_per_seq"][0],
        has_token_boundary=all(boundaries),
        vocab_size=values.get("vocab_size", (None,))[0],
        max_token_id=max(known_max_ids) if len(known_max_ids) == len(files) else None,
        special_ids=SpecialIds(**special) if special else None,
        masking=maskings[0][0] if maskings else None,
        masking_conflict=next((f"{maskings[0][1]} was made with {maskings[0][0]}, {path} with "
                               f"{masking}" for masking, path in maskings
                               if masking != maskings[0][0]), None),
        summaries=tuple(sources), not_globally_shuffled=tuple(unshuffled))
