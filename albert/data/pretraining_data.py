"""Pretraining TFRecords from raw text: streaming, parallel, deterministic.

The original read the whole corpus, made `dupe_factor` passes over it in
memory, shuffled all instances and wrote them from one process. Here the
corpus streams through in windows of `documents_per_window` consecutive
documents, and the work inside a window is split into small jobs that worker
processes run in parallel:

1. tokenization, in parts of a few documents;
2. instance creation (segment pairs, sentence order, masking, serialisation),
   one job per dupe round and block of documents. The window's tokenized
   documents are shared with the workers through a temporary file, since a
   random-document negative may come from any document of the window.

Every random decision of a document's instances in dupe round `d` comes from
a generator seeded with (`random_seed`, window, `d`, document), and the
window's document and record shuffles from one seeded with (`random_seed`,
window). So:

* the output bytes depend only on the inputs and flags, never on the number
  of workers or on how jobs are cut;
* a corpus of a few long documents (books) keeps every worker busy as well as
  one of many short ones;
* memory is bounded by a few windows, not by corpus × dupe_factor;
* consequences of windowing, documented: random-document negatives and the
  final shuffle stay within a window (training shuffles again across files
  and records).

Outputs are written under temporary names and renamed at the end, so a
failed run leaves no partial files; the summary beside them is the data's
contract with training (`albert.data.schema`).
"""

import dataclasses
import logging
import multiprocessing
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import OrderedDict, deque
from typing import List, Optional, Sequence

import numpy as np

from albert import io
from albert.data.corpus import iter_windows, total_input_bytes
from albert.data.example_encoding import serialize_instance
from albert.data.instances import (InstanceConfig, InstanceStatistics,
                                   create_instances_from_document)
from albert.data.masking import MaskingStatistics, MaskingVocabulary
from albert.data.schema import (SUMMARY_SUFFIX, PretrainingSchema, SpecialIds,
                                summary_contract_fields)
from albert.data.tfrecord import TFRecordWriter, frame_record
from albert.errors import InputError
from albert.tokenization import DIGIT_COMMA_RULES, load_tokenizer, require_special_tokens

logger = logging.getLogger("albert")

# Set in worker processes so that `import albert` skips Keras / TensorFlow.
LIGHTWEIGHT_IMPORT_VARIABLE = "ALBERT_LIGHTWEIGHT_IMPORT"

# Job sizes: small enough that a window splits into several jobs per worker,
# large enough that inter-process traffic stays a small part of the work.
_TOKENIZE_JOB_BYTES = 64 * 1024
_INSTANCE_JOB_TOKENS = 32768


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
    digit_comma_rule: str = "intended"

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
            (self.digit_comma_rule in DIGIT_COMMA_RULES,
             f"digit_comma_rule must be one of {', '.join(DIGIT_COMMA_RULES)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)

    @property
    def schema(self) -> PretrainingSchema:
        return PretrainingSchema(self.instance.max_seq_length,
                                 self.instance.masking.max_predictions_per_seq)


# ------------------------------------------------------ shared documents
def _starts(lengths) -> np.ndarray:
    """Offsets [0, l0, l0 + l1, ...] of consecutive runs of the given lengths."""
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, np.int64))]).astype(np.int64)


