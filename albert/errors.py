"""User-facing error types.

Scripts catch `AlbertError` and print its message without a stack trace: these
errors describe a mistake in the user's input (a config, a checkpoint, a flag),
not a bug in the library.
"""


class AlbertError(Exception):
    """Base class for errors caused by user input."""


class ConfigError(AlbertError, ValueError):
    """An `albert_config.json` (or a config object) is invalid."""


class CheckpointMismatchError(AlbertError, ValueError):
    """A checkpoint's variable names or shapes do not fit the model config."""


class InputError(AlbertError, ValueError):
    """Model or script input that cannot be used (bad shapes, missing files)."""


class CheckpointDamagedError(InputError):
    """A checkpoint's files cannot be read back: cut short, overwritten or corrupted on disk."""


class DiskFullError(AlbertError, OSError):
    """A run stopped because its output disk is full; what was written before is intact."""


class TrainingDivergedError(AlbertError, RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class RunPreempted(Exception):
    """SIGTERM (a preemptible VM's or a TPU's maintenance notice) stopped a run after
    saving a checkpoint at the step reached; the message names it. The scripts print it
    as one line and exit with status 143 (128 + SIGTERM)."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run; the message says where it stopped and how it goes on.

    Still a `KeyboardInterrupt`, so code that catches those keeps working;
    the scripts print the message as one line and exit with status 130
    (128 + SIGINT), as shells do for an interrupted command.
    """
