"""Shared entry point for the absl scripts: user mistakes end with one clear line.

`run(main)` runs an absl `main`; an `AlbertError` (bad config, checkpoint,
input) or an `OSError` (missing file, no permission) prints `ERROR: <message>`
to stderr and exits with status 1, without a stack trace. Anything else is a
bug and keeps its traceback.

Ctrl-C ends with one line too, saying where the run stopped and that the same
command goes on from there, and exit status 130.

It also keeps TensorFlow's noise out of the scripts' output: the CUDA
probe's "failed call to cuInit" error line on machines without a GPU
driver, and the INFO lines of TensorFlow's internals (checkpoint-sharding
timings, SavedModel notes).
"""

import logging
import os
import re
import sys

from absl import app, flags

from albert import interrupts
from albert.native_logs import filtered_stderr
from albert.config import AlbertConfig
from albert.errors import AlbertError, RunInterrupted, RunPreempted

# Lines TensorFlow's C++ runtime prints while enumerating devices on a machine
# without a usable GPU; they are not errors of the run.
_DEVICE_PROBE_NOISE = re.compile(
    r"(failed call to cuInit|Could not find cuda drivers|cudart_stub|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|computation placer already registered|"
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


def probe_tensorflow_devices() -> None:
    """Enumerates TensorFlow's devices once, without its GPU-probe noise.

    Enumerating physical devices does not start the runtime, so
    multi-worker strategies can still be configured afterwards.
    """
    # Inside: create_pretraining_data.py and its workers import this module without TensorFlow.
    import tensorflow as tf

    with filtered_stderr(_DEVICE_PROBE_NOISE):
        tf.config.list_physical_devices()


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


def load_albert_config(path: str) -> AlbertConfig:
    return AlbertConfig.from_json_file(
        path, allow_unknown_keys=flags.FLAGS.allow_unknown_config_keys)


def run(main):
    def guarded_main(argv):
        logging.getLogger("albert").setLevel(logging.INFO)
        logging.getLogger("tensorflow").setLevel(logging.WARNING)
        logging.getLogger("absl").addFilter(_DropTensorFlowInfo())
        try:
            if "tensorflow" in sys.modules:
                probe_tensorflow_devices()
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
        app.run(guarded_main)
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