class TokenizedDocuments:
    """A window's documents (lists of segments of token ids) as three flat arrays.

    `tokens` holds every id; `segment_starts[i]:segment_starts[i+1]` is
    segment i; `document_starts[d]:document_starts[d+1]` are document d's
    segments. Saved as .npy files, workers memory-map them.
    """

    def __init__(self, tokens, segment_starts, document_starts):
        self.tokens = tokens
        self.segment_starts = segment_starts
        self.document_starts = document_starts
        self._cache = OrderedDict()

    @classmethod
    def from_documents(cls, documents: Sequence[Sequence[Sequence[int]]]) -> "TokenizedDocuments":
        segments = [segment for document in documents for segment in document]
        segment_lengths = np.fromiter((len(s) for s in segments), np.int64, len(segments))
        tokens = np.fromiter((t for s in segments for t in s), np.int32, int(segment_lengths.sum()))
        document_sizes = np.fromiter((len(d) for d in documents), np.int64, len(documents))
        return cls(tokens, _starts(segment_lengths), _starts(document_sizes))

    @classmethod
    def concatenate(cls, parts: Sequence["TokenizedDocuments"],
                    order: Optional[Sequence[int]] = None) -> "TokenizedDocuments":
        """The documents of all `parts`, in `order` (indices into their concatenation)."""
        tokens, segment_lengths, document_sizes = [], [], []
        for part in parts:
            segment_lengths.append(np.diff(part.segment_starts))
            document_sizes.append(np.diff(part.document_starts))
            tokens.append(np.asarray(part.tokens))
        whole = cls(np.concatenate(tokens) if tokens else np.zeros(0, np.int32),
                    _starts(np.concatenate(segment_lengths) if segment_lengths else []),
                    _starts(np.concatenate(document_sizes) if document_sizes else []))
        if order is None:
            return whole
        # Gather the documents' token ranges and segment lengths in the new order.
        order = np.asarray(order, np.int64)
        first_segment, last_segment = whole.document_starts[order], whole.document_starts[order + 1]
        segments = np.concatenate([np.arange(a, b) for a, b in zip(first_segment, last_segment)]
                                  or [np.zeros(0, np.int64)])
        lengths = np.diff(whole.segment_starts)[segments]
        token_index = np.concatenate(
            [np.arange(whole.segment_starts[i], whole.segment_starts[i + 1]) for i in segments]
            or [np.zeros(0, np.int64)])
        return cls(whole.tokens[token_index], _starts(lengths), _starts(last_segment - first_segment))

    _FILES = ("tokens.npy", "segment_starts.npy", "document_starts.npy")

    def save(self, directory: str) -> str:
        os.makedirs(directory, exist_ok=True)
        for name, array in zip(self._FILES, (self.tokens, self.segment_starts, self.document_starts)):
            np.save(os.path.join(directory, name), array)
        return directory

    @classmethod
    def load(cls, directory: str) -> "TokenizedDocuments":
        return cls(*(np.load(os.path.join(directory, name), mmap_mode="r") for name in cls._FILES))

    def __len__(self) -> int:
        return len(self.document_starts) - 1

    def __getitem__(self, index: int) -> List[List[int]]:
        document = self._cache.get(index)
        if document is None:
            first, last = int(self.document_starts[index]), int(self.document_starts[index + 1])
            starts = self.segment_starts[first:last + 1].tolist()
            document = [self.tokens[a:b].tolist() for a, b in zip(starts, starts[1:])]
            self._cache[index] = document
            if len(self._cache) > 256:
                self._cache.popitem(last=False)
        return document

    def token_count(self, index: int) -> int:
        first, last = int(self.document_starts[index]), int(self.document_starts[index + 1])
        return int(self.segment_starts[last] - self.segment_starts[first])


