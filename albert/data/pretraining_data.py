"""Pretraining TFRecords from raw text: streaming, parallel, deterministic (SPEC §4).

The original read the whole corpus, made `dupe_factor` passes over it in
memory, shuffled all instances and wrote them from one process. Here the
corpus streams through in windows of `documents_per_window` consecutive
documents. Each window is an independent job with its own random generator,
seeded from `random_seed` and the window's index: its documents are
tokenized and shuffled, passed over `dupe_factor` times, and its instances
shuffled. Worker processes run windows in parallel; the main process writes
their records in window order, round-robin over the output files. So:

* memory is bounded by a few windows, not by corpus × dupe_factor;
* the output bytes depend only on the inputs and flags, never on the number
  of workers (records are serialised deterministically);
* consequences of windowing, documented: random-document negatives and the
  final shuffle stay within a window (the pretraining input pipeline
  shuffles again across files and records).

Outputs are written under temporary names and renamed at the end, so a
failed run leaves no partial files.
"""

import dataclasses
import json
import logging
import multiprocessing
import os
import random
import re
import time
from collections import deque
from typing import List, Optional

from albert.atomic_files import atomic_output_file
from albert.data.corpus import Window, expand_input_patterns, iter_windows, total_input_bytes
from albert.data.example_encoding import serialize_instance
from albert.data.instances import (InstanceConfig, InstanceStatistics,
                                   create_instances_from_document)
from albert.data.masking import MaskingStatistics, MaskingVocabulary
from albert.data.tfrecord import TFRecordWriter
from albert.errors import InputError
from albert.tokenization import load_tokenizer, require_special_tokens

logger = logging.getLogger("albert")

