"""Pretraining records on Apache Beam: the one-machine output, byte for byte, from a cluster.

`create_pretraining_data.py --beam_pipeline_options=...` runs this instead of
the process pool of `albert.pretraining_data.creation`. Every random decision
is already a function of (seed, dupe round, document, pair) there
(`albert.pretraining_data.instances.InstanceStreams`), and every record
carries a random 64-bit key whose order is the written order, so the same
records can be made on any number of machines and put in the same order:

1. **Read** each input file as a stream of raw documents (Beam's file
   systems: local, gs://, ...), numbered by (file, block of raw documents,
   raw document), and **tokenize** them in parallel.
2. **Number** the documents as one machine does (corpus order): the
   documents of each raw document are counted, the counts of each block
   give each raw document its first number within the block, and the
   blocks' totals (a small side input) give each block its first number.
3. **Plan** every document's pairs in every dupe round from the document
   alone. A pair whose segment B comes from a random document names that
   document (its partner stream decides which before anything is read), and
   the **join** (CoGroupByKey on the partner's number) brings each such pair
   to its partner's tokens; no worker ever holds the corpus.
4. **Finish** each pair (truncation, masks, shuffle key from its own
   stream) into its framed TFRecord.
5. **Sort**: the uniform keys are cut into ranges of about
   `RECORDS_PER_PARTITION` records; each range is sorted on one worker by
   (key, document, dupe round, pair) — the one-machine order, ties
   included — and the ranges' counts give each its first global rank. A
   record of rank r goes to output file r mod F, as on one machine: each
   range writes its part of every file as a fragment, and one worker per
   output file concatenates that file's fragments in range order.
6. The **driver** renames the finished files into place only after the
   pipeline succeeded, and writes the documents file and the summary with
   the one-machine code (`creation.write_report`). A failed pipeline leaves
   nothing at the destination; its working directory (a hidden sibling of
   the first output) is removed, or, if the driver was killed, by the next
   run.

A retried bundle recomputes the same bytes (nothing depends on bundle
boundaries or worker count) and overwrites the same fragment paths.
"""

import contextlib
import dataclasses
import json
import logging
import math
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from albert import io
from albert.errors import AlbertError, InputError
from albert.pretraining_data.corpus import RawDocument, iter_documents
from albert.pretraining_data.creation import (DataConfig, Summary, WindowWorker,
                                              check_output_paths, default_summary_path,
                                              expand_output_files, instance_stream_name,
                                              TerminationWatch, terminate_as_exception,
                                              write_report)
from albert.pretraining_data.instance_encoding import serialize_instance
from albert.pretraining_data.instances import (InstanceStatistics, InstanceStreams, PlannedPair,
                                               choose_partner, finish_pair, partner_tokens,
                                               plan_pairs)
from albert.pretraining_data.masking import MaskingStatistics
from albert.pretraining_data.schema import documents_file_for
from albert.records.tfrecord import frame_record

logger = logging.getLogger("albert")

# Records sorted together on one worker (at max_seq_length=512 a record is about 6 KB).
RECORDS_PER_PARTITION = 20000
# Raw documents numbered together; a block also ends after this many input bytes.
RAW_DOCUMENTS_PER_BLOCK = 4096
BYTES_PER_BLOCK = 64 << 20
# Brackets an input problem raised on a worker, so the driver can print it as one ERROR line
# (runners wrap a worker's exception in their own, with its traceback).
_ERROR_MARK = "<<albert-input-error>>"
_METRICS = "albert_pretraining_data"


def pipeline_options(spec: str) -> Tuple[Optional[object], PipelineOptions]:
    """(runner, options) from `runner=DataflowRunner,project=p,temp_location=gs://b/tmp`
    (comma-separated key=value, the convention of TensorFlow Datasets).

    Without a runner: Beam's FnApiRunner, the local engine behind its
    DirectRunner, named directly, because the DirectRunner first tries to
    download its "Prism" binary from the internet; `direct_num_workers=N` and
    `direct_running_mode=multi_processing` run it in N local processes.
    """
    arguments, runner = [], None
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise InputError(f"--beam_pipeline_options: {item!r} is not key=value")
        if key == "runner":
            runner = value
        arguments.append(f"--{key}={value}")
    if runner is None:
        # Only the local engine needs it (Beam imports it lazily too).
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner
        return FnApiRunner(), PipelineOptions(arguments)
    return None, PipelineOptions(arguments)


