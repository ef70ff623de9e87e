"""The paper's Table 2 speed column, measured on this machine.

    python -m albert.paper speed --output=speed.json     # six sizes, 1 process and 2 workers
    python -m albert.paper speed --quick                 # a first table in a minute or two
    python -m albert.paper speed --models=bert-large,albert-large --workers=1 \
        --batch_size=16 --seq_length=128 --output=large.json

Table 2 gives each model's training throughput relative to BERT-large on the
same TPU set-up: BERT-base 4.7, BERT-large 1.0, ALBERT-base 5.6, ALBERT-large
1.7, ALBERT-xlarge 0.6, ALBERT-xxlarge 0.3. This command builds the same six
models (`albert.paper.params`: BERT is not-shared with E = H, so it has no
embedding projection, as the original builds E = H; ALBERT is all-shared with
E = 128) and times full pretraining steps — masked LM + sentence order, LAMB,
the training loop's own device step — on one batch of random tokens of one
shape, `--warmup_steps` steps (tracing, first-call costs) before
`--steps` timed ones. Every measurement runs in fresh processes
(`albert.paper.speed_worker`): one process with all `--threads`, or N
workers of a local MultiWorkerMirroredStrategy cluster (TF_CONFIG on
localhost ports, as `run_pretraining.py` runs on several machines), each
with `--threads` / N threads and 1/N of the global batch, so the gradients
cross the workers' all-reduce every step.

Reported per model: examples per second, the speed-up over BERT-large measured
the same way (beside the paper's), the bytes the gradient all-reduce sums per
step (every trainable parameter, heads included, in float32) and how many
times fewer than BERT-large's — the paper's explanation of ALBERT's speed-up:
less communication and fewer weights to update. Peak resident memory per
process is reported too. The JSON (`--output`) holds every figure with the
CPU, its features, TensorFlow's version, the threads and the date; a
markdown table goes beside it (`<output>.md`). Neither file is overwritten.

What the paper's TPU numbers and a CPU's need not share: the compute of a
shared layer is the same as an unshared one's, so on a machine where compute
dominates (a CPU, where workers talk through local memory) sharing saves
memory, gradient traffic and optimizer work, not FLOPs.
"""

import dataclasses
import datetime
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence

from albert import io
from albert.config import AlbertConfig
from albert.errors import AlbertError, InputError
from albert.paper.params import VOCAB_SIZE, albert_config, bert_config
from albert.paper.speed_worker import kernel_figure_bytes
from albert.training.cpu_features import cpu_features

# Table 2's "Speedup" column: training throughput relative to BERT-large.
PAPER_SPEEDUP = {"bert-base": 4.7, "bert-large": 1.0, "albert-base": 5.6, "albert-large": 1.7,
                 "albert-xlarge": 0.6, "albert-xxlarge": 0.3}
REFERENCE = "bert-large"
# CPU features that decide how fast a step can be, shown in the markdown (the JSON has all).
SHOWN_CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                      "amx_bf16")
BYTES_PER_GIB = 2 ** 30
BYTES_PER_MIB = 2 ** 20


@dataclasses.dataclass(frozen=True)
class SpeedModel:
    """A model to time: its name, config and Table 2's speed-up (None: not in the paper)."""

    name: str
    config: AlbertConfig
    paper_speedup: Optional[float] = None


def paper_models(vocab_size: int = VOCAB_SIZE) -> Dict[str, SpeedModel]:
    """Table 2's six models, with the vocabulary `vocab_size`."""
    configs = {"bert-base": bert_config("base"), "bert-large": bert_config("large"),
               **{f"albert-{size}": albert_config(size)
                  for size in ("base", "large", "xlarge", "xxlarge")}}
    return {name: SpeedModel(name, dataclasses.replace(config, vocab_size=vocab_size),
                             PAPER_SPEEDUP[name])
            for name, config in configs.items()}


