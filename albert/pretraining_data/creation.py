"""Pretraining TFRecords from raw text: streaming, parallel, deterministic, globally shuffled.

The original read the whole corpus into memory, shuffled the documents,
made `dupe_factor` passes over them, shuffled all instances and wrote them
from one process. Here the same happens in three passes with bounded memory:

1. **Tokenize** the corpus, read once in order, in parallel jobs of a few
   documents, into an on-disk store of token ids (`albert.pretraining_data.token_store`).
2. **Make instances** (segment pairs, sentence order, masking, serialisation)
   of every document in every dupe round, in windows of `documents_per_window`
   consecutive documents and jobs of a dupe round and a block of documents.
   Workers memory-map the store, so a random-document negative is drawn from
   the whole corpus, as in the original.
3. **Write** the records in a uniformly shuffled order of all of them
   (`albert.pretraining_data.record_shuffle`: a random key per record, a two-pass bucket
   sort through a scratch file), round-robin over the output files.

Every random decision about document `i` (its place in the corpus) in dupe
round `d` comes from generators seeded with (`random_seed`, `d`, `i`): its
pairs' plan, each pair's random-document partner, each pair's truncation,
masks and shuffle key (`albert.pretraining_data.instances.InstanceStreams`).
So:

* the output bytes depend only on the inputs and flags, never on the number
  of workers, on how jobs are cut or on `documents_per_window`;
* a corpus of a few long documents (books) keeps every worker busy as well as
  one of many short ones;
* memory is bounded by a few windows of records, not by corpus × dupe_factor;
  disk holds the scratch (about 4 bytes per corpus token plus the output's
  size) beside the first output file (in the system's temporary directory
  when the output is remote), removed whatever happens, SIGTERM included; a
  local scratch left by a run killed outright is removed by the next run.

Outputs are written under temporary names and renamed at the end, so a
failed run leaves no partial files; the summary beside them is the data's
contract with training (`albert.pretraining_data.schema`).
"""

import contextlib
import dataclasses
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections import deque
from io import BytesIO
from typing import List, Optional, Sequence

import numpy as np

from albert import io
from albert.cli import progress_display
from albert.errors import AlbertError, InputError
from albert.pretraining_data.corpus import iter_windows, total_input_bytes
from albert.pretraining_data.instance_encoding import serialize_instance
from albert.pretraining_data.instances import (InstanceConfig, InstanceStatistics,
                                               InstanceStreams,
                                               create_instances_from_document)
from albert.pretraining_data.masking import MaskingStatistics, MaskingVocabulary
from albert.pretraining_data.record_shuffle import GlobalRecordShuffle
from albert.pretraining_data.schema import (SUMMARY_SUFFIX, PretrainingSchema, SpecialIds,
                                            documents_file_for, summary_contract_fields)
from albert.pretraining_data.token_store import TokenizedDocuments, TokenStoreWriter
from albert.records.tfrecord import TFRecordWriter, frame_record
from albert.tokenization import DIGIT_COMMA_RULES, load_tokenizer, require_special_tokens
from albert.worker_pool import start_pool

logger = logging.getLogger("albert")

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
        self._corpus = None  # (scratch directory, TokenizedDocuments) in worker processes

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
        if self._corpus is None or self._corpus[0] != shared:
            self._corpus = (shared, _open_corpus(shared))
        return self._corpus[1]

    def make_instances(self, shared, dupe: int, first: int, last: int):
        """Instances of the corpus's documents [first, last) in dupe round `dupe`.

        Returns (framed TFRecord records joined into one bytes object, their
        lengths, their shuffle keys, their corpus documents, instance statistics,
        masking statistics): one large object crosses
        the process boundary instead of thousands of small ones. Each
        instance carries a 64-bit key from its own generator: the record's
        place in the output (`albert.pretraining_data.record_shuffle`).
        """
        config = self.config
        documents = self._documents(shared)
        masking = MaskingStatistics.empty(config.instance.masking.ngram)
        statistics = InstanceStatistics()
        records, keys, corpus_documents = [], [], []
        for document in range(first, last):
            streams = InstanceStreams(instance_stream_name(config.random_seed, dupe, document))
            instances = create_instances_from_document(
                documents, document, streams, config.instance, self.vocabulary, self.start_piece,
                masking, statistics)
            for instance in instances:
                records.append(frame_record(serialize_instance(
                    instance, config.instance.max_seq_length,
                    config.instance.masking.max_predictions_per_seq)))
                keys.append(instance.shuffle_key)
            # Each record's corpus document travels with it through the shuffle.
            corpus_documents.extend([document] * len(instances))
        return (b"".join(records), [len(r) for r in records], np.asarray(keys, np.uint64),
                np.asarray(corpus_documents, np.uint32), statistics, masking)