class _WithoutInputProblems(logging.Filter):
    """Drops Beam's own log (with a worker traceback) of an input problem this module
    reports as one line."""

    def filter(self, record):
        return _ERROR_MARK not in record.getMessage()


@contextlib.contextmanager
def _open_with_beam(path: str):
    handle = FileSystems.open(path, compression_type=CompressionTypes.AUTO)
    try:
        yield _Lines(handle)
    finally:
        handle.close()


class _Lines:
    """Iterating a Beam file gives its lines (bytes, with their newline)."""

    def __init__(self, handle):
        self.handle = handle

    def __iter__(self):
        return iter(self.handle.readline, b"")


def _reported(error: AlbertError) -> RuntimeError:
    return RuntimeError(f"{_ERROR_MARK}{error}{_ERROR_MARK}")


# ------------------------------------------------------------ 1-2: read, tokenize, number
class _ReadRawDocuments(beam.DoFn):
    """(file index, path) -> ((file, block), raw index, lines), streaming the file."""

    def __init__(self, raw_documents_per_block: int):
        super().__init__()
        self.raw_documents_per_block = raw_documents_per_block

    def process(self, element):
        file_index, path = element
        block, in_block, block_bytes = 0, 0, 0
        try:
            for raw_index, (document, size) in enumerate(iter_documents([path],
                                                                        _open_with_beam)):
                if in_block >= self.raw_documents_per_block or block_bytes >= BYTES_PER_BLOCK:
                    block, in_block, block_bytes = block + 1, 0, 0
                in_block += 1
                block_bytes += size
                yield (file_index, block), raw_index, document.lines
        except AlbertError as error:
            raise _reported(error) from None


class _Tokenize(beam.DoFn):
    """((file, block), raw index, lines) -> ((file, block, raw index), documents)."""

    def __init__(self, config: DataConfig):
        self.config = config

    def setup(self):
        self.worker = WindowWorker(self.config)

    def process(self, element):
        block, raw_index, lines = element
        yield (*block, raw_index), self.worker.tokenize([RawDocument(lines, "")])


def _first_numbers_in_block(element):
    """((file, block), [(raw index, how many documents it holds)]) -> ((file, block, raw
    index), the number of its first document within the block)."""
    (file_index, block), counts = element
    offset = 0
    for raw_index, count in sorted(counts):
        yield (file_index, block, raw_index), offset
        offset += count


def first_positions(counts: Dict) -> Dict:
    """{key: sum of the counts of the keys before it}, keys in sorted order: where each
    block's documents or each sort range's records start."""
    starts, running = {}, 0
    for key in sorted(counts):
        starts[key] = running
        running += counts[key]
    return starts


class _NumberDocuments(beam.DoFn):
    """((file, block, raw index), {documents, first}) -> (corpus number, segments)."""

    def setup(self):
        self.block_starts = None  # the same side input for the whole pipeline: once per worker

    def process(self, element, block_totals):
        (file_index, block, _), joined = element
        documents, = joined["documents"]
        first, = joined["first"]
        if self.block_starts is None:
            self.block_starts = first_positions(block_totals)
        start = self.block_starts[(file_index, block)] + first
        for index, segments in enumerate(documents):
            yield start + index, segments


# ------------------------------------------------------------- 3-4: pairs, partners, records
@dataclasses.dataclass
class _Counts:
    """Statistics of some records (merged into the summary)."""

    instances: InstanceStatistics
    masking: MaskingStatistics