def sharing_of(config: AlbertConfig) -> str:
    """The cross-layer sharing of a config, in the paper's words."""
    if config.sharing_strategy != "groups":
        return config.sharing_strategy.replace("_", "-")
    if config.num_hidden_groups == 1:
        return "all-shared"
    if config.num_hidden_groups == config.num_hidden_layers:
        return "not-shared"
    return f"{config.num_hidden_groups} groups"


@dataclasses.dataclass(frozen=True)
class SpeedSettings:
    """The shape and length of every measurement, and the machine's threads to use."""

    batch_size: int = 8               # global: split between the workers
    seq_length: int = 64
    max_predictions_per_seq: int = 10
    warmup_steps: int = 1
    steps: int = 3
    threads: int = 0                  # 0: every core this process may use

    def resolved_threads(self) -> int:
        return self.threads or len(os.sched_getaffinity(0))

    def validate(self, workers: Sequence[int]) -> None:
        positive = {"batch_size": self.batch_size, "seq_length": self.seq_length,
                    "max_predictions_per_seq": self.max_predictions_per_seq,
                    "warmup_steps": self.warmup_steps, "steps": self.steps}
        for name, value in positive.items():
            if value < 1:
                raise InputError(f"--{name} must be at least 1, got {value}")
        if self.threads < 0:
            raise InputError(f"--threads must be at least 1 (0: every core), got {self.threads}")
        if self.max_predictions_per_seq > self.seq_length - 2:
            raise InputError(f"--max_predictions_per_seq={self.max_predictions_per_seq} does "
                             f"not fit --seq_length={self.seq_length} (at most seq_length - 2: "
                             "the first and last positions are never masked)")
        if not workers or min(workers) < 1:
            raise InputError("--workers: worker counts of at least 1, such as 1,2")
        for count in workers:
            if self.batch_size % count:
                raise InputError(f"--batch_size={self.batch_size} does not split between "
                                 f"{count} workers")
            if self.resolved_threads() < count:
                raise InputError(f"--workers={count} needs at least one thread each; "
                                 f"--threads={self.resolved_threads()}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _worker_environments(workers: int, threads: int) -> List[dict]:
    """Each process's environment: alone without TF_CONFIG, or one worker of a local cluster."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    base = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    base["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [part for part in base.get("PYTHONPATH", "").split(os.pathsep) if part])
    base.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    base["OMP_NUM_THREADS"] = str(threads)
    if workers == 1:
        return [base]
    cluster = {"worker": [f"localhost:{_free_port()}" for _ in range(workers)]}
    return [dict(base, TF_CONFIG=json.dumps({"cluster": cluster,
                                             "task": {"type": "worker", "index": index}}))
            for index in range(workers)]


class MeasurementFailed(Exception):
    """A model's processes did not finish (out of memory, a TensorFlow error)."""


class MeasurementsFailed(AlbertError):
    """Some measurements could not run here (their rows in the report say why)."""


def _last_error_line(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = [line.strip() for line in handle if line.strip()]
    errors = [line for line in lines if "Error" in line or "error" in line]
    return (errors or lines or ["no output"])[-1][:500]


def _wait_for(processes: List[subprocess.Popen], logs: List[str]) -> None:
    """Waits for every worker; when one fails, stops the others (they would wait for it)."""
    try:
        while True:
            codes = [process.poll() for process in processes]
            failed = [index for index, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                index = failed[0]
                code = codes[index]
                reason = (f"killed by signal {-code}" + (" (out of memory?)" if code == -9 else "")
                          if code < 0 else f"exit status {code}: {_last_error_line(logs[index])}")
                raise MeasurementFailed(f"process {index} ended with {reason}")
            if all(code == 0 for code in codes):
                return
            time.sleep(0.2)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()


def measure_model(model: SpeedModel, settings: SpeedSettings, workers: int,
                  scratch: str) -> dict:
    """One model on `workers` processes: each process's `speed_worker` result."""
    threads = max(1, settings.resolved_threads() // workers)
    directory = tempfile.mkdtemp(prefix=f"{model.name}-{workers}-", dir=scratch)
    config_file = os.path.join(directory, "albert_config.json")
    with open(config_file, "w", encoding="utf-8") as handle:
        handle.write(model.config.to_json_string())
    processes, logs, results = [], [], []
    for index, environment in enumerate(_worker_environments(workers, threads)):
        results.append(os.path.join(directory, f"result-{index}.json"))
        logs.append(os.path.join(directory, f"stderr-{index}.txt"))
        command = [sys.executable, "-m", "albert.paper.speed_worker",
                   f"--config={config_file}", f"--train_batch_size={settings.batch_size}",
                   f"--seq_length={settings.seq_length}",
                   f"--max_predictions_per_seq={settings.max_predictions_per_seq}",
                   f"--warmup_steps={settings.warmup_steps}", f"--steps={settings.steps}",
                   f"--threads={threads}", f"--name={model.name}", f"--result={results[-1]}"]
        with open(logs[-1], "w", encoding="utf-8") as stderr:
            processes.append(subprocess.Popen(command, env=environment, stderr=stderr))
    _wait_for(processes, logs)
    per_worker = []
    for path in results:
        with open(path, encoding="utf-8") as handle:
            per_worker.append(json.load(handle))
    return _model_result(model, settings, workers, threads, per_worker)


def _model_result(model: SpeedModel, settings: SpeedSettings, workers: int, threads: int,
                  per_worker: List[dict]) -> dict:
    config = model.config
    chief = per_worker[0]
    # The workers step together (the all-reduce waits for the slowest): the slowest worker's
    # time is the cluster's.
    seconds = max(result["timed_seconds"] for result in per_worker)
    cpu = sum(result["timed_cpu_seconds"] for result in per_worker)
    return {
        "model": model.name, "workers": workers, "threads_per_worker": threads,
        "L": config.num_hidden_layers, "H": config.hidden_size, "E": config.embedding_size,
        "I": config.intermediate_size, "N": config.num_attention_heads, "V": config.vocab_size,
        "sharing": sharing_of(config),
        "embedding_projection": chief["embedding_projection"],
        "attention_blocks": chief["attention_blocks"], "ffn_blocks": chief["ffn_blocks"],
        "trainable_parameters": chief["trainable_parameters"],
        "allreduce_bytes_per_step": chief["allreduce_bytes_per_step"],
        "strategy": chief["strategy"], "replicas": chief["replicas"],
        "jit_compile": chief["jit_compile"], "tensorflow": chief["tensorflow"],
        "seconds_per_step": seconds / settings.steps,
        "examples_per_second": settings.batch_size * settings.steps / seconds,
        "seconds_per_step_each_call": chief["seconds_per_step_each_call"],
        "warmup_seconds": max(result["warmup_seconds"] for result in per_worker),
        # About 1 when the processes had their threads' cores to themselves.
        "cpu_utilisation": cpu / (seconds * threads * workers),
        "peak_memory_bytes_per_worker": max(result["peak_memory_bytes"]
                                            for result in per_worker),
        "paper_speedup": model.paper_speedup,
    }


def add_relative_columns(results: List[dict], reference: str = REFERENCE) -> None:
    """Each row's speed-up over `reference` measured with as many workers, `reference`'s
    all-reduce bytes over its own (the same on any worker count), and, for several workers,
    the throughput over the same model's on one process."""
    rows = {(row["model"], row["workers"]): row for row in results
            if "not_measured" not in row}
    reference_bytes = next((row["allreduce_bytes_per_step"] for (name, _), row in rows.items()
                            if name == reference), None)
    for row in rows.values():
        base = rows.get((reference, row["workers"]))
        row["speedup"] = (row["examples_per_second"] / base["examples_per_second"]
                          if base else None)
        row["allreduce_bytes_ratio"] = (reference_bytes / row["allreduce_bytes_per_step"]
                                        if reference_bytes else None)
        alone = rows.get((row["model"], 1))
        row["over_one_process"] = (row["examples_per_second"] / alone["examples_per_second"]
                                   if alone and row["workers"] > 1 else None)


def paper_orderings(results: List[dict], workers: int) -> dict:
    """Every pair of measured models that Table 2 orders: does this machine order them alike?"""
    rows = [row for row in results if row["workers"] == workers and "not_measured" not in row
            and row.get("paper_speedup") is not None]
    held, reversed_ = [], []
    for index, first in enumerate(rows):
        for second in rows[index + 1:]:
            if first["paper_speedup"] == second["paper_speedup"]:
                continue
            faster, slower = ((first, second) if first["paper_speedup"] > second["paper_speedup"]
                              else (second, first))
            pair = f"{faster['model']} > {slower['model']}"
            (held if faster["examples_per_second"] > slower["examples_per_second"]
             else reversed_).append(pair)
    return {"held": held, "reversed": reversed_}


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description(settings: SpeedSettings, results: List[dict]) -> dict:
    """The machine, the threads used and the date; TensorFlow's version as the workers ran it."""
    features = cpu_features()
    versions = sorted({row["tensorflow"] for row in results if "tensorflow" in row})
    return {"cpu": cpu_model_name(), "cores": len(os.sched_getaffinity(0)),
            "threads": settings.resolved_threads(),
            "cpu_features": sorted(features),
            "cpu_features_shown": [name for name in SHOWN_CPU_FEATURES if name in features],
            "tensorflow": ", ".join(versions) or None, "python": platform.python_version(),
            "platform": platform.platform(),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


# A worker of several holds, besides what one process holds, copies of the gradients made for
# the all-reduce (packed, summed, split back), a few packs at a time (the training step's
# `ALL_REDUCE_PACK_BYTES`): BERT-base on 2 workers peaked 0.6 GiB (1.5 x its gradients' bytes)
# above its 1-process peak; 1.7 GiB (4 x) when all gradients went in one pack.
ALLREDUCE_COPIES = 1.5


def available_memory_bytes() -> Optional[int]:
    """The memory the kernel says new processes can take (Linux's MemAvailable), or None."""
    return kernel_figure_bytes("/proc/meminfo", "MemAvailable")


def memory_shortfall(name: str, workers: int, results: List[dict],
                     available: Optional[int]) -> Optional[str]:
    """Why `workers` processes of `name` would not fit in `available` bytes, judged from the
    same model's 1-process peak in `results` (None: they fit, or nothing to judge from)."""
    alone = next((row for row in results if row["model"] == name and row["workers"] == 1
                  and "not_measured" not in row), None)
    if workers == 1 or alone is None or available is None:
        return None
    peak, gradients = alone["peak_memory_bytes_per_worker"], alone["allreduce_bytes_per_step"]
    needed = workers * (peak + ALLREDUCE_COPIES * gradients)
    if needed <= available:
        return None
    return (f"does not fit in memory here: {workers} workers need about "
            f"{needed / BYTES_PER_GIB:.1f} GiB ({workers} x (the 1-process peak "
            f"{peak / BYTES_PER_GIB:.1f} GiB + {ALLREDUCE_COPIES} x {gradients / BYTES_PER_GIB:.2f}"
            f" GiB of gradients packed for the all-reduce)), "
            f"{available / BYTES_PER_GIB:.1f} GiB is available")


def measure_models(models: Sequence[SpeedModel], settings: SpeedSettings,
                   workers: Sequence[int], reference: str = REFERENCE,
                   log: Callable[[str], None] = print) -> dict:
    """Every model on every worker count (models in the inner loop); the report.

    A worker count whose processes would not fit in memory (judged from the same model's
    1-process peak) is skipped; a measurement whose processes fail is recorded as failed.
    Both rows say why (`not_measured`).
    """
    settings.validate(workers)
    started = time.time()
    results = []
    total = len(models) * len(workers)
    with tempfile.TemporaryDirectory(prefix="albert-speed-") as scratch:
        for count in workers:
            threads = max(1, settings.resolved_threads() // count)
            for model in models:
                where = ("1 process" if count == 1 else f"{count} workers") + \
                    f" x {threads} thread{'s' if threads > 1 else ''}"
                log(f"speed: [{len(results) + 1}/{total}] {model.name} ({sharing_of(model.config)}"
                    f", L={model.config.num_hidden_layers}, H={model.config.hidden_size}, "
                    f"E={model.config.embedding_size}) on {where}")
                unmeasured = {"model": model.name, "workers": count,
                              "threads_per_worker": threads, "paper_speedup": model.paper_speedup}
                shortfall = memory_shortfall(model.name, count, results, available_memory_bytes())
                if shortfall:
                    log(f"speed: WARNING: {model.name} on {where} skipped: it {shortfall}")
                    results.append({**unmeasured, "not_measured": f"skipped: {shortfall}",
                                    "failed": False})
                    continue
                try:
                    result = measure_model(model, settings, count, scratch)
                except MeasurementFailed as error:
                    log(f"speed: WARNING: {model.name} on {where} failed: {error}")
                    results.append({**unmeasured, "not_measured": f"failed: {error}",
                                    "failed": True})
                    continue
                results.append(result)
                log(f"speed: {model.name} on {where}: {result['examples_per_second']:.3f} "
                    f"examples/s ({result['seconds_per_step']:.2f} s per step, "
                    f"{result['trainable_parameters']:,} parameters, all-reduce "
                    f"{result['allreduce_bytes_per_step'] / BYTES_PER_MIB:,.1f} MiB per step, "
                    f"peak memory {result['peak_memory_bytes_per_worker'] / BYTES_PER_GIB:.1f} "
                    "GiB per process)")
    add_relative_columns(results, reference)
    return {"settings": {**dataclasses.asdict(settings), "threads": settings.resolved_threads(),
                         "precision": "float32", "optimizer": "lamb",
                         "input": "one batch of random token ids per worker, in memory"},
            "reference": reference, "workers": list(workers),
            "machine": machine_description(settings, results), "results": results,
            "paper_orderings": {str(count): paper_orderings(results, count)
                                for count in workers},
            "wall_seconds": time.time() - started}


def _number(value: Optional[float], digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _display_name(name: str) -> str:
    """`albert-base` as the paper writes it: ALBERT-base."""
    family, _, size = name.partition("-")
    return f"{family.upper()}-{size}" if family in ("bert", "albert") and size else name


def format_markdown(report: dict) -> str:
    settings, machine = report["settings"], report["machine"]
    reference = _display_name(report["reference"])
    lines = ["# Training speed of BERT and ALBERT on this machine (the paper's Table 2)", "",
             f"Command: `{report['command']}`" if report.get("command") else "",
             "",
             f"Machine: {machine['cpu']}, {machine['cores']} cores (features: "
             f"{', '.join(machine['cpu_features_shown']) or 'none of note'}), TensorFlow "
             f"{machine['tensorflow']}, {machine['date']}. Every step: a global batch of "
             f"{settings['batch_size']} x {settings['seq_length']} tokens "
             f"({settings['max_predictions_per_seq']} masked per sequence), masked LM + sentence "
             f"order, LAMB, {settings['precision']}; {settings['warmup_steps']} warm-up and "
             f"{settings['steps']} timed steps per model, each measurement in fresh processes. "
             f"Measured in {report['wall_seconds'] / 60:.1f} minutes.", ""]
    for count in report["workers"]:
        rows = [row for row in report["results"] if row["workers"] == count]
        threads = rows[0]["threads_per_worker"] if rows else 0
        title = ("One process" if count == 1 else
                 f"{count} workers (MultiWorkerMirroredStrategy on localhost)")
        lines += [f"## {title}, {threads} thread{'s' if threads > 1 else ''} each", ""]
        header = ["model", "L", "H", "E", "sharing", "parameters", "examples/s",
                  f"speed-up over {reference}", "paper", "all-reduce MiB/step",
                  f"{reference}'s all-reduce ÷ this", "peak memory GiB"]
        if count > 1:
            header.append("÷ 1 process")
        lines += ["| " + " | ".join(header) + " |",
                  "|" + "|".join("---" if index in (0, 4) else "---:"
                                 for index in range(len(header))) + "|"]
        for row in rows:
            name = _display_name(row["model"])
            if "not_measured" in row:
                lines.append(f"| {name} | {row['not_measured']} |")
                continue
            cells = [name, str(row["L"]), str(row["H"]), str(row["E"]), row["sharing"],
                     f"{row['trainable_parameters'] / 1e6:.1f}M",
                     _number(row["examples_per_second"], 3), _number(row["speedup"]),
                     _number(row["paper_speedup"], 1),
                     f"{row['allreduce_bytes_per_step'] / BYTES_PER_MIB:,.1f}",
                     _number(row["allreduce_bytes_ratio"], 1),
                     _number(row["peak_memory_bytes_per_worker"] / BYTES_PER_GIB, 1)]
            if count > 1:
                cells.append(_number(row["over_one_process"]))
            lines.append("| " + " | ".join(cells) + " |")
        if not any(row["model"] == report["reference"] and "not_measured" not in row
                   for row in rows):
            lines += ["", f"{reference} was not measured on "
                      f"{'one process' if count == 1 else f'{count} workers'}: the speed-up "
                      "column has no reference here."]
        orderings = report["paper_orderings"][str(count)]
        pairs = len(orderings["held"]) + len(orderings["reversed"])
        if pairs:
            def said(pair):
                faster, slower = pair.split(" > ")
                return f"{_display_name(faster)} faster than {_display_name(slower)}"

            lines += ["", f"Table 2's pairwise orders that hold here: {len(orderings['held'])} "
                      f"of {pairs}" + ("; not here: " + "; ".join(
                          said(pair) for pair in orderings["reversed"])
                          if orderings["reversed"] else "") + "."]
        lines.append("")
    lines += ["Speed-up: examples per second over " + reference + "'s with the same processes "
              "and threads. All-reduce: the bytes of the gradients summed across workers every "
              "step (every trainable parameter, heads included, 4 bytes each); one process sums "
              "nothing, but the optimizer updates as many weights. CPU use over the timed steps "
              "(CPU time / wall time / threads, 1 when nothing else competed for the cores): " +
              ", ".join(f"{_display_name(row['model'])} x{row['workers']} "
                        f"{row['cpu_utilisation']:.2f}"
                        for row in report["results"] if "not_measured" not in row) + ".", ""]
    return "\n".join(lines)


def _models_from_flag(value: str, vocab_size: int) -> List[SpeedModel]:
    known = paper_models(vocab_size)
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise InputError(f"--models: unknown model {', '.join(map(repr, unknown)) or '(none)'}"
                         f"; choose among {', '.join(known)}")
    if len(set(names)) != len(names):
        raise InputError(f"--models={value} names a model twice")
    return [known[name] for name in names]


def _workers_from_flag(value: str) -> List[int]:
    try:
        counts = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--workers={value}: worker counts separated by commas, such as "
                         "1,2") from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise InputError(f"--workers={value}: distinct worker counts of at least 1, such as 1,2")
    return counts


def markdown_path(output: str) -> str:
    return os.path.splitext(output)[0] + ".md"


# The full measurement's settings that `--quick` changes, and `--quick`'s: a first table in a
# minute or two on 2 cores (two fresh processes of about 20 s start-up and 10-15 s of steps each,
# from docs/paper/cpu-table2-speed, where the full measurement took 13 minutes). These flags
# default to None in the parser, so that one given beside --quick is told from one left unset.
FULL = {"models": ",".join(PAPER_SPEEDUP), "batch_size": SpeedSettings.batch_size,
        "workers": "1,2"}
QUICK = {"models": "albert-base,bert-base", "batch_size": 4, "workers": "1"}


def _default_text(name: str) -> str:
    return f"(default: {FULL[name]}; with --quick: {QUICK[name]})"


def resolve_quick(args) -> None:
    """Sets every flag `--quick` changes that was left unset: to --quick's value with --quick,
    else to the full measurement's; a flag given explicitly keeps its value."""
    chosen = QUICK if args.quick else FULL
    for name, value in chosen.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="a first try, a table in a minute or two on 2 cores: "
                             + " ".join(f"--{name}={value}" for name, value in QUICK.items())
                             + " (flags given beside it win); BERT-large, the reference of the "
                             "speed-up column, is not measured")
    parser.add_argument("--models", default=None,
                        help="comma-separated: " + ", ".join(PAPER_SPEEDUP) + " "
                             + _default_text("models"))
    parser.add_argument("--batch_size", type=int, default=None,
                        help="global batch of every step (split between the workers) "
                             + _default_text("batch_size"))
    parser.add_argument("--seq_length", type=int, default=SpeedSettings.seq_length,
                        help="tokens per sequence")
    parser.add_argument("--max_predictions_per_seq", type=int,
                        default=SpeedSettings.max_predictions_per_seq,
                        help="masked positions per sequence (the original: 20 at 512 tokens)")
    parser.add_argument("--warmup_steps", type=int, default=SpeedSettings.warmup_steps,
                        help="steps before the timed ones (tracing and first-call costs)")
    parser.add_argument("--steps", type=int, default=SpeedSettings.steps,
                        help="timed steps per model")
    parser.add_argument("--workers", default=None,
                        help="worker counts to measure, e.g. 1,2: 1 is one process; N > 1 a "
                             "local N-worker MultiWorkerMirroredStrategy cluster "
                             + _default_text("workers"))
    parser.add_argument("--threads", type=int, default=0,
                        help="threads to use in all, shared equally by the workers (default: "
                             "every core this process may use)")
    parser.add_argument("--vocab_size", type=int, default=VOCAB_SIZE,
                        help="the models' vocabulary (the paper's)")
    parser.add_argument("--output", default="speed.json",
                        help="JSON to write (must not exist); the markdown table goes beside "
                             "it (.md)")


def command_line(args) -> str:
    """The command that repeats this measurement, every setting spelled out."""
    flags = ["models", "batch_size", "seq_length", "max_predictions_per_seq", "warmup_steps",
             "steps", "workers", "threads", "vocab_size", "output"]
    return "python -m albert.paper speed " + " ".join(
        shlex.quote(f"--{flag}={getattr(args, flag)}") for flag in flags)


def main(args) -> int:
    resolve_quick(args)
    for path in (args.output, markdown_path(args.output)):
        io.refuse_existing(path)
    if args.vocab_size < 5:
        raise InputError(f"--vocab_size must be at least 5, got {args.vocab_size}")
    models = _models_from_flag(args.models, args.vocab_size)
    workers = _workers_from_flag(args.workers)
    settings = SpeedSettings(args.batch_size, args.seq_length, args.max_predictions_per_seq,
                             args.warmup_steps, args.steps, args.threads)
    settings.validate(workers)
    report = measure_models(models, settings, workers)
    report = {"command": command_line(args), **report}
    io.write_json_atomically(args.output, report)
    io.write_text_atomically(markdown_path(args.output), format_markdown(report))
    print(f"Wrote {args.output} and {markdown_path(args.output)}")
    print(format_markdown(report))
    failed = [row for row in report["results"] if row.get("failed")]
    if failed:
        raise MeasurementsFailed(
            f"{len(failed)} of {len(report['results'])} measurements failed ("
            + "; ".join(f"{row['model']} on {row['workers']} worker(s): {row['not_measured']}"
                        for row in failed) + f"); the others are in {args.output}")
    return 0