_WORKER: Optional[WindowWorker] = None


def _initialise_worker(config: DataConfig) -> None:
    global _WORKER
    _WORKER = WindowWorker(config)


def _tokenize_in_worker(raw_documents) -> TokenizedDocuments:
    return TokenizedDocuments.from_documents(_WORKER.tokenize(raw_documents))


def _instances_in_worker(shared, dupe, first, last):
    return _WORKER.make_instances(shared, dupe, first, last)


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
        self.pool = start_pool(num_workers, _initialise_worker, (config,))

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


def _split_by_size(sizes: Sequence[int], target: int):
    """Consecutive index ranges [a, b) whose `sizes` add up to at least `target` each."""
    ranges, start, total = [], 0, 0
    for index, size in enumerate(sizes):
        total += int(size)
        if total >= target:
            ranges.append((start, index + 1))
            start, total = index + 1, 0
    if start < len(sizes):
        ranges.append((start, len(sizes)))
    return ranges


# ---------------------------------------------------------- the three passes
# Jobs of this many windows run ahead of the one being collected, so the
# workers never wait for the main process.
_WINDOWS_IN_FLIGHT = 2
_STORE_DIRECTORY = "documents"


def instance_stream_name(seed: int, dupe: int, document: int) -> str:
    """What seeds the random streams of corpus document `document` in dupe round `dupe`."""
    return f"albert-pretraining-data/{seed}/{dupe}/{document}"


def _open_corpus(scratch: str) -> TokenizedDocuments:
    return TokenizedDocuments.open(os.path.join(scratch, _STORE_DIRECTORY))


def _tokenize_corpus(input_files, config: DataConfig, jobs: _Jobs, scratch: str,
                     progress) -> TokenizedDocuments:
    """Pass 1: the corpus, read once in order, tokenized in parallel into the store."""
    writer = TokenStoreWriter(os.path.join(scratch, _STORE_DIRECTORY))
    pending = deque()

    def collect_oldest():
        window, parts = pending.popleft()
        for part in parts:
            writer.add(part.get())
        _advance(progress, window.input_bytes)

    for window in iter_windows(input_files, config.documents_per_window):
        parts = _split_by_size([sum(len(line) for line in d.lines) for d in window.documents],
                               _TOKENIZE_JOB_BYTES)
        pending.append((window, [jobs.submit(_tokenize_in_worker, window.documents[a:b])
                                 for a, b in parts]))
        if len(pending) > _WINDOWS_IN_FLIGHT:
            collect_oldest()
    while pending:
        collect_oldest()
    return writer.close()


def _create_instances(corpus: TokenizedDocuments, shared, config: DataConfig, jobs: _Jobs,
                      shuffle: GlobalRecordShuffle, summary: "Summary", progress) -> None:
    """Pass 2: instances of every document in every dupe round, window by window.

    A window is `documents_per_window` consecutive documents of the corpus;
    its records go to the global shuffle's scratch file, so memory holds a
    few windows' records at most.
    """
    token_counts = corpus.token_counts()
    pending = deque()

    def collect_oldest():
        window_documents, window_jobs = pending.popleft()
        framed, keys, corpus_documents = [], [], []
        for job in window_jobs:
            blob, lengths, job_keys, job_documents, statistics, masking = job.get()
            view, offset = memoryview(blob), 0
            for length in lengths:  # views, not copies: the window's records are held once
                framed.append(view[offset:offset + length])
                offset += length
            keys.append(job_keys)
            corpus_documents.append(job_documents)
            summary.instances.merge(statistics)
            summary.masking.merge(masking)
        # One batch per window, not per job: the shuffle keeps a row of bucket offsets per
        # batch, so its index stays windows x buckets (a window has dupe_factor x blocks jobs).
        shuffle.add(framed, np.concatenate(keys), np.concatenate(corpus_documents))
        _advance(progress, window_documents)

    for start in range(0, len(corpus), config.documents_per_window):
        end = min(len(corpus), start + config.documents_per_window)
        blocks = _split_by_size(token_counts[start:end], _INSTANCE_JOB_TOKENS)
        pending.append((end - start, [
            jobs.submit(_instances_in_worker, shared, dupe, start + first, start + last)
            for dupe in range(config.dupe_factor) for first, last in blocks]))
        if len(pending) > _WINDOWS_IN_FLIGHT:
            collect_oldest()
    while pending:
        collect_oldest()


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
    """Every output must be a new file path: a directory or an existing file there is refused
    before any work (a run never overwrites data that is already there)."""
    for path in paths:
        if io.isdir(path):
            raise InputError(f"Output {path} is a directory; give a file name (e.g. "
                             f"{io.join(path, 'train.tfrecord')})")
    existing = [path for path in paths if io.exists(path)]
    if existing:
        raise InputError(f"Output {existing[0]} already exists"
                         f"{f' (and {len(existing) - 1} more)' if len(existing) > 1 else ''}; "
                         "data creation never overwrites: remove it or choose another "
                         "--output_file")