class _RecordMaker(beam.DoFn):
    """A worker's tokenizer tables, and the finishing of a pair into a keyed record."""

    def __init__(self, config: DataConfig):
        super().__init__()
        self.config = config

    def setup(self):
        worker = WindowWorker(self.config)
        self.vocabulary, self.start_piece = worker.vocabulary, worker.start_piece
        self.cumulative = self.config.instance.masking.cumulative_ngram_probabilities()
        self.instances_counter = Metrics.counter(_METRICS, "instances")
        self.masked_counter = Metrics.counter(_METRICS, "masked_tokens")

    def record(self, document: int, dupe: int, pair: PlannedPair, streams: InstanceStreams,
               counts: _Counts):
        instance = finish_pair(pair, streams.instance(pair.number), self.config.instance,
                               self.vocabulary, self.start_piece, counts.masking,
                               counts.instances, self.cumulative)
        self.instances_counter.inc()
        self.masked_counter.inc(len(instance.masked_lm_positions))
        framed = frame_record(serialize_instance(
            instance, self.config.instance.max_seq_length,
            self.config.instance.masking.max_predictions_per_seq))
        # The one-machine order: key, then document, dupe round and pair for equal keys.
        return (instance.shuffle_key, document, dupe, pair.number), framed

    def empty_counts(self) -> _Counts:
        return _Counts(InstanceStatistics(),
                       MaskingStatistics.empty(self.config.instance.masking.ngram))


class _PlanPairs(_RecordMaker):
    """(number, segments) -> records of pairs within the document; partner requests
    (partner, (document, dupe, pair)) of the others (tagged "requests"); its counts
    (tagged "counts")."""

    def setup(self):
        super().setup()
        self.documents_counter = Metrics.counter(_METRICS, "documents")

    def process(self, element, num_documents):
        document, segments = element
        self.documents_counter.inc()
        counts = self.empty_counts()
        for dupe in range(self.config.dupe_factor):
            streams = InstanceStreams(instance_stream_name(self.config.random_seed, dupe,
                                                           document))
            for pair in plan_pairs(segments, streams.plan, self.config.instance):
                if pair.random_document:
                    partner = choose_partner(streams.partner(pair.number), document,
                                             num_documents)
                    yield beam.pvalue.TaggedOutput("requests", (partner, (document, dupe, pair)))
                else:
                    yield self.record(document, dupe, pair, streams, counts)
        yield beam.pvalue.TaggedOutput("counts", counts)


class _FillPartners(_RecordMaker):
    """(partner, {segments, requests}) -> the records of the pairs that asked for it."""

    def process(self, element, num_documents):
        partner, joined = element
        segments, = joined["segments"]
        counts = self.empty_counts()
        for document, dupe, pair in joined["requests"]:
            streams = InstanceStreams(instance_stream_name(self.config.random_seed, dupe,
                                                           document))
            rng = streams.partner(pair.number)
            choose_partner(rng, document, num_documents)  # the plan's draws, again
            pair.tokens_b = partner_tokens(rng, segments, pair.target_b_length)
            yield self.record(document, dupe, pair, streams, counts)
        yield beam.pvalue.TaggedOutput("counts", counts)


