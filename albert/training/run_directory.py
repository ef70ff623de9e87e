"""The files of a run directory besides checkpoints: logs, evaluation journal, locks.

* `train_log.jsonl`: one JSON object per step (`json.dumps(record,
  sort_keys=True)`, one a line); a resumed run drops the lines after its
  checkpoint and writes them again. On object stores (`gs://`, any path with
  a scheme, `io.is_remote`) an append re-uploads the whole object, so there
  the step log is kept in memory and written by `RunDirectory.flush_logs()`
  (after every checkpoint, and when the run ends) as one new object per
  flush: `train_log-<step>.jsonl` (see `part_name`), `<step>` being the
  last step in the part, zero-padded to 9 digits so the names sort by step.
  `read_train_log(output_dir)` reads `train_log.jsonl` and the parts as one
  log; read the log with it, not the file.
* `eval_results.json`: the evaluation journal — every evaluated checkpoint
  and the best one. It is rewritten atomically *before* `model.ckpt-best` is
  updated, and a run repairs `model.ckpt-best` from it on start, so a run
  killed at any point evaluates every checkpoint exactly once and never
  leaves a half-copied best checkpoint. `eval_results.txt` (the original's
  `key = value` lines) is regenerated from the journal.
* `tensorboard/{train,eval}`: summaries, created on first use. On object
  stores the training summaries are written at each `flush_logs()`, each
  flush into a new event file (written once, never re-uploaded).
* run files (e.g. `albert_config.json`; for training runs `data_order.json`,
  the batch size, seed, shuffle buffer, input shards and bucket window that
  fix which records each step reads): written once all checks of a run have
  passed; a later run into the same directory must bring identical ones, or
  it is refused before anything is written. A run directory made before
  `data_order.json` existed gets it on its next start.
* locks: a training run holds `.train.lock`, an evaluating run
  `.eval.lock` (advisory `flock` locks, released when the process ends, even
  killed). A second run that needs a lock in use ends with one line. A run
  removes its lock files when it ends, whether it succeeded or failed; only
  a killed run leaves one behind, which locks nothing and is taken over by
  the next run. On remote file systems (gs://) there is no locking; a
  warning says so.
"""

import json
import logging
import math
import os
import re
import socket
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert import io
from albert.errors import InputError

logger = logging.getLogger("albert")

TRAIN_LOG = "train_log.jsonl"
# The parts of the step log on object stores: "train_log-000001200.jsonl" holds
# steps up to 1200 (its last record's step), after those of the previous part.
TRAIN_LOG_PART = re.compile(r"train_log-(\d+)\.jsonl")
# On object stores a run that is not flushed for this many steps (checkpoints
# far apart) writes a part anyway, to bound the memory the log holds.
MAX_BUFFERED_STEPS = 10000
EVAL_JSON = "eval_results.json"
EVAL_TXT = "eval_results.txt"
# The original GLUE and RACE scripts' record of their evaluation loop,
# "<last evaluated step>:<best step>:<best value>": written beside the journal
# for those who read it (resuming uses the journal).
BEST_TRIAL = "best_trial.txt"
DATA_ORDER_FILE = "data_order.json"  # written by the training loop (TrainerConfig.data_order)
TENSORBOARD = "tensorboard"
FINDINGS = "findings"  # diagnostics' findings in eval_results.json (never in the .txt)
# An evaluation of a model that answers without using its input (albert.training.degenerate):
# `degenerate: true` and the reason in its entry of eval_results.json (never in the .txt).
DEGENERATE, DEGENERATE_REASON = "degenerate", "degenerate_reason"
# Whole-dev-set arrays an evaluation reports beside its numbers (STS-B's `pred` and
# `label_ids`, as the original's streaming concatenations): in the entry under this key,
# written into eval_results.txt, never read as metrics.
CONCATENATED = "concatenated"
NOT_METRICS = ("step", FINDINGS, DEGENERATE, DEGENERATE_REASON, CONCATENATED)
# The layouts whose original scripts print what an Estimator's evaluate returns:
# float32 numbers (shortest float32 text) and numpy arrays.
ESTIMATOR_LAYOUTS = ("pretraining", "finetuning")