class Summary:
    """What the summary file reports of the corpus and the instances (either engine)."""

    def __init__(self, ngram: int):
        self.documents = self.segments = self.tokens = 0
        self.instances = InstanceStatistics()
        self.masking = MaskingStatistics.empty(ngram)

    def set_corpus(self, documents: TokenizedDocuments) -> None:
        self.documents = len(documents)
        self.segments = int(len(documents.segment_starts) - 1)
        self.tokens = int(len(documents.tokens))

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
            # The written order is a uniform shuffle of all records (see
            # albert.pretraining_data.record_shuffle); run_pretraining.py checks this.
            "shuffle": "global",
            "seconds": seconds,
            "instances_per_second": instances.instances / max(seconds, 1e-9),
        }


def _progress_bar(total: int, description: str, unit: str, enabled: bool, unit_scale=False):
    if not enabled:
        return None

    return progress_display(total, description, unit, unit_scale=unit_scale)


def _advance(progress, amount: int) -> None:
    if progress is not None:
        progress.update(amount)


def _close(progress) -> None:
    if progress is not None:
        progress.close()


class _Terminated(AlbertError):
    """SIGTERM, as an exception: the run's cleanup runs as for any failure."""

    def __init__(self):
        super().__init__("terminated (SIGTERM); nothing was written")


class TerminationWatch:
    """Whether SIGTERM arrived. The handler raises where the main thread is, but a library
    may catch that exception (Beam imports optional modules under `except Exception`), so
    callers also `check()` before anything is put in place."""

    def __init__(self):
        self.received = False

    def check(self) -> None:
        if self.received:
            raise _Terminated()