# ----------------------------------------------------------------- jobs
class WindowWorker:
    """The per-process state of data creation: tokenizer and masking tables."""

    def __init__(self, config: DataConfig):
        self.config = config
        self.tokenizer = load_tokenizer(config.vocab_file, config.spm_model_file,
                                        config.do_lower_case, config.digit_comma_rule)
        require_special_tokens(self.tokenizer)
        self.vocabulary = MaskingVocabulary(
            vocab_size=self.tokenizer.vocab_size, mask_id=self.tokenizer.mask_id,
            cls_id=self.tokenizer.cls_id, sep_id=self.tokenizer.sep_id)
        self.start_piece = self.tokenizer.start_piece_table()
        self._windows = OrderedDict()

    def tokenize(self, raw_documents) -> List[List[List[int]]]:
        """Documents as lists of token-id segments; a line that is empty after
        preprocessing starts a new document, one without tokens is skipped."""
        tokenizer = self.tokenizer
        documents: List[List[List[int]]] = []
        for raw in raw_documents:
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

    def _documents(self, shared) -> TokenizedDocuments:
        if isinstance(shared, TokenizedDocuments):
            return shared
        documents = self._windows.get(shared)
        if documents is None:
            documents = TokenizedDocuments.load(shared)
            self._windows[shared] = documents
            if len(self._windows) > 2:
                self._windows.popitem(last=False)
        return documents

    def make_instances(self, shared, window_index: int, dupe: int, first: int, last: int):
        """Instances of documents [first, last) in dupe round `dupe`.

        Returns (framed TFRecord records joined into one bytes object, their
        lengths, statistics): one large object crosses the process boundary
        instead of thousands of small ones.
        """
        config = self.config
        documents = self._documents(shared)
        masking = MaskingStatistics.empty(config.instance.masking.ngram)
        statistics = InstanceStatistics()
        records = []
        for index in range(first, last):
            rng = random.Random(
                f"albert-pretraining-data/{config.random_seed}/{window_index}/{dupe}/{index}")
            for instance in create_instances_from_document(
                    documents, index, rng, config.instance, self.vocabulary, self.start_piece,
                    masking, statistics):
                records.append(frame_record(serialize_instance(
                    instance, config.instance.max_seq_length,
                    config.instance.masking.max_predictions_per_seq)))
        return b"".join(records), [len(r) for r in records], statistics, masking


_WORKER: Optional[WindowWorker] = None


def _initialise_worker(config: DataConfig) -> None:
    global _WORKER
    _WORKER = WindowWorker(config)


def _tokenize_in_worker(raw_documents) -> TokenizedDocuments:
    return TokenizedDocuments.from_documents(_WORKER.tokenize(raw_documents))


def _instances_in_worker(shared, window_index, dupe, first, last):
    return _WORKER.make_instances(shared, window_index, dupe, first, last)


class _Done:
    """A finished job in the one-process mode (the pool's AsyncResult interface)."""

    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value


class _Jobs:
    """Runs jobs in worker processes, or in this process for `num_workers == 1`."""

    def __init__(self, config: DataConfig, num_workers: int, worker: WindowWorker):
        global _WORKER
        self.pool = None
        if num_workers == 1:
            _WORKER = worker
            return
        # Forked workers start at once. A process that has loaded TensorFlow
        # (library use, tests) has runtime threads that must not be forked:
        # there workers are spawned, importing only the pure-Python data code
        # (the variable keeps `import albert` from loading Keras and TensorFlow).
        can_fork = sys.platform.startswith("linux") and "tensorflow" not in sys.modules
        previous = os.environ.get(LIGHTWEIGHT_IMPORT_VARIABLE)
        os.environ[LIGHTWEIGHT_IMPORT_VARIABLE] = "1"
        try:
            self.pool = multiprocessing.get_context("fork" if can_fork else "spawn").Pool(
                num_workers, initializer=_initialise_worker, initargs=(config,))
        finally:
            if previous is None:
                del os.environ[LIGHTWEIGHT_IMPORT_VARIABLE]
            else:
                os.environ[LIGHTWEIGHT_IMPORT_VARIABLE] = previous

    @property
    def in_process(self) -> bool:
        return self.pool is None

    def submit(self, function, *args):
        if self.pool is None:
            return _Done(function(*args))
        return self.pool.apply_async(function, args)

    def close(self, success: bool) -> None:
        if self.pool is not None:
            if success:
                self.pool.close()
            self.pool.terminate()
            self.pool.join()
            self.pool = None


def _split_by_size(items, size, target):
    """Consecutive index ranges [a, b) of `items` holding at least `target` (by `size`) each."""
    ranges, start, total = [], 0, 0
    for index, item in enumerate(items):
        total += size(item)
        if total >= target:
            ranges.append((start, index + 1))
            start, total = index + 1, 0
    if start < len(items):
        ranges.append((start, len(items)))
    return ranges