class RunLock:
    """An exclusive advisory lock on one activity ("train" or "eval") in a run directory."""

    def __init__(self, output_dir: str, kind: str):
        self.path = io.join(output_dir, f".{kind}.lock")
        self.kind = kind
        self._handle = None

    def acquire(self) -> None:
        if io.is_remote(self.path):
            logger.warning("%s is on a remote file system: runs sharing it are not locked "
                           "against each other", io.dirname(self.path))
            return
        import fcntl  # POSIX only; a remote directory (above) never needs it

        io.makedirs(io.dirname(self.path))
        while True:
            handle = open(self.path, "a+", encoding="utf-8")
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                activity = "training" if self.kind == "train" else "evaluating"
                raise InputError(
                    f"Another run is {activity} in {io.dirname(self.path)} ({holder}); wait for "
                    "it to end or use another --output_dir") from None
            # The run that held the lock removes the file before it lets go (`release`):
            # a lock won on a file no longer at the path locks nothing, so open it again.
            if _is_file_at(handle, self.path):
                break
            handle.close()
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Removes the lock file, then lets go of the lock: no lock file is left in the
        output directory. Removed while still held, so no other run can hold it then; a
        run waiting to open it finds it gone once it wins the lock (`acquire`)."""
        if self._handle is not None:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
            self._handle.close()  # closing releases the flock
            self._handle = None


def _is_file_at(handle, path: str) -> bool:
    """Whether the open file `handle` is still the file at `path` (not removed or replaced)."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(handle.fileno())
    return (opened.st_dev, opened.st_ino) == (at_path.st_dev, at_path.st_ino)


