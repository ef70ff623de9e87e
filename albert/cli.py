"""Shared entry point for the absl scripts: user mistakes end with one clear line.

`run(main)` runs an absl `main`; a flag mistake (an unknown or misspelled flag,
a bad value, a missing required flag), an `AlbertError` (bad config, checkpoint,
input) or an `OSError` (missing file, no permission) prints `ERROR: <message>`
to stderr and exits with status 1, without a stack trace. Anything else is a
bug and keeps its traceback.

Ctrl-C ends with one line too, saying where the run stopped and that the same
command goes on from there, and exit status 130.

It also keeps TensorFlow's noise out of the scripts' output: the CUDA
probe's "failed call to cuInit" error line on machines without an NVIDIA GPU
(kept where there is one: there it means a broken driver), and the INFO lines of TensorFlow's internals (checkpoint-sharding
timings, SavedModel notes).

`progress_display` is every script's progress: a tqdm bar on a terminal, log
lines (no carriage returns) when stderr is a file or a pipe.
"""

import logging
import os
import re
import sys
import time

from absl import app, flags
from tqdm import tqdm

from albert import interrupts
from albert import native_logs
from albert.config import AlbertConfig
from albert.errors import AlbertError, RunInterrupted, RunPreempted

# Lines TensorFlow's C++ runtime prints while starting and enumerating devices
# that are not about the run, GPU or not. (The CUDA probe's "no GPU here" lines
# are kept out only on machines without an NVIDIA GPU: `native_logs`.)
_DEVICE_PROBE_NOISE = re.compile(
    r"(Unable to register cu(DNN|FFT|BLAS) factory|computation placer already registered|"
    r"TF-TRT Warning|oneDNN custom operations are on|cpu_feature_guard|"
    r"rebuild TensorFlow with the appropriate compiler flags|"
    r"All log messages before absl::InitializeLog)")


class _DropTensorFlowInfo(logging.Filter):
    """Drops the INFO lines TensorFlow's own modules log through absl.

    Checkpoint-sharding timings on every checkpoint write, SavedModel
    signature and fingerprint notes: progress of TensorFlow's internals, not
    of the run. Its warnings and errors pass.
    """

    def filter(self, record):
        internal = f"{os.sep}tensorflow{os.sep}" in record.pathname or \
            f"{os.sep}keras{os.sep}" in record.pathname
        return record.levelno >= logging.WARNING or not internal