class _FramedRecords:
    """A window's framed records, kept in the workers' blobs; iterating yields them in order."""

    def __init__(self):
        self.blobs = []
        self.slices = []  # (blob index, offset, length)

    def add(self, blob: bytes, lengths: Sequence[int]) -> None:
        offset = 0
        index = len(self.blobs)
        self.blobs.append(blob)
        for length in lengths:
            self.slices.append((index, offset, length))
            offset += length

    def shuffle(self, rng: random.Random) -> None:
        rng.shuffle(self.slices)

    def __len__(self) -> int:
        return len(self.slices)

    def __iter__(self):
        for index, offset, length in self.slices:
            yield self.blobs[index][offset:offset + length]


@dataclasses.dataclass
class WindowResult:
    index: int
    records: _FramedRecords
    input_bytes: int
    documents: int
    segments: int
    tokens: int
    instances: InstanceStatistics
    masking: MaskingStatistics


def _window_results(windows, config: DataConfig, jobs: _Jobs):
    """Window results in window order; the next windows' tokenization overlaps this one's instances."""
    scratch = tempfile.mkdtemp(prefix="albert-pretraining-data-")
    try:
        windows = iter(windows)
        tokenizing = deque()

        def submit_tokenization():
            window = next(windows, None)
            if window is not None:
                parts = _split_by_size(window.documents,
                                       lambda d: sum(len(line) for line in d.lines),
                                       _TOKENIZE_JOB_BYTES)
                tokenizing.append((window, [jobs.submit(_tokenize_in_worker,
                                                        window.documents[a:b]) for a, b in parts]))

        submit_tokenization()
        submit_tokenization()
        while tokenizing:
            window, parts = tokenizing.popleft()
            parts = [part.get() for part in parts]
            submit_tokenization()
            window_rng = random.Random(f"albert-pretraining-data/{config.random_seed}/{window.index}")
            order = list(range(sum(len(part) for part in parts)))
            window_rng.shuffle(order)
            tokenized = TokenizedDocuments.concatenate(parts, order)
            shared = tokenized if jobs.in_process else tokenized.save(
                os.path.join(scratch, f"window-{window.index}"))
            blocks = _split_by_size(range(len(tokenized)), tokenized.token_count,
                                    _INSTANCE_JOB_TOKENS)
            pending = [jobs.submit(_instances_in_worker, shared, window.index, dupe, first, last)
                       for dupe in range(config.dupe_factor) for first, last in blocks]
            records = _FramedRecords()
            statistics = InstanceStatistics()
            masking = MaskingStatistics.empty(config.instance.masking.ngram)
            for job in pending:
                blob, lengths, job_statistics, job_masking = job.get()
                records.add(blob, lengths)
                statistics.merge(job_statistics)
                masking.merge(job_masking)
            records.shuffle(window_rng)
            if not jobs.in_process:
                shutil.rmtree(shared, ignore_errors=True)
            yield WindowResult(
                index=window.index, records=records, input_bytes=window.input_bytes,
                documents=len(tokenized), segments=int(len(tokenized.segment_starts) - 1),
                tokens=int(len(tokenized.tokens)), instances=statistics, masking=masking)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
    return (match["base"] if match else first) + SUMMARY_SUFFIX


def check_output_paths(paths: Sequence[str]) -> None:
    """Every output must be a file path: a directory there is refused before any work."""
    for path in paths:
        if io.isdir(path):
            raise InputError(f"Output {path} is a directory; give a file name (e.g. "
                             f"{io.join(path, 'train.tfrecord')})")


class _Summary:
    def __init__(self, ngram: int):
        self.documents = self.segments = self.tokens = 0
        self.instances = InstanceStatistics()
        self.masking = MaskingStatistics.empty(ngram)

    def add(self, result: WindowResult) -> None:
        self.documents += result.documents
        self.segments += result.segments
        self.tokens += result.tokens
        self.instances.merge(result.instances)
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