class RunDirectory:
    """Logs, evaluation journal, run files and locks of one run (writes only on the chief)."""

    def __init__(self, output_dir: str, is_chief: bool = True):
        self.output_dir = output_dir
        self.is_chief = is_chief
        self._writers = {}
        self._locks: List[RunLock] = []
        # On object stores the step log waits here for `flush_logs()`;
        # elsewhere every call of `log_steps` appends to train_log.jsonl.
        self._buffered = io.is_remote(output_dir)
        self._pending: List[dict] = []

    def path(self, name: str) -> str:
        return io.join(self.output_dir, name)

    # ----------------------------------------------------------- run files
    def check_run_files(self, files: Dict[str, str]) -> None:
        """Refuses a directory holding other versions of `files` (before anything is written)."""
        for name, text in files.items():
            path = self.path(name)
            if not io.exists(path):
                continue
            existing, wanted = _as_json(io.read_text(path)), _as_json(text)
            if existing != wanted:
                raise InputError(
                    f"{self.output_dir} holds a run with another {name}"
                    f"{_differences(existing, wanted)}; resume it with the same settings, or use "
                    "a new --output_dir")

    def write_run_files(self, files: Dict[str, str]) -> None:
        if not self.is_chief:
            return
        for name, text in files.items():
            if not io.exists(self.path(name)):
                io.write_text_atomically(self.path(name), text)

    # --------------------------------------------------------------- locks
    def lock(self, *kinds: str) -> None:
        if not self.is_chief:
            return
        try:
            for kind in kinds:
                lock = RunLock(self.output_dir, kind)
                lock.acquire()
                self._locks.append(lock)
        except BaseException:
            # Refused on the second lock: the first is let go (and its file removed) now.
            self.unlock()
            raise

    def unlock(self) -> None:
        """Ends the run's use of the directory (also on errors and interrupts): writes the
        step log still in memory (`flush_logs`), releases the locks, closes the writers."""
        try:
            self.flush_logs()
        finally:
            for lock in self._locks:
                lock.release()
            self._locks = []
            for writer in self._writers.values():
                writer.close()
            self._writers = {}

    # ----------------------------------------------------------- train log
    def truncate_train_log(self, step: int) -> None:
        """Drops log records after `step` (a resumed run writes them again).

        In `train_log.jsonl` (rewritten, as ever) and in the parts: a part
        whose records all come after `step` is removed; one that straddles
        `step` is rewritten atomically with the records up to `step`, under
        the name of its new last step (then the old name is removed, so a
        later part of the resumed run can never take its name and replace
        it); the parts before `step` are not read.
        """
        self._pending = [record for record in self._pending if record["step"] <= step]
        if not self.is_chief:
            return
        path = self.path(TRAIN_LOG)
        if io.exists(path):
            kept = [line for line in io.read_text(path).splitlines(True)
                    if line.strip() and json.loads(line)["step"] <= step]
            io.write_text_atomically(path, "".join(kept))
        for last, part in _train_log_parts(self.output_dir):
            if last <= step:
                continue
            kept = [record for record in _read_records(part) if record["step"] <= step]
            if kept:
                new_part = self.path(part_name(max(record["step"] for record in kept)))
                io.write_text_atomically(new_part, _jsonl(kept))
                if new_part != part:
                    io.remove(part)
            else:
                io.remove(part)

    def log_steps(self, records: List[dict]) -> None:
        """Logs one JSON record per step (and their numbers to TensorBoard).

        Local directories: appended to `train_log.jsonl` at once, summaries
        flushed. Object stores: kept in memory until `flush_logs()` (or
        `MAX_BUFFERED_STEPS` of them), which writes them as a new part.
        """
        if not self.is_chief or not records:
            return
        if self._buffered:
            self._pending.extend(records)
            if len(self._pending) >= MAX_BUFFERED_STEPS:
                self.flush_logs()
            return
        with io.open_file(self.path(TRAIN_LOG), "a") as handle:
            handle.write(_jsonl(records))
        self._scalars("train", records)

    def flush_logs(self) -> None:
        """Writes what `log_steps` holds in memory: on object stores, the records since the
        last flush as a new part `part_name(<last step>)` and their summaries as a new
        TensorBoard event file; nothing is rewritten, so the cost is that of the new
        records. Local directories: flushes the TensorBoard writers (already flushed).
        Called after every checkpoint and by `unlock()`; the records leave memory only
        once their part is written."""
        if self._pending:
            records = self._pending
            io.write_text_atomically(
                self.path(part_name(max(record["step"] for record in records))),
                _jsonl(records))
            self._pending = []  # written: a failure below must not write them twice
            # A writer of its own for these records, closed at once: each flush
            # makes one event file, written whole once.
            writer = tf.summary.create_file_writer(io.join(self.output_dir, TENSORBOARD,
                                                           "train"))
            try:
                _write_scalars(writer, records)
            finally:
                writer.close()
        for writer in self._writers.values():
            writer.flush()

    def _scalars(self, kind: str, records: List[dict]) -> None:
        writer = self._writers.get(kind)
        if writer is None:
            writer = self._writers[kind] = tf.summary.create_file_writer(
                io.join(self.output_dir, TENSORBOARD, kind))
        _write_scalars(writer, records)
        writer.flush()

    # ---------------------------------------------------------- evaluation
    def evaluations(self) -> dict:
        path = self.path(EVAL_JSON)
        if io.exists(path):
            return io.read_json(path)
        return {"evaluations": [], "best": None}

    def evaluated_steps(self) -> List[int]:
        return [entry["step"] for entry in self.evaluations()["evaluations"]]

    def best(self) -> Optional[dict]:
        return self.evaluations().get("best")

    def record_evaluation(self, step: int, metrics: dict, best: Optional[dict],
                          best_metric: Optional[str] = None, layout: str = "pretraining",
                          findings: Optional[List[dict]] = None,
                          concatenated: Optional[Dict[str, list]] = None) -> None:
        """Adds an evaluation to the journal (atomically), then regenerates eval_results.txt.

        eval_results.txt has one `key = value` line per metric (and
        `global_step`) of each evaluation; in the fine-tuning layout each
        evaluation also ends with `best = <best value before it>` (-1 at
        first) and a line of 50 `=`, as the original GLUE and RACE scripts
        write; in the SQuAD layout with `best <metric> = <best value so far,
        this one included>` and the line, as the original SQuAD scripts write.
        `findings` of the run's diagnostics (`albert.training.diagnostics`)
        go into the entry's `findings` list, in the JSON only; when one says
        the evaluated model is degenerate, the entry also gets
        `degenerate: true` and `degenerate_reason`. `concatenated` arrays
        (name → values over the dev set) are kept under `concatenated` and
        written as `name = [...]` lines among the metrics, as numpy prints them.
        """
        if not self.is_chief:
            return
        results = self.evaluations()
        results["evaluations"] = [e for e in results["evaluations"] if e["step"] != step]
        entry = dict(metrics, step=step)
        if concatenated:
            entry[CONCATENATED] = {name: [float(v) for v in values]
                                   for name, values in concatenated.items()}
        if findings:
            entry[FINDINGS] = findings
            reasons = [finding["message"] for finding in findings if finding.get(DEGENERATE)]
            if reasons:
                entry[DEGENERATE] = True
                entry[DEGENERATE_REASON] = "; ".join(reasons)
        results["evaluations"].append(entry)
        results["evaluations"].sort(key=lambda e: e["step"])
        results["best"] = best
        results["layout"] = [layout, best_metric]
        results.pop("final", None)  # a new evaluation comes after any final block
        io.write_json_atomically(self.path(EVAL_JSON), results)
        self._write_eval_text(results)
        self._scalars("eval", [dict(metrics, step=step)])

    def record_findings(self, findings: List[dict]) -> None:
        """Run-level findings of the diagnostics (e.g. the unigram plateau), kept in
        eval_results.json under `findings` beside the evaluations."""
        if not self.is_chief or not findings:
            return
        results = self.evaluations()
        known = results.setdefault(FINDINGS, [])
        known.extend(f for f in findings if f not in known)
        io.write_json_atomically(self.path(EVAL_JSON), results)

    def record_final(self, metrics: dict, where: str) -> None:
        """The closing block of the SQuAD scripts: the best model's scores re-measured,
        then `best perf happened at step: <where>`; kept after the evaluations."""
        if not self.is_chief:
            return
        results = self.evaluations()
        results["final"] = {"metrics": metrics, "where": where}
        io.write_json_atomically(self.path(EVAL_JSON), results)
        self._write_eval_text(results)

    def _write_eval_text(self, results: dict) -> None:
        layout, best_metric = results.get("layout", ["pretraining", None])
        as_text = estimator_text if layout in ESTIMATOR_LAYOUTS else str
        lines, best_so_far = [], -1
        for entry in results["evaluations"]:
            values = {k: v for k, v in entry.items() if k not in NOT_METRICS}
            values.update(entry.get(CONCATENATED, {}), global_step=entry["step"])
            lines += [f"{key} = {as_text(value)}" for key, value in sorted(values.items())]
            if layout == "finetuning":
                lines += [f"best = {as_text(best_so_far)}", "=" * 50]
            if layout in ("finetuning", "squad") and entry.get(best_metric,
                                                              -math.inf) > best_so_far:
                best_so_far = entry[best_metric]
            if layout == "squad":
                lines += [f"best {best_metric} = {best_so_far}", "=" * 50]
        if layout == "finetuning" and results["evaluations"]:
            best = results.get("best") or {}
            io.write_text_atomically(self.path(BEST_TRIAL), "{}:{}:{}".format(
                results["evaluations"][-1]["step"], best.get("step", -1),
                estimator_text(best.get(best_metric, -1))))
        final = results.get("final")
        if final:
            lines += [f"{key} = {value}" for key, value in sorted(final["metrics"].items())]
            lines.append(f"best perf happened at step: {final['where']}")
        io.write_text_atomically(self.path(EVAL_TXT), "\n".join(lines) + "\n")


