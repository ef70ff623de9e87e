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

Before any of this, `pipeline_options` checks the user's options with Beam's
own option parser (its options and the chosen runner's) and refuses runners
that cannot run this pipeline (`UNABLE_RUNNERS`), so that a mistake is one
ERROR line that leaves nothing behind. During the run Beam's INFO lines stay
out of the output; the local engine's worker processes run this module
(`python -m albert.pretraining_data.beam_pipeline`: Beam's SDK worker with
its warnings and errors only).
"""

import contextlib
import dataclasses
import difflib
import importlib
import json
import logging
import math
import os
import shlex
import shutil
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

# Notes Beam logs when imported without its Google Cloud extras: two warnings and an INFO line
# before every run (and in every worker process). They are about file systems and BigQuery
# clients this pipeline does not use; a gs:// path on a machine without them is refused with
# its own ERROR line instead (`_check_file_systems`).
_IMPORT_NOTES = ("Failed to import GCSFileSystem", "apitools not found",
                 "No module named google.cloud.bigquery_storage")
_UNAVAILABLE_FILE_SYSTEMS: List[str] = []


class _WithoutImportNotes(logging.Filter):
    def filter(self, record):
        message = record.getMessage()
        if not message.startswith(_IMPORT_NOTES):
            return True
        if message.startswith("Failed to import GCSFileSystem"):
            _UNAVAILABLE_FILE_SYSTEMS.append(message)
        return False


# The loggers they come from (getLogger makes them before Beam's modules do).
for _name in ("", "apache_beam.io.filesystems", "apache_beam.io.gcp.bigquery"):
    if not any(type(f).__name__ == "_WithoutImportNotes" for f in logging.getLogger(_name).filters):
        logging.getLogger(_name).addFilter(_WithoutImportNotes())

import apache_beam as beam  # noqa: E402
import numpy as np  # noqa: E402
from apache_beam.io.filesystem import CompressionTypes  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.metrics import Metrics  # noqa: E402
from apache_beam.options.pipeline_options import (DirectOptions, PipelineOptions,  # noqa: E402
                                                  StandardOptions, _BeamArgumentParser)
from apache_beam.runners.runner import PipelineRunner  # noqa: E402

from albert import io  # noqa: E402
from albert.errors import AlbertError, InputError  # noqa: E402
from albert.pretraining_data.corpus import RawDocument, iter_documents  # noqa: E402
from albert.pretraining_data.creation import (DataConfig, Summary, WindowWorker,  # noqa: E402
                                              check_output_paths, default_summary_path,
                                              expand_output_files, instance_stream_name,
                                              TerminationWatch, terminate_as_exception,
                                              write_report)
from albert.pretraining_data.instance_encoding import serialize_instance  # noqa: E402
from albert.pretraining_data.instances import (InstanceStatistics, InstanceStreams,  # noqa: E402
                                               PlannedPair, choose_partner, finish_pair,
                                               partner_tokens, plan_pairs)
from albert.pretraining_data.masking import MaskingStatistics  # noqa: E402
from albert.pretraining_data.schema import documents_file_for  # noqa: E402
from albert.records.tfrecord import frame_record  # noqa: E402

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


# ------------------------------------------------------------------- options and runners
# Runners that cannot run this pipeline (what a runner= value names resolves to a class):
# why, in the words of the ERROR line. Found by running them or by reading them (Beam 2.77).
UNABLE_RUNNERS = {
    "apache_beam.runners.dask.dask_runner.DaskRunner":
        "it computes only the last leaf of a pipeline's graph (this one has three) and does not "
        "keep the outputs of a multi-output step apart",
    "apache_beam.runners.trivial_runner.TrivialRunner":
        "it has no side inputs, which the numbering and the sort of this pipeline need",
    "apache_beam.runners.interactive.interactive_runner.InteractiveRunner":
        "it is Beam's notebook runner: it caches every step's output for inspection and runs "
        "the pipeline on the DirectRunner underneath",
}
_INSTEAD = ("use Beam's local engine (no runner=) on one machine, or DataflowRunner, FlinkRunner "
            "or SparkRunner on a cluster")
_ON_OFF = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_FNAPI_RUNNER = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"


@dataclasses.dataclass
class BeamRun:
    """What `--beam_pipeline_options` asks for, checked.

    runner: a runner object, or None: Beam makes the one `options` names.
    options: Beam's pipeline options.
    local: whether the pipeline runs on this machine (SIGTERM then cleans up here).
    description: the runner and its workers, for the log.
    """

    runner: Optional[PipelineRunner]
    options: PipelineOptions
    local: bool
    description: str


class _OptionParser(_BeamArgumentParser):
    """Beam's own option parser, raising instead of printing its usage and exiting."""

    def error(self, message):
        raise InputError(f"--beam_pipeline_options: {message.replace('argument --', '')}")


def _option_parser() -> _OptionParser:
    """Every option Beam knows now: its own, and those of the runner modules imported so far
    (as `PipelineOptions.get_all_options` collects them)."""
    parser = _OptionParser(allow_abbrev=False, add_help=False)
    seen = set()
    for cls in PipelineOptions.__subclasses__():
        if str(cls) not in seen:
            seen.add(str(cls))
            cls._add_argparse_args(parser)  # pylint: disable=protected-access
    return parser


def _runner_class(name: str):
    """The runner class `runner=name` means (Beam's short names, case-insensitive, with or
    without "Runner", or a full class path), refused when it cannot run this pipeline."""
    known = {path.rsplit(".", 1)[-1].lower(): path
             for path in list(StandardOptions.ALL_KNOWN_RUNNERS) + list(UNABLE_RUNNERS)}
    path = known.get(name.lower(), known.get(name.lower() + "runner", name))
    if "." not in path:
        unable = {unable_path.rsplit(".", 1)[-1] for unable_path in UNABLE_RUNNERS}
        usable = [r for r in StandardOptions.KNOWN_RUNNER_NAMES if r not in unable]
        raise InputError(f"--beam_pipeline_options: unknown runner {name!r}; Beam's runners are "
                         f"{', '.join(usable)}, or give a runner class's full path")
    _refuse_unable(name, path)
    module, _, class_name = path.rpartition(".")
    try:
        runner_class = getattr(importlib.import_module(module), class_name)
    except Exception as error:  # noqa: B902 - any failure to load it is the user's to fix
        raise InputError(f"--beam_pipeline_options: runner={name} cannot be loaded here "
                         f"({type(error).__name__}: {error})") from None
    if not (isinstance(runner_class, type) and issubclass(runner_class, PipelineRunner)):
        raise InputError(f"--beam_pipeline_options: runner={name}: {path} is not a Beam runner")
    for base in runner_class.__mro__:
        _refuse_unable(name, f"{base.__module__}.{base.__qualname__}")
    return runner_class


def _refuse_unable(name: str, path: str) -> None:
    if path in UNABLE_RUNNERS:
        raise InputError(f"--beam_pipeline_options: runner={name} cannot run this pipeline: "
                         f"{UNABLE_RUNNERS[path]}; {_INSTEAD}")


def pipeline_options(spec: str) -> BeamRun:
    """The runner and options of `runner=DataflowRunner,project=p,temp_location=gs://b/tmp`
    (comma-separated key=value, the convention of TensorFlow Datasets; an on/off option alone
    or with =true/=false), checked against Beam's own options before anything is made: an
    unknown key, a bad value or a runner that cannot run this pipeline is an `InputError`.

    Without a runner: Beam's FnApiRunner, the local engine behind its DirectRunner, named
    directly, because the DirectRunner first tries to download its "Prism" binary from the
    internet; `direct_num_workers=N` with `direct_running_mode=multi_processing` runs it in N
    local processes (or `multi_threading`, N threads).
    """
    items = []
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        key, equals, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not key:
            raise InputError(f"--beam_pipeline_options: {item!r} is not key=value")
        items.append((item, key, value.strip() if equals else None))
    runner_name = next((value for _, key, value in reversed(items) if key == "runner"), None)
    runner_class = _runner_class(runner_name) if runner_name is not None else None
    parser = _option_parser()  # after the runner's module: its options are known too
    actions = parser._option_string_actions  # pylint: disable=protected-access
    arguments = []
    for item, key, value in items:
        action = actions.get(f"--{key}")
        if action is None:
            close = difflib.get_close_matches(
                f"--{key}", [o for o in actions if o.startswith("--")], n=1)
            hint = f" (did you mean {close[0][2:]!r}?)" if close else ""
            raise InputError(f"--beam_pipeline_options: {key!r} is not a Beam pipeline option"
                             f"{hint}")
        if action.nargs == 0:  # an on/off option
            if value is not None and value.lower() not in _ON_OFF:
                raise InputError(f"--beam_pipeline_options: {item!r}: {key} is on/off (give it "
                                 f"alone, or ={'/'.join(_ON_OFF)})")
            if value is None or _ON_OFF[value.lower()]:
                arguments.append(f"--{key}")
        elif value is None:
            raise InputError(f"--beam_pipeline_options: {item!r} is not key=value")
        else:
            arguments.append(f"--{key}={value}")
    parsed = parser.parse_args(arguments)
    local = runner_class is None or runner_class.__name__ in StandardOptions.LOCAL_RUNNERS
    given = {key for _, key, _ in items}
    _check_workers(parsed, given, local, runner_name)
    options = PipelineOptions(arguments)
    if runner_class is None or f"{runner_class.__module__}.{runner_class.__name__}" == \
            _FNAPI_RUNNER:
        runner, description = _local_engine(options)
        return BeamRun(runner, options, True, description)
    return BeamRun(None, options, local, f"runner {runner_name}")


def _check_workers(parsed, given, local: bool, runner_name: Optional[str]) -> None:
    """Worker options the chosen runner would ignore, leaving fewer workers than asked for."""
    if local:
        for key in ("num_workers", "max_num_workers"):
            if key in given:
                raise InputError(
                    f"--beam_pipeline_options: {key} is Dataflow's worker count and does nothing "
                    "on Beam's local engine; give direct_num_workers=N,"
                    "direct_running_mode=multi_processing for N processes")
        if parsed.direct_num_workers < 0:
            raise InputError("--beam_pipeline_options: direct_num_workers must be 0 (one per "
                             "core) or more")
        if parsed.direct_num_workers != 1 and parsed.direct_running_mode == "in_memory":
            raise InputError(
                f"--beam_pipeline_options: direct_num_workers={parsed.direct_num_workers} needs "
                "direct_running_mode=multi_processing (processes) or multi_threading (threads): "
                "in memory, Beam runs one worker")
    else:
        for key in ("direct_num_workers", "direct_running_mode"):
            if key in given:
                raise InputError(
                    f"--beam_pipeline_options: {key} applies to Beam's local engine only, not "
                    f"to runner={runner_name}; give that runner's own worker options")


def _local_engine(options: PipelineOptions) -> Tuple[PipelineRunner, str]:
    """Beam's FnApiRunner; in several processes, processes that run `_run_worker`."""
    # Only the local engine needs it (Beam imports it lazily too).
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers or os.cpu_count() or 1
    if direct.direct_running_mode == "multi_threading":
        return FnApiRunner(), f"Beam's local engine, {workers} threads"
    if direct.direct_running_mode != "multi_processing":
        return FnApiRunner(), "Beam's local engine, in this process"
    from apache_beam.transforms.environments import SubprocessSDKEnvironment  # only here

    # The FnApiRunner starts Beam's plain worker for multi_processing; with the mode left
    # unset it keeps the environment given here, and still starts direct_num_workers of them.
    direct.direct_running_mode = None
    environment = SubprocessSDKEnvironment.from_command_string(_worker_command())
    return (FnApiRunner(default_environment=environment),
            f"Beam's local engine, {workers} processes")


def _worker_command() -> str:
    """`python -m albert.pretraining_data.beam_pipeline`, finding this same package, with
    the light `import albert` (a worker runs only the pure-Python data code)."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    return (f"PYTHONPATH={shlex.quote(path)} ALBERT_LIGHTWEIGHT_IMPORT=1 "
            f"{shlex.quote(sys.executable)} "
            f"-m albert.pretraining_data.beam_pipeline")


class _WithoutWorkerNotes(logging.Filter):
    """A local worker's start-up warning that no main session was pickled (this pipeline
    pickles none), and its log of an input problem the driver reports as one line."""

    def filter(self, record):
        return not (record.getMessage().startswith("No semi_persistent_directory found")
                    or _reports_input_problem(record))


class _WithoutForwardedWorkerLogs(logging.Filter):
    """The copies of its workers' log lines the local engine's driver logs (as one long line
    each, "Worker: severity: ..."): the workers already wrote them to the same stderr."""

    def filter(self, record):
        return not record.getMessage().startswith("Worker: ")


class _StderrWithoutInputProblems:
    """sys.stderr, less the tracebacks of input problems Beam's SDK worker prints there
    (besides logging them) when a step fails: the driver reports those as one line."""

    def __init__(self, stream):
        self.stream = stream
        self._dropped = False

    def write(self, text):
        if _ERROR_MARK in text:
            self._dropped = True  # and the newline print() writes after it
            return len(text)
        if self._dropped and text == "\n":
            self._dropped = False
            return len(text)
        self._dropped = False
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _run_worker() -> None:
    """Beam's SDK worker, for the local engine's processes, writing its warnings and errors
    to stderr without its INFO notes (channels opened, harness starting...)."""
    from apache_beam.runners.worker import sdk_worker_main  # only a worker process needs it

    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    for handler in root.handlers:
        handler.setLevel(logging.WARNING)
        handler.addFilter(_WithoutWorkerNotes())
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    sys.stderr = _StderrWithoutInputProblems(sys.stderr)
    sdk_worker_main.main(sys.argv)


@contextlib.contextmanager
def _quiet_beam(run: BeamRun):
    """Beam's INFO lines (servers started, stages run, state caches) out of the output for
    the run, unless the log is at DEBUG (absl's --verbosity=1); its warnings and errors stay."""
    beam_logger = logging.getLogger("apache_beam")
    forwarded = logging.getLogger("apache_beam.runners.portability.local_job_service")
    saved = beam_logger.level
    quiet = logging.getLogger().getEffectiveLevel() > logging.DEBUG
    if quiet:
        beam_logger.setLevel(logging.WARNING)
    drop = _WithoutForwardedWorkerLogs()
    if run.local:  # local workers write to the same stderr themselves
        forwarded.addFilter(drop)
    saved_stderr = sys.stderr
    sys.stderr = _StderrWithoutInputProblems(saved_stderr)  # the SDK worker of 2+ threads
    try:
        yield
    finally:
        sys.stderr = saved_stderr
        forwarded.removeFilter(drop)
        if quiet:
            beam_logger.setLevel(saved)


def _check_file_systems(paths: Sequence[str]) -> None:
    """A path no Beam file system here can read or write (gs:// without Beam's [gcp] extra)
    as one ERROR line before any work, instead of a worker's traceback."""
    for path in paths:
        try:
            FileSystems.get_filesystem(path)
        except ValueError as error:
            details = "".join(f" ({note})" for note in dict.fromkeys(_UNAVAILABLE_FILE_SYSTEMS))
            raise InputError(f"{path}: {error}{details}") from None


def _missing_directories(path: str) -> List[str]:
    """The local directories above `path` that do not exist yet, deepest first."""
    if "://" in path:
        return []
    missing, directory = [], os.path.dirname(os.path.abspath(path))
    while directory and not os.path.exists(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return missing


def _remove_if_empty(directories: Sequence[str]) -> None:
    for directory in directories:
        try:
            os.rmdir(directory)
        except OSError:  # not empty (someone else's files), or already gone
            return


class _WithoutInputProblems(logging.Filter):
    """Drops Beam's own log (with a worker traceback) of an input problem this module
    reports as one line."""

    def filter(self, record):
        return not _reports_input_problem(record)


def _reports_input_problem(record: logging.LogRecord) -> bool:
    """Whether a log record is about an input problem, in its message or its traceback."""
    if _ERROR_MARK in record.getMessage():
        return True
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    return _ERROR_MARK in (record.exc_text or "")


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
    output files, documents file and summary (but its timing), on Beam's local engine or a
    runner that runs the whole Beam model (docs/pretraining_data.md lists them).

    `options` is checked first (`pipeline_options`): a mistake in it leaves nothing behind."""
    run = pipeline_options(options)
    config.validate()
    input_files = io.expand_file_patterns(input_patterns)
    output_files = expand_output_files(output_spec)
    summary_file = summary_file or default_summary_path(output_spec)
    check_output_paths(output_files + [summary_file, documents_file_for(summary_file)])
    _check_file_systems(input_files + output_files)
    for path in output_files + [summary_file, documents_file_for(summary_file)]:
        for stale in io.remove_stale_temporaries(path):
            logger.info("Removed %s, left by a run that was killed", stale)
    worker = WindowWorker(config)  # a bad tokenizer fails here, before any worker starts
    _quiet_input_problems()
    start = time.time()
    work_directory = io.temporary_name(io.absolute(output_files[0]))
    created = _missing_directories(work_directory)
    moved: List[str] = []
    logger.info("Making the records on Apache Beam: %s", run.description)
    try:
        with _terminate_locally(run.local) as termination, _quiet_beam(run):
            FileSystems.mkdirs(work_directory)
            pipeline = beam.Pipeline(runner=run.runner, options=run.options)
            try:
                with pipeline:
                    build_pipeline(pipeline, input_files, config, work_directory,
                                   len(output_files), sizes)
            finally:
                # Beam removes its scratch directory only once the pipeline has started.
                shutil.rmtree(getattr(pipeline, "local_tempdir", ""), ignore_errors=True)
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
        if FileSystems.exists(work_directory):
            FileSystems.delete([work_directory])
        _remove_if_empty(created)  # the directories this run made for its output, if empty
        problem = _input_problem(error)
        if problem is not None:
            raise InputError(problem) from None
        raise
    finally:
        if FileSystems.exists(work_directory):
            FileSystems.delete([work_directory])


@contextlib.contextmanager
def _terminate_locally(local: bool):
    """SIGTERM to the driver as an exception (so the working directory is removed like after
    any failure) when the pipeline runs here, on Beam's local engine. A remote runner's job
    goes on without its driver: there the driver is left to die, and its working directory
    to the user (docs/pretraining_data.md)."""
    if not local:
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


if __name__ == "__main__":
    _run_worker()
