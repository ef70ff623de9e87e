"""What a checkpoint whose bytes are damaged (cut short, corrupted) looks like to its readers.

Every format's reader fails in its own way on a damaged file: TensorFlow's bundle reader with
`Read less bytes than requested` (an IndexError) or a checksum error, safetensors with a header
error, a `.keras` zip with BadZipFile, HDF5 with OSError. `reading` turns those into one
`CheckpointDamagedError` that names the checkpoint and what was wrong, where they would otherwise
end a script in a traceback. Our own errors (a missing file, a config mismatch) pass unchanged.
"""

import contextlib
import zipfile

import tensorflow as tf

from albert.errors import AlbertError, CheckpointDamagedError

# What the readers raise on bytes they cannot decode. Exceptions of our own (AlbertError) are
# never among them: they already say what is wrong.
_READ_FAILURES = (tf.errors.OpError, OSError, ValueError, IndexError, EOFError,
                  zipfile.BadZipFile)


def first_line(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


@contextlib.contextmanager
def reading(path: str, what: str = "checkpoint"):
    """Runs the body that reads the checkpoint at `path`; a read failure becomes one
    CheckpointDamagedError naming `path` (`what` says what it is: "checkpoint",
    "--init_checkpoint", a format's name)."""
    try:
        yield
    except AlbertError:
        raise
    except _READ_FAILURES as error:
        raise CheckpointDamagedError(
            f"{what} {path} cannot be read: it looks damaged or cut short "
            f"({type(error).__name__}: {first_line(error)})") from None