def estimator_text(value) -> str:
    """`value` as the original scripts print an Estimator's result: `str()` of a
    numpy float32 (e.g. `0.8125`, `0.33333334`), an integer as it is, and an
    array as numpy prints a float32 array (summarised past 1,000 values)."""
    if isinstance(value, list):
        return str(np.asarray(value, np.float32))
    if isinstance(value, float):
        return str(np.float32(value))
    return str(value)


def part_name(last_step: int) -> str:
    """The name of the part of the step log whose last record is step `last_step`:
    `train_log-000001200.jsonl` (9 digits, more past 999,999,999)."""
    return f"train_log-{last_step:09d}.jsonl"


def read_train_log(output_dir: str) -> List[dict]:
    """The step log of a run: the records of `train_log.jsonl` and of its parts
    (`train_log-<last step>.jsonl`, written on object stores), sorted by step.

    Records still in the memory of a running trainer (on object stores,
    those since its last `flush_logs()`) are not in it. [] when there is no log.
    """
    records = []
    path = io.join(output_dir, TRAIN_LOG)
    if io.exists(path):
        records.extend(_read_records(path))
    for _, part in _train_log_parts(output_dir):
        records.extend(_read_records(part))
    records.sort(key=lambda record: record["step"])  # stable: train_log.jsonl first
    return records


def _train_log_parts(output_dir: str) -> List[tuple]:
    """(last step, path) of each part of the step log in `output_dir`, by step."""
    if not io.isdir(output_dir):
        return []
    parts = []
    for name in io.listdir(output_dir):
        match = TRAIN_LOG_PART.fullmatch(name)
        if match:
            parts.append((int(match.group(1)), io.join(output_dir, name)))
    return sorted(parts)


def _read_records(path: str) -> List[dict]:
    return [json.loads(line) for line in io.split_lines(io.read_text(path)) if line.strip()]


def _jsonl(records: List[dict]) -> str:
    return "".join(json.dumps(record, sort_keys=True) + "\n" for record in records)


def _write_scalars(writer, records: List[dict]) -> None:
    """The numbers of `records` (all but the step) as scalar summaries at their step.
    Leaving `as_default()` flushes the writer."""
    with writer.as_default():
        for record in records:
            for key, value in record.items():
                if key != "step" and isinstance(value, (int, float)):
                    tf.summary.scalar(key, value, step=record["step"])


def _as_json(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _differences(existing, wanted) -> str:
    """" (key: there → here, ...)" for two JSON objects; "" otherwise."""
    if not (isinstance(existing, dict) and isinstance(wanted, dict)):
        return ""
    keys = sorted(key for key in set(existing) | set(wanted)
                  if existing.get(key) != wanted.get(key))
    return " (" + ", ".join(f"{key}: {existing.get(key)!r} there, {wanted.get(key)!r} here"
                            for key in keys) + ")"