# Set in worker processes so that `import albert` skips Keras / TensorFlow.
LIGHTWEIGHT_IMPORT_VARIABLE = "ALBERT_LIGHTWEIGHT_IMPORT"


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Everything that determines the output bytes, plus how to run."""

    instance: InstanceConfig
    dupe_factor: int = 40
    random_seed: int = 12345
    do_lower_case: bool = True
    spm_model_file: Optional[str] = None
    vocab_file: Optional[str] = None
    documents_per_window: int = 1000

    def validate(self) -> None:
        instance, masking = self.instance, self.instance.masking
        if instance.max_seq_length < 5:
            raise InputError(f"max_seq_length={instance.max_seq_length} is too small: "
                             "[CLS] A [SEP] B [SEP] needs at least 5 positions")
        checks = [
            (masking.max_predictions_per_seq >= 1, "max_predictions_per_seq must be at least 1"),
            (0 <= masking.masked_lm_prob <= 1, "masked_lm_prob must be in [0, 1]"),
            (masking.ngram >= 1, "ngram must be at least 1"),
            (0 <= instance.short_seq_prob <= 1, "short_seq_prob must be in [0, 1]"),
            (self.dupe_factor >= 1, "dupe_factor must be at least 1"),
            (self.documents_per_window >= 1, "documents_per_window must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)


# ----------------------------------------------------------------- workers
class WindowProcessor:
    """Turns windows of raw documents into serialised records (one per process)."""

    def __init__(self, config: DataConfig):
        self.config = config
        self.tokenizer = load_tokenizer(config.vocab_file, config.spm_model_file, config.do_lower_case)
        require_special_tokens(self.tokenizer)
        self.vocabulary = MaskingVocabulary(
            vocab_size=self.tokenizer.vocab_size, mask_id=self.tokenizer.mask_id,
            cls_id=self.tokenizer.cls_id, sep_id=self.tokenizer.sep_id)
        self.start_piece = self.tokenizer.start_piece_table()

    def tokenize_documents(self, window: Window) -> List[List[List[int]]]:
        """Documents as lists of token-id segments; a line that is empty after
        preprocessing starts a new document, one without tokens is skipped."""
        tokenizer = self.tokenizer
        documents: List[List[List[int]]] = []
        for raw in window.documents:
            current: List[List[int]] = []
            for line in raw.lines:
                text = tokenizer.preprocess(line)
                if not text:
                    if current:
                        documents.append(current)
                    current = []
                    continue
                ids = tokenizer.encode_preprocessed(text)
                if ids:
                    current.append(ids)
            if current:
                documents.append(current)
        return documents

    def process(self, window: Window) -> "WindowResult":
        config = self.config
        instance_config = config.instance
        rng = random.Random(f"albert-pretraining-data/{config.random_seed}/{window.index}")
        documents = self.tokenize_documents(window)
        rng.shuffle(documents)
        masking_statistics = MaskingStatistics.empty(instance_config.masking.ngram)
        statistics = InstanceStatistics()
        records = []
        for _ in range(config.dupe_factor):
            for index in range(len(documents)):
                for instance in create_instances_from_document(
                        documents, index, rng, instance_config, self.vocabulary, self.start_piece,
                        masking_statistics, statistics):
                    records.append(serialize_instance(
                        instance, instance_config.max_seq_length,
                        instance_config.masking.max_predictions_per_seq))
        rng.shuffle(records)
        return WindowResult(
            index=window.index, records=records, input_bytes=window.input_bytes,
            documents=len(documents), segments=sum(len(d) for d in documents),
            tokens=sum(len(s) for d in documents for s in d),
            instances=statistics, masking=masking_statistics)


@dataclasses.dataclass
class WindowResult:
    index: int
    records: List[bytes]
    input_bytes: int
    documents: int
    segments: int
    tokens: int
    instances: InstanceStatistics
    masking: MaskingStatistics


_PROCESSOR: Optional[WindowProcessor] = None


def _initialise_worker(config: DataConfig) -> None:
    global _PROCESSOR
    _PROCESSOR = WindowProcessor(config)


def _process_in_worker(window: Window) -> WindowResult:
    return _PROCESSOR.process(window)


def _ordered_results(windows, config: DataConfig, num_workers: int):
    """Window results in window order, at most 2 per worker in flight."""
    if num_workers == 1:
        processor = WindowProcessor(config)
        for window in windows:
            yield processor.process(window)
        return
    # Spawned workers import only the pure-Python data code: the variable
    # keeps `import albert` from loading Keras and TensorFlow in each.
    previous = os.environ.get(LIGHTWEIGHT_IMPORT_VARIABLE)
    os.environ[LIGHTWEIGHT_IMPORT_VARIABLE] = "1"
    try:
        pool = multiprocessing.get_context("spawn").Pool(
            num_workers, initializer=_initialise_worker, initargs=(config,))
    finally:
        if previous is None:
            del os.environ[LIGHTWEIGHT_IMPORT_VARIABLE]
        else:
            os.environ[LIGHTWEIGHT_IMPORT_VARIABLE] = previous
    try:
        in_flight = deque()
        windows = iter(windows)
        exhausted = False
        while True:
            while not exhausted and len(in_flight) < 2 * num_workers:
                window = next(windows, None)
                if window is None:
                    exhausted = True
                else:
                    in_flight.append(pool.apply_async(_process_in_worker, (window,)))
            if not in_flight:
                break
            yield in_flight.popleft().get()
        pool.close()
    finally:
        pool.terminate()
        pool.join()


# ------------------------------------------------------------------ outputs
_SHARDS = re.compile(r"^(?P<base>.+)@(?P<count>\d+)$")


def expand_output_files(spec: str) -> List[str]:
    """Comma-separated files; `PATH@N` expands to `PATH-00000-of-0000N` ... (N shards)."""
    files = []
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        match = _SHARDS.match(item)
        if match:
            count = int(match["count"])
            if count < 1:
                raise InputError(f"Output shard pattern {item!r} needs at least one shard")
            files.extend(f"{match['base']}-{i:05d}-of-{count:05d}" for i in range(count))
        else:
            files.append(item)
    if not files:
        raise InputError("No output file given")
    if len(set(files)) != len(files):
        raise InputError("Output files must be distinct")
    return files


def default_summary_path(spec: str) -> str:
    first = spec.split(",")[0].strip()
    match = _SHARDS.match(first)
    return (match["base"] if match else first) + ".summary.json"


class _Summary:
    def __init__(self, ngram: int):
        self.documents = self.segments = self.tokens = 0
        self.instances = InstanceStatistics()
        self.masking = MaskingStatistics.empty(ngram)

    def add(self, result: WindowResult) -> None:
        self.documents += result.documents
        self.segments += result.segments
        self.tokens += result.tokens
        for field in dataclasses.fields(InstanceStatistics):
            setattr(self.instances, field.name,
                    getattr(self.instances, field.name) + getattr(result.instances, field.name))
        self.masking.merge(result.masking)

    def as_dict(self, seconds: float) -> dict:
        instances, masking = self.instances, self.masking
        masked = masking.replaced_by_mask + masking.kept + masking.replaced_by_random

        def fractions(counts):
            total = sum(counts) or 1
            return {str(n): count / total for n, count in enumerate(counts, start=1)}

        return {
            "documents": self.documents,
            "segments": self.segments,
            "tokens": self.tokens,
            "instances": instances.instances,
            "mean_instance_tokens": instances.tokens / max(instances.instances, 1),
            "masked_tokens": masked,
            "mean_masked_per_instance": masked / max(instances.instances, 1),
            "budget_filled_fraction": masking.budget_filled / max(masking.sequences, 1),
            "replacement": {"mask": masking.replaced_by_mask / max(masked, 1),
                            "kept": masking.kept / max(masked, 1),
                            "random": masking.replaced_by_random / max(masked, 1)},
            "ngram_drawn": fractions(masking.drawn_ngram),
            "masked_span_words": fractions(masking.masked_span_words),
            "ngram_drawn_counts": masking.drawn_ngram,
            "masked_span_words_counts": masking.masked_span_words,
            "sentence_order_labels": {
                "0": instances.instances - instances.label_one, "1": instances.label_one,
                "fraction_1": instances.label_one / max(instances.instances, 1)},
            "random_document_negatives": instances.random_document_negatives,
            "seconds": seconds,
            "instances_per_second": instances.instances / max(seconds, 1e-9),
        }


def _progress_bar(total_bytes: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total_bytes, unit="B", unit_scale=True, desc="create_pretraining_data",
                mininterval=1.0, dynamic_ncols=True)


def create_pretraining_data(input_patterns: str, output_spec: str, config: DataConfig,
                            num_workers: int = 1, summary_file: Optional[str] = None,
                            show_progress: bool = True) -> dict:
    """Writes pretraining TFRecords; returns (and writes) the summary."""
    config.validate()
    if num_workers < 1:
        raise InputError("num_workers must be at least 1")
    input_files = expand_input_patterns(input_patterns)
    output_files = expand_output_files(output_spec)
    summary_file = summary_file or default_summary_path(output_spec)
    WindowProcessor(config)  # fail fast on a bad tokenizer before starting workers

    start = time.time()
    summary = _Summary(config.instance.masking.ngram)
    progress = _progress_bar(total_input_bytes(input_files), show_progress)
    with _AtomicRecordFiles(output_files) as writers:
        written = 0
        for result in _ordered_results(iter_windows(input_files, config.documents_per_window),
                                       config, num_workers):
            for record in result.records:
                writers[written % len(writers)].write(record)
                written += 1
            summary.add(result)
            if progress is not None:
                progress.update(result.input_bytes)
                progress.set_postfix(instances=written, refresh=False)
        if progress is not None:
            progress.close()
        if written == 0:
            raise InputError(f"No pretraining instances: the input ({input_patterns}) holds no "
                             "documents with tokens")
    report = summary.as_dict(time.time() - start)
    report.update(input_files=input_files, output_files=output_files)
    with atomic_output_file(summary_file) as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, sort_keys=True)
            handle.write("\n")
    return report


class _AtomicRecordFiles:
    """TFRecord writers on temporary names, renamed to the real names only on success."""

    def __init__(self, paths: List[str]):
        self.paths = [os.path.abspath(p) for p in paths]
        self.temporary = []
        self.writers = []

    def __enter__(self):
        for path in self.paths:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            temporary = os.path.join(os.path.dirname(path),
                                     f".{os.path.basename(path)}.tmp-{os.getpid()}")
            self.temporary.append(temporary)
            self.writers.append(TFRecordWriter(temporary))
        return self.writers

    def __exit__(self, exc_type, exc, traceback):
        for writer in self.writers:
            writer.close()
        if exc_type is None:
            for temporary, path in zip(self.temporary, self.paths):
                os.replace(temporary, path)
        else:
            for temporary in self.temporary:
                if os.path.exists(temporary):
                    os.remove(temporary)
        return False