def _warn_about_single_segment_chunks(config: DataConfig, report: dict) -> None:
    """Chunks of one segment get B from a random document: if most do, say why."""
    share = report["random_document_negatives"] / max(report["instances"], 1)
    if not config.instance.random_next_sentence and share > 0.5:
        logger.warning(
            "%.0f%% of the instances took segment B from a random document (label 1) because "
            "their chunk held a single segment: max_seq_length=%d leaves room for %d tokens, too "
            "few for two of this corpus's segments (mean %.1f tokens). Sentence-order pairs need "
            "two segments; use a longer --max_seq_length.", 100 * share,
            config.instance.max_seq_length, config.instance.max_seq_length - 3,
            report["tokens"] / max(report["segments"], 1))


def create_pretraining_data(input_patterns: str, output_spec: str, config: DataConfig,
                            num_workers: int = 1, summary_file: Optional[str] = None,
                            show_progress: bool = True) -> dict:
    """Writes pretraining TFRecords; returns (and writes) the summary."""
    config.validate()
    if num_workers < 1:
        raise InputError("num_workers must be at least 1")
    input_files = io.expand_file_patterns(input_patterns)
    output_files = expand_output_files(output_spec)
    summary_file = summary_file or default_summary_path(output_spec)
    check_output_paths(output_files + [summary_file])
    worker = WindowWorker(config)  # fail fast on a bad tokenizer before starting workers

    start = time.time()
    # Workers start before any other thread of this process exists (progress bar).
    jobs = _Jobs(config, num_workers, worker)
    summary = _Summary(config.instance.masking.ngram)
    counts = [0] * len(output_files)
    try:
        progress = _progress_bar(total_input_bytes(input_files), show_progress)
        with _AtomicRecordFiles(output_files) as writers:
            written = 0
            for result in _window_results(iter_windows(input_files, config.documents_per_window),
                                          config, jobs):
                for record in result.records:
                    writers[written % len(writers)].write_framed(record)
                    counts[written % len(writers)] += 1
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
        jobs.close(success=True)
    finally:
        jobs.close(success=False)
    report = summary.as_dict(time.time() - start)
    tokenizer = worker.tokenizer
    report.update(summary_contract_fields(
        config.schema, vocab_size=tokenizer.vocab_size,
        max_token_id=summary.instances.max_token_id,
        special_ids=SpecialIds(cls=tokenizer.cls_id, sep=tokenizer.sep_id, mask=tokenizer.mask_id),
        record_counts={io.basename(path): count for path, count in zip(output_files, counts)}))
    report.update(input_files=input_files, output_files=output_files,
                  tokenizer={"spm_model_file": config.spm_model_file,
                             "vocab_file": config.vocab_file,
                             "do_lower_case": config.do_lower_case,
                             "digit_comma_rule": config.digit_comma_rule})
    io.write_json_atomically(summary_file, report)
    _warn_about_single_segment_chunks(config, report)
    return report


class _AtomicRecordFiles:
    """TFRecord writers on temporary names, renamed to the real names only on success."""

    def __init__(self, paths: List[str]):
        self.paths = [io.absolute(p) for p in paths]
        self.temporary = []
        self.writers = []

    def __enter__(self):
        try:
            for path in self.paths:
                io.makedirs(io.dirname(path))
                temporary = io.temporary_name(path)
                self.temporary.append(temporary)
                self.writers.append(TFRecordWriter(temporary))
        except BaseException:
            self._discard()
            raise
        return self.writers

    def _discard(self) -> None:
        for writer in self.writers:
            try:
                writer.close()
            except OSError:
                pass
        for temporary in self.temporary:
            io.remove_if_exists(temporary)

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is not None:
            self._discard()
            return False
        try:
            for writer in self.writers:
                writer.close()
            for temporary, path in zip(self.temporary, self.paths):
                io.rename(temporary, path)
        except BaseException:
            self._discard()
            raise
        return False