class LoggedProgress:
    """tqdm's `update` / `set_postfix` / `close`, as a log line at most every `interval` seconds.

    A tqdm bar redraws itself with carriage returns: one line on a terminal,
    but in a file (a job's log, `2> run.log`) every redraw is kept and the
    bars end up interleaved with the log lines.

    Args:
      total: the amount of work (steps, bytes, documents).
      description: what is being done ("training", "tokenizing").
      unit: of `total` ("step", "B").
      initial: where it starts from (a resumed run).
      unit_scale: show amounts as 1.23M (tqdm's `unit_scale`).
      interval: seconds between two lines. The end of the work, and where it
        stopped at `close`, are always logged.

    Example:
        progress = LoggedProgress(20, "training", "step")
        progress.update(20)   # logs "training: step 20/20 (100%)"
    """

    def __init__(self, total: int, description: str, unit: str, initial: int = 0,
                 unit_scale: bool = False, interval: float = 60.0):
        self.total = total
        self.description = description
        self.unit = unit
        self.unit_scale = unit_scale
        self.step = initial
        self.interval = interval
        self.postfix = {}
        self._last = time.monotonic()
        self._logged_step = initial

    def update(self, count: int) -> None:
        self.step += count
        if time.monotonic() - self._last >= self.interval or self.step >= self.total:
            self._log()

    def set_postfix(self, refresh: bool = True, **values) -> None:
        del refresh
        self.postfix = values

    def _amount(self) -> str:
        if self.unit_scale:
            return (f"{tqdm.format_sizeof(self.step, self.unit)}/"
                    f"{tqdm.format_sizeof(self.total, self.unit)}")
        return f"{self.unit} {self.step}/{self.total}"

    def _log(self) -> None:
        self._last = time.monotonic()
        self._logged_step = self.step
        values = "".join(f", {key} {value}" for key, value in self.postfix.items())
        logging.getLogger("albert").info(
            "%s: %s (%d%%)%s", self.description, self._amount(),
            100 * self.step // max(self.total, 1), values)

    def close(self) -> None:
        if self.step != self._logged_step:
            self._log()


def progress_display(total: int, description: str, unit: str, initial: int = 0,
                     unit_scale: bool = False):
    """A tqdm bar when stderr is a terminal (or a notebook's), else `LoggedProgress` (log lines)."""
    if not _stderr_redraws_lines():
        return LoggedProgress(total, description, unit, initial, unit_scale)

    return tqdm(total=total, initial=initial, unit=unit, unit_scale=unit_scale, desc=description,
                mininterval=1.0, dynamic_ncols=True)


def _stderr_redraws_lines() -> bool:
    """Whether a carriage return on stderr redraws the line: a terminal, or a Jupyter
    notebook's stderr (ipykernel's stream, which is no terminal and has no log handler)."""
    return sys.stderr.isatty() or type(sys.stderr).__module__.startswith("ipykernel")


def _drop_tensorflow_test_callbacks() -> None:
    # Importing TensorFlow registers an absl start-up callback from its
    # distribute test utilities that lists GPUs in every absl program.
    callbacks = getattr(app, "_init_callbacks", None)
    if callbacks is None:
        return
    kept = [c for c in callbacks
            if not getattr(c, "__module__", "").startswith("tensorflow.python.distribute")]
    callbacks.clear()
    callbacks.extend(kept)


def define_config_flags() -> None:
    """Flags every script that reads an albert_config.json shares."""
    flags.DEFINE_bool("allow_unknown_config_keys", False,
                      "Keep albert_config.json keys this package does not know (configs written "
                      "by other tools). By default an unknown key is an error, since it is "
                      "usually a misspelling that would silently leave a default in place.")


def define_model_dir_flag() -> None:
    """--model_dir, a finished run's directory: `python -m albert.predict` and `python -m
    albert.export` share it (defined once, so both modules can be imported in one process)."""
    if "model_dir" not in flags.FLAGS:
        flags.DEFINE_string("model_dir", None,
                            "A finished run of run_classifier.py --train_file=... or "
                            "run_token_classifier.py: its directory holds all that is needed.")


def load_albert_config(path: str) -> AlbertConfig:
    return AlbertConfig.from_json_file(
        path, allow_unknown_keys=flags.FLAGS.allow_unknown_config_keys)


def parse_flags(argv):
    """absl's flag parsing, a mistake (unknown flag, bad value, missing required flag) ending as
    every other user mistake does: one `ERROR:` line, exit status 1. absl's own parser prints
    two lines ("FATAL Flags parsing error: ...", then where help is): the first, with its "Did
    you mean" suggestion, is kept, and where help is goes on the same line."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        message = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        print(f"ERROR: {message} (--helpshort lists the flags)", file=sys.stderr)
        sys.exit(1)


def run(main):
    def guarded_main(argv):
        logging.getLogger("albert").setLevel(logging.INFO)
        logging.getLogger("tensorflow").setLevel(logging.WARNING)
        logging.getLogger("absl").addFilter(_DropTensorFlowInfo())
        try:
            native_logs.probe_tensorflow_devices(_DEVICE_PROBE_NOISE)
            result = main(argv)
            # A Ctrl-C a finalizer swallowed after the last check still ends the run as
            # interrupted (exit 130), not as a success.
            interrupts.raise_if_requested()
            return result
        except RunPreempted as preempted:
            print(f"Preempted: {preempted}", file=sys.stderr)
            sys.exit(143)
        except Exception as error:
            if interrupts.requested():
                # A Ctrl-C raised inside a library can come out as that library's own error
                # (seen: TensorFlow tracing a tf.data function during evaluation): the run
                # was interrupted, and says so in one line.
                raise KeyboardInterrupt from None
            if isinstance(error, (AlbertError, OSError)):
                print(f"ERROR: {error}", file=sys.stderr)
                sys.exit(1)
            raise

    _drop_tensorflow_test_callbacks()
    interrupts.handle_ctrl_c()
    interrupts.handle_termination()
    try:
        app.run(guarded_main, flags_parser=parse_flags)
    except KeyboardInterrupt as interrupt:
        report_interrupt(interrupt)
    except SystemExit as exit_request:
        # absl ends a run that printed the help with status 1; asking for help is no failure.
        if exit_request.code == 1 and asks_for_help(sys.argv[1:]):
            sys.exit(0)
        raise


# absl's help flags (`-?` is --help's short name).
_HELP_FLAGS = {"help", "?", "helpshort", "helpfull", "helpxml"}


def asks_for_help(args) -> bool:
    """Whether the command line asks for one of absl's help texts."""
    for arg in args:
        if arg == "--":
            break
        name, _, value = arg.lstrip("-").partition("=")
        if arg.startswith("-") and name in _HELP_FLAGS and value.lower() not in ("false", "0"):
            return True
    return False


# Files are written atomically, so a stop leaves complete files or none.
STOPPED = "stopped; every file written so far is complete and the same command goes on from them"


def report_interrupt(interrupt: KeyboardInterrupt) -> None:
    """Ctrl-C: one line saying where the run stopped (a `RunInterrupted` knows), exit 130."""
    print(f"Interrupted: {interrupt if isinstance(interrupt, RunInterrupted) else STOPPED}",
          file=sys.stderr)
    interrupts.quiet_tensorflow_finalizers()
    sys.exit(130)