class _MergeCounts(beam.CombineFn):
    def __init__(self, ngram: int):
        self.ngram = ngram

    def create_accumulator(self):
        return _Counts(InstanceStatistics(), MaskingStatistics.empty(self.ngram))

    def add_input(self, accumulator, counts):
        accumulator.instances.merge(counts.instances)
        accumulator.masking.merge(counts.masking)
        return accumulator

    def merge_accumulators(self, accumulators):
        merged = self.create_accumulator()
        for accumulator in accumulators:
            self.add_input(merged, accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


def _sum_rows(rows) -> np.ndarray:
    total = np.zeros(3, np.int64)
    for row in rows:
        total += row
    return total


def _corpus_counts(element):
    _, segments = element
    return np.asarray([1, len(segments), sum(len(s) for s in segments)], np.int64)


# ---------------------------------------------------------------------- 5: sort and write
def partitions_for(records: int, records_per_partition: int) -> int:
    return max(1, math.ceil(records / records_per_partition))


def partition_of(key: int, partitions: int) -> int:
    """Monotone in the key: partitions in order are keys in order."""
    return min(partitions - 1, (key * partitions) >> 64)


class _WriteFragments(beam.DoFn):
    """(partition, [(sort key, framed record)]) -> (output file, (partition, records)); the
    partition's records of each output file, in order, written to the working directory."""

    def __init__(self, work_directory: str, num_outputs: int):
        self.work_directory = work_directory
        self.num_outputs = num_outputs

    def setup(self):
        self.starts = None
        self.written = Metrics.counter(_METRICS, "records_written")

    def process(self, element, partition_counts):
        partition, records = element
        if self.starts is None:
            self.starts = first_positions(partition_counts)
        records = sorted(records, key=lambda record: record[0])
        parts = [([], []) for _ in range(self.num_outputs)]
        for rank, (sort_key, framed) in enumerate(records, start=self.starts[partition]):
            framed_records, documents = parts[rank % self.num_outputs]
            framed_records.append(framed)
            documents.append(sort_key[1])
        for output, (framed_records, documents) in enumerate(parts):
            if not framed_records:
                continue
            base = fragment_path(self.work_directory, output, partition)
            _write_bytes(base + ".records", b"".join(framed_records))
            _write_bytes(base + ".documents", np.asarray(documents, "<u4").tobytes())
            self.written.inc(len(framed_records))
            yield output, (partition, len(framed_records))


def fragment_path(work_directory: str, output: int, partition: int) -> str:
    return FileSystems.join(work_directory, f"fragment-{output:05d}-{partition:09d}")


def assembled_path(work_directory: str, output: int) -> str:
    return FileSystems.join(work_directory, f"output-{output:05d}")


def _write_bytes(path: str, data: bytes) -> None:
    # A retried bundle writes the same bytes to the same path.
    handle = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        handle.write(data)
    finally:
        handle.close()


def _copy_into(path: str, target) -> None:
    handle = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        while True:
            chunk = handle.read(16 << 20)
            if not chunk:
                break
            target.write(chunk)
    finally:
        handle.close()


class _AssembleOutput(beam.DoFn):
    """(output file, [(partition, records)]) -> the file's fragments concatenated in partition
    order (in the working directory; the driver moves it into place)."""

    def __init__(self, work_directory: str):
        self.work_directory = work_directory

    def process(self, element):
        output, fragments = element
        fragments = sorted(fragments)
        handle = FileSystems.create(assembled_path(self.work_directory, output),
                                    compression_type=CompressionTypes.UNCOMPRESSED)
        try:
            for partition, _ in fragments:
                _copy_into(fragment_path(self.work_directory, output, partition) + ".records",
                           handle)
        finally:
            handle.close()
        yield output, [(partition, count) for partition, count in fragments]


def _write_json(value, path: str) -> None:
    _write_bytes(path, json.dumps(value).encode("utf-8"))


# ------------------------------------------------------------------------------ the driver
@dataclasses.dataclass(frozen=True)
class Sizes:
    """How the work is cut: never what is written (the tests cut it small)."""

    records_per_partition: int = RECORDS_PER_PARTITION
    raw_documents_per_block: int = RAW_DOCUMENTS_PER_BLOCK


def build_pipeline(pipeline, input_files: Sequence[str], config: DataConfig,
                   work_directory: str, num_outputs: int, sizes: Sizes = Sizes()) -> None:
    """The transforms of steps 1-5 on `pipeline`; results land in `work_directory`."""
    raw = (pipeline
           | "Files" >> beam.Create(list(enumerate(input_files)))
           | "Read" >> beam.ParDo(_ReadRawDocuments(sizes.raw_documents_per_block))
           # Spreads one large file's documents over the workers; the numbering below does
           # not depend on where they went.
           | "Spread" >> beam.Reshuffle())
    tokenized = raw | "Tokenize" >> beam.ParDo(_Tokenize(config))
    per_raw = tokenized | "CountPerRaw" >> beam.Map(lambda kv: (kv[0], len(kv[1])))
    firsts = (per_raw
              | "ByBlock" >> beam.Map(lambda kv: ((kv[0][0], kv[0][1]), (kv[0][2], kv[1])))
              | "GroupBlocks" >> beam.GroupByKey()
              | "FirstInBlock" >> beam.FlatMap(_first_numbers_in_block))
    block_totals = (per_raw
                    | "BlockOf" >> beam.Map(lambda kv: ((kv[0][0], kv[0][1]), kv[1]))
                    | "BlockTotals" >> beam.CombinePerKey(sum))
    documents = ({"documents": tokenized, "first": firsts}
                 | "JoinFirst" >> beam.CoGroupByKey()
                 | "Number" >> beam.ParDo(_NumberDocuments(),
                                          block_totals=beam.pvalue.AsDict(block_totals)))
    corpus = (documents
              | "CorpusCounts" >> beam.Map(_corpus_counts)
              | "SumCorpus" >> beam.CombineGlobally(_sum_rows))
    num_documents = beam.pvalue.AsSingleton(
        corpus | "NumDocuments" >> beam.Map(lambda counts: int(counts[0])))

    planned = documents | "Plan" >> beam.ParDo(
        _PlanPairs(config), num_documents=num_documents).with_outputs(
            "requests", "counts", main="records")
    filled = ({"segments": documents, "requests": planned.requests}
              | "JoinPartners" >> beam.CoGroupByKey()
              | "OnlyRequested" >> beam.Filter(lambda kv: bool(kv[1]["requests"]))
              | "Fill" >> beam.ParDo(_FillPartners(config),
                                     num_documents=num_documents).with_outputs(
                                         "counts", main="records"))
    records = (planned.records, filled.records) | "AllRecords" >> beam.Flatten()
    counts = ((planned.counts, filled.counts)
              | "AllCounts" >> beam.Flatten()
              | "MergeCounts" >> beam.CombineGlobally(_MergeCounts(config.instance.masking.ngram)))

    total = beam.pvalue.AsSingleton(records | "CountRecords" >> beam.combiners.Count.Globally())
    per_partition = sizes.records_per_partition
    keyed = records | "Partition" >> beam.Map(
        lambda record, total: (partition_of(record[0][0], partitions_for(total, per_partition)),
                               record),
        total=total)
    partition_counts = (keyed
                        | "PartitionOf" >> beam.Map(lambda kv: (kv[0], 1))
                        | "PartitionCounts" >> beam.CombinePerKey(sum))
    fragments = (keyed
                 | "GroupPartitions" >> beam.GroupByKey()
                 | "WriteFragments" >> beam.ParDo(
                     _WriteFragments(work_directory, num_outputs),
                     partition_counts=beam.pvalue.AsDict(partition_counts)))
    assembled = (fragments
                 | "GroupOutputs" >> beam.GroupByKey()
                 | "Assemble" >> beam.ParDo(_AssembleOutput(work_directory)))

    # What the driver reads back: small JSON files.
    (assembled
     | "Layout" >> beam.combiners.ToList()
     | "WriteLayout" >> beam.Map(_write_json, FileSystems.join(work_directory, "layout.json")))
    (counts
     | "CountsJson" >> beam.Map(lambda c: {"instances": dataclasses.asdict(c.instances),
                                           "masking": dataclasses.asdict(c.masking)})
     | "WriteCounts" >> beam.Map(_write_json, FileSystems.join(work_directory, "counts.json")))
    (corpus
     | "CorpusJson" >> beam.Map(lambda c: [int(x) for x in c])
     | "WriteCorpus" >> beam.Map(_write_json, FileSystems.join(work_directory, "corpus.json")))


def _read_json(path: str):
    handle = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        return json.loads(handle.read().decode("utf-8"))
    finally:
        handle.close()


def _quiet_input_problems() -> None:
    beam_logger = logging.getLogger("apache_beam")
    if not any(isinstance(f, _WithoutInputProblems) for f in beam_logger.filters):
        beam_logger.addFilter(_WithoutInputProblems())
    # Records of child loggers skip the parent's filters: filter at the handlers too.
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _WithoutInputProblems) for f in handler.filters):
            handler.addFilter(_WithoutInputProblems())