@contextlib.contextmanager
def terminate_as_exception():
    """Turns SIGTERM into an exception (so the caller's cleanup runs) for the block; yields
    a `TerminationWatch`."""
    watch = TerminationWatch()
    if threading.current_thread() is not threading.main_thread():
        yield watch
        return

    def handler(signum, frame):
        watch.received = True
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield watch
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _scratch_directory(first_output: str):
    """Working space for the token store and the shuffle, removed whatever happens.

    Beside the first output when it is local (the file system the user chose
    for data of this size), named like the outputs' temporaries so that a
    later run removes it if this one is killed outright; in the system's
    temporary directory for remote outputs.
    """
    if io.is_remote(first_output):
        directory = tempfile.mkdtemp(prefix="albert-pretraining-data-")
    else:
        directory = io.temporary_name(io.absolute(first_output))
        os.makedirs(directory)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


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
    """Writes pretraining TFRecords; returns (and writes) the summary.

    Three passes: tokenize the corpus into an on-disk store (in corpus
    order, in parallel); make every document's instances in every dupe
    round into a global shuffle; write the shuffled records round-robin to
    the outputs. Scratch space: about 4 bytes per corpus token plus the
    output's size, beside the first output (or, for a remote output, in the
    system's temporary directory).
    """
    config.validate()
    if num_workers < 1:
        raise InputError("num_workers must be at least 1")
    input_files = io.expand_file_patterns(input_patterns)
    output_files = expand_output_files(output_spec)
    summary_file = summary_file or default_summary_path(output_spec)
    documents_file = documents_file_for(summary_file)
    check_output_paths(output_files + [summary_file, documents_file])
    for path in output_files + [summary_file, documents_file]:
        for stale in io.remove_stale_temporaries(path):
            logger.info("Removed %s, left by a run that was killed", stale)
    worker = WindowWorker(config)  # fail fast on a bad tokenizer before starting workers

    start = time.time()
    # Workers start before any other thread of this process exists (progress bar).
    jobs = _Jobs(config, num_workers, worker)
    summary = Summary(config.instance.masking.ngram)
    counts = [0] * len(output_files)
    record_documents = [[] for _ in output_files]
    try:
        with terminate_as_exception() as termination, \
                _scratch_directory(output_files[0]) as scratch:
            progress = _progress_bar(total_input_bytes(input_files), "tokenizing", "B",
                                     show_progress, unit_scale=True)
            documents = _tokenize_corpus(input_files, config, jobs, scratch, progress)
            _close(progress)
            summary.set_corpus(documents)
            if len(documents) == 0:
                raise InputError(f"No pretraining instances: the input ({input_patterns}) holds "
                                 "no documents with tokens")
            corpus = _open_corpus(scratch)
            shared = corpus if jobs.in_process else scratch
            # As many buckets as windows: a bucket holds about a window's records.
            shuffle = GlobalRecordShuffle(scratch, -(-len(documents) // config.documents_per_window))
            progress = _progress_bar(len(documents), "instances", "document", show_progress)
            _create_instances(corpus, shared, config, jobs, shuffle, summary, progress)
            _close(progress)
            jobs.close(success=True)
            if shuffle.records == 0:
                raise InputError(f"No pretraining instances: the input ({input_patterns}) holds "
                                 "no documents with tokens")
            termination.check()
            progress = _progress_bar(shuffle.records, "writing", "record", show_progress)
            with _AtomicRecordFiles(output_files) as writers:
                for written, (document, record) in enumerate(shuffle):
                    writers[written % len(writers)].write_framed(record)
                    record_documents[written % len(writers)].append(document)
                    counts[written % len(writers)] += 1
                    if written % 4096 == 4095:
                        _advance(progress, 4096)
                _advance(progress, shuffle.records % 4096)
            _close(progress)
    finally:
        jobs.close(success=False)
    return write_report(config, summary, worker.tokenizer, time.time() - start, input_files,
                        output_files, counts, record_documents, summary_file)


def write_report(config: DataConfig, summary: "Summary", tokenizer, seconds: float,
                 input_files: List[str], output_files: List[str], counts: List[int],
                 record_documents: List[Sequence[int]], summary_file: str) -> dict:
    """The documents file and the summary, once the records are in place (either engine)."""
    report = summary.as_dict(seconds)
    report.update(summary_contract_fields(
        config.schema, vocab_size=tokenizer.vocab_size,
        max_token_id=summary.instances.max_token_id,
        special_ids=SpecialIds(cls=tokenizer.cls_id, sep=tokenizer.sep_id, mask=tokenizer.mask_id),
        record_counts={io.basename(path): count for path, count in zip(output_files, counts)},
        masking=dataclasses.asdict(config.instance.masking)))
    documents_file = documents_file_for(summary_file)
    _write_record_documents(documents_file, output_files, record_documents)
    report.update(documents_file=io.basename(documents_file),
                  input_files=input_files, output_files=output_files,
                  tokenizer={"spm_model_file": config.spm_model_file,
                             "vocab_file": config.vocab_file,
                             "do_lower_case": config.do_lower_case,
                             "digit_comma_rule": config.digit_comma_rule})
    io.write_json_atomically(summary_file, report)
    _warn_about_single_segment_chunks(config, report)
    return report


def _write_record_documents(path: str, output_files: List[str],
                            record_documents: List[Sequence[int]]) -> None:
    """For each output file, the corpus document index of each of its records, in file order:
    held-out records of one document share topic and style, so evaluation resamples whole
    documents (`python -m albert.paper evaluate`)."""
    buffer = BytesIO()
    np.savez(buffer, **{io.basename(file): np.asarray(documents, np.uint32)
                        for file, documents in zip(output_files, record_documents)})
    io.write_bytes_atomically(path, buffer.getvalue())


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