def _input_problem(error: Exception) -> Optional[str]:
    text = str(error)
    start = text.find(_ERROR_MARK)
    if start < 0:
        return None
    end = text.find(_ERROR_MARK, start + len(_ERROR_MARK))
    return text[start + len(_ERROR_MARK):end if end > 0 else None]


def create_pretraining_data_on_beam(input_patterns: str, output_spec: str, config: DataConfig,
                                    options: str, summary_file: Optional[str] = None,
                                    sizes: Sizes = Sizes()) -> dict:
    """`creation.create_pretraining_data` on Apache Beam (see the module docstring): the same
    output files, documents file and summary (but its timing), for any runner and workers."""
    config.validate()
    input_files = io.expand_file_patterns(input_patterns)
    output_files = expand_output_files(output_spec)
    summary_file = summary_file or default_summary_path(output_spec)
    check_output_paths(output_files + [summary_file, documents_file_for(summary_file)])
    for path in output_files + [summary_file, documents_file_for(summary_file)]:
        for stale in io.remove_stale_temporaries(path):
            logger.info("Removed %s, left by a run that was killed", stale)
    worker = WindowWorker(config)  # a bad tokenizer fails here, before any worker starts
    runner, beam_options = pipeline_options(options)
    _quiet_input_problems()
    start = time.time()
    work_directory = io.temporary_name(io.absolute(output_files[0]))
    moved: List[str] = []
    try:
        with _terminate_locally(runner) as termination:
            FileSystems.mkdirs(work_directory)
            with beam.Pipeline(runner=runner, options=beam_options) as pipeline:
                build_pipeline(pipeline, input_files, config, work_directory, len(output_files),
                               sizes)
            termination.check()
            corpus = _read_json(FileSystems.join(work_directory, "corpus.json"))
            counts = _read_json(FileSystems.join(work_directory, "counts.json"))
            if corpus[0] == 0 or counts["instances"]["instances"] == 0:
                raise InputError(f"No pretraining instances: the input ({input_patterns}) holds "
                                 "no documents with tokens")
            layout = dict((output, fragments) for output, fragments in
                          _read_json(FileSystems.join(work_directory, "layout.json")))
            summary = Summary(config.instance.masking.ngram)
            summary.documents, summary.segments, summary.tokens = corpus
            summary.instances = InstanceStatistics(**counts["instances"])
            summary.masking = MaskingStatistics(**counts["masking"])
            record_counts, record_documents = [], []
            for output in range(len(output_files)):
                fragments = layout.get(output, [])
                record_counts.append(sum(count for _, count in fragments))
                record_documents.append(np.concatenate(
                    [np.zeros(0, np.uint32)] + [_read_documents(work_directory, output, partition)
                                                for partition, _ in fragments]))
            termination.check()
        # From here on the outputs are put in place: SIGTERM has its default effect again
        # (a kill mid-rename is what the temporaries' names are for).
        for output, path in enumerate(output_files):
            io.makedirs(io.dirname(io.absolute(path)))
            source = assembled_path(work_directory, output)
            if not FileSystems.exists(source):  # an output file with no record
                _write_bytes(source, b"")
            FileSystems.rename([source], [io.absolute(path)])
            moved.append(path)
        return write_report(config, summary, worker.tokenizer, time.time() - start,
                            input_files, output_files, record_counts, record_documents,
                            summary_file)
    except Exception as error:
        for path in moved:  # a failure after the first rename: no output half in place
            io.remove_if_exists(path)
        problem = _input_problem(error)
        if problem is not None:
            raise InputError(problem) from None
        raise
    finally:
        if FileSystems.exists(work_directory):
            FileSystems.delete([work_directory])


@contextlib.contextmanager
def _terminate_locally(runner):
    """SIGTERM to the driver as an exception (so the working directory is removed like after
    any failure) when the pipeline runs here, on Beam's local engine. A remote runner's job
    goes on without its driver: there the driver is left to die, and its working directory
    to the user (docs/pretraining_data.md)."""
    if runner is None:
        yield TerminationWatch()  # never set: check() passes
        return
    with terminate_as_exception() as termination:
        yield termination


def _read_documents(work_directory: str, output: int, partition: int) -> np.ndarray:
    handle = FileSystems.open(fragment_path(work_directory, output, partition) + ".documents",
                              compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        return np.frombuffer(handle.read(), "<u4").astype(np.uint32)
    finally:
        handle.close()
