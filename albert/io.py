"""Every file operation of the package: local paths and TensorFlow's file systems alike.

TPU users keep data and checkpoints in `gs://`; tests use TensorFlow's
in-memory `ram://`. Paths with a scheme (`scheme://...`) go through
`tf.io.gfile`, which knows every file system TensorFlow has (GCS, HDFS, S3
plugins, `ram://`). Plain local paths use the standard library, which does
the same thing there and keeps processes that never touch TensorFlow (the
data-creation workers, tokenizer training) from paying seconds and hundreds
of MB to import it.

Atomic writes: a file is written under a temporary name beside its final
name and renamed into place once complete, so a reader (or a resumed run)
never sees half a file, and a failed write leaves the old file untouched.
Temporary names start with a dot and contain `.tmp-`.
"""

import contextlib
import errno
import glob as _glob
import gzip
import json
import os
import shutil
import tempfile
import uuid
from typing import Iterator, List, Sequence

from albert.errors import InputError


def is_remote(path: str) -> bool:
    """True for paths that name a TensorFlow file system (`gs://`, `ram://`, ...)."""
    return "://" in str(path)


def _gfile():
    # Inside: local paths never need TensorFlow, and the data-creation workers run without it.
    import tensorflow as tf

    return tf.io.gfile


def join(*parts: str) -> str:
    return os.path.join(*parts)


def dirname(path: str) -> str:
    return os.path.dirname(path.rstrip("/"))


def basename(path: str) -> str:
    return os.path.basename(path)


def absolute(path: str) -> str:
    """The absolute form of a local path; remote paths are already absolute."""
    return path if is_remote(path) else os.path.abspath(path)


# ------------------------------------------------------------------ queries
def exists(path: str) -> bool:
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def refuse_existing(path: str, flag: str = "") -> None:
    """InputError when `path` exists: a result a command would write is never overwritten.
    `flag` (such as "--output") names the flag that chose the path."""
    if path and exists(path):
        named = f"{flag}={path}" if flag else path
        raise InputError(f"{named} exists; it is not overwritten (choose another name or "
                         "remove it)")


def isdir(path: str) -> bool:
    if not is_remote(path):
        return os.path.isdir(path)
    gfile = _gfile()
    if not gfile.isdir(path):
        return False
    if not path.startswith("ram://"):
        return True
    # TensorFlow's in-memory file system calls every prefix of a file name a
    # directory ("run/model.ckpt-1" of "run/model.ckpt-10.index"); the
    # entries of a real directory exist under "<path>/".
    entries = gfile.listdir(path)
    return not entries or any(gfile.exists(join(path, entry.rstrip("/"))) for entry in entries)


def isfile(path: str) -> bool:
    return exists(path) and not isdir(path)


def size(path: str) -> int:
    return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def listdir(path: str) -> List[str]:
    """Names in a directory (no trailing slashes), sorted."""
    names = _gfile().listdir(path) if is_remote(path) else os.listdir(path)
    return sorted(name.rstrip("/") for name in names)


def has_glob_magic(pattern: str) -> bool:
    return _glob.has_magic(pattern)


def glob(pattern: str) -> List[str]:
    """Paths matching a glob pattern, sorted (file-system order is not stable)."""
    matches = _gfile().glob(pattern) if is_remote(pattern) else _glob.glob(pattern)
    return sorted(matches)


def expand_file_patterns(patterns: str, what: str = "input",
                         skip_suffixes: Sequence[str] = ()) -> List[str]:
    """Comma-separated files or globs -> existing files, each glob's matches sorted.

    A glob's matches ending in one of `skip_suffixes` are left out (files a
    tool writes beside its outputs, which `name*` globs would otherwise
    pick up); a file named explicitly is always kept. Raises InputError
    naming the first pattern that matches no file.
    """
    files = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        if has_glob_magic(pattern):
            matches = [path for path in glob(pattern) if not path.endswith(tuple(skip_suffixes))]
        else:
            matches = [pattern]
        matches = [path for path in matches if isfile(path)]
        if not matches:
            raise InputError(f"No {what} file matches {pattern!r}")
        files.extend(matches)
    if not files:
        raise InputError(f"No {what} files given")
    return files


# ---------------------------------------------------------------- changes
def makedirs(path: str) -> None:
    if not path:
        return
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def remove(path: str) -> None:
    if is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(path)


def remove_if_exists(path: str) -> None:
    try:
        if exists(path):
            remove(path)
    except OSError:
        pass


def rmtree(path: str) -> None:
    if is_remote(path):
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def rename(source: str, target: str) -> None:
    """Moves `source` to `target`, replacing it (atomic on local file systems)."""
    if is_remote(source) or is_remote(target):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def copy(source: str, target: str) -> None:
    if is_remote(source) or is_remote(target):
        _gfile().copy(source, target, overwrite=True)
    else:
        shutil.copyfile(source, target)


# --------------------------------------------------------------- reading
def open_file(path: str, mode: str = "r"):
    """A file object for `path` (text modes are UTF-8)."""
    binary = "b" in mode
    if is_remote(path):
        # GFile opens lazily and raises TensorFlow's own errors; a missing
        # file is reported here, as the standard library does.
        if "r" in mode and not _gfile().exists(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        return _gfile().GFile(path, mode)
    if binary:
        return open(path, mode)
    return open(path, mode, encoding="utf-8")


@contextlib.contextmanager
def open_binary_maybe_gzip(path: str):
    """Binary reader; `.gz` files are decompressed."""
    with open_file(path, "rb") as handle:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=handle, mode="rb") as unzipped:
                yield unzipped
        else:
            yield handle


def read_bytes(path: str) -> bytes:
    with open_file(path, "rb") as handle:
        return handle.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def read_json(path: str):
    return json.loads(read_text(path))


def read_utf8(path: str) -> str:
    """The text of a user's input file; one that is not UTF-8 is an `InputError` naming it."""
    try:
        return read_text(path)
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not UTF-8 text: {error}") from None


def split_lines(text: str) -> List[str]:
    """`text` cut into lines at line feeds only (LF, or CR LF), as the original's readers cut files.

    `str.splitlines()` also cuts at U+2028, U+2029, U+0085, form feeds,
    vertical tabs and a lone CR, which real text fields contain: a row of a
    TSV file, or a JSON line, would be broken in two. A final line feed does
    not start an empty line.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_lines(path: str) -> List[str]:
    """The lines of a UTF-8 input file, cut as `split_lines` does."""
    return split_lines(read_utf8(path))


def iter_lines(path: str) -> Iterator[str]:
    with open_file(path, "r") as handle:
        yield from handle


# --------------------------------------------------------------- writing
def temporary_name(path: str) -> str:
    """A unique hidden name in `path`'s directory for writing `path` atomically."""
    return join(dirname(path), f".{basename(path)}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _process_is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_temporaries(path: str) -> List[str]:
    """Removes what killed runs left of `path`: its temporaries whose process is gone.

    A run killed outright (SIGKILL, power loss) cannot clean up after
    itself; the next run that writes `path` calls this first. Only local
    temporaries of `path`'s own name are touched, and only those whose
    writing process (the pid in the name) no longer exists, so a run writing
    the same name right now keeps its files. Remote file systems are left
    alone (a pid means nothing across machines). Returns what was removed.
    """
    if is_remote(path):
        return []
    directory = dirname(absolute(path)) or "."
    prefix = f".{basename(path)}.tmp-"
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        if not name.startswith(prefix):
            continue
        pid_text = name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit() or _process_is_alive(int(pid_text)):
            continue
        stale = os.path.join(directory, name)
        if os.path.isdir(stale) and not os.path.islink(stale):
            shutil.rmtree(stale, ignore_errors=True)
        else:
            try:
                os.remove(stale)
            except OSError:
                continue
        removed.append(stale)
    return removed


@contextlib.contextmanager
def atomic_output_file(path: str):
    """Yields a temporary path beside `path`; renames it to `path` on success.

    On failure the temporary file is removed and `path` is left as it was.
    """
    makedirs(dirname(path))
    temporary = temporary_name(path)
    try:
        yield temporary
        rename(temporary, path)
    finally:
        remove_if_exists(temporary)


def write_bytes_atomically(path: str, data: bytes) -> None:
    with atomic_output_file(path) as temporary:
        with open_file(temporary, "wb") as handle:
            handle.write(data)


def write_text_atomically(path: str, text: str) -> None:
    write_bytes_atomically(path, text.encode("utf-8"))


def json_text(value) -> str:
    """The package's JSON style: 2-space indent, sorted keys, trailing newline."""
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def write_json_atomically(path: str, value) -> None:
    write_text_atomically(path, json_text(value))


@contextlib.contextmanager
def atomic_output_dir(final_dir: str, overwrite: bool = False):
    """Yields a scratch directory; on success moves its files into `final_dir`.

    Files are renamed one by one (each atomically). Existing files of the same
    name in `final_dir` are an error unless `overwrite`; the check runs before
    anything is moved. On failure the scratch directory is removed and
    `final_dir` is untouched.
    """
    final_dir = absolute(final_dir).rstrip("/")
    scratch = temporary_name(final_dir)
    makedirs(scratch)
    try:
        yield scratch
        names = listdir(scratch)
        if not overwrite:
            clashes = [name for name in names if exists(join(final_dir, name))]
            if clashes:
                raise InputError(f"{final_dir} already holds {', '.join(clashes)}; "
                                 "remove them or choose another output directory")
        makedirs(final_dir)
        for name in names:
            _replace(join(scratch, name), join(final_dir, name))
    finally:
        rmtree(scratch)


def _replace(source: str, target: str) -> None:
    """Renames `source` to `target`; a directory already at `target` (an earlier build of the
    same output, `overwrite`) is moved aside first and removed only once the new one is in
    place, since a rename cannot replace a non-empty directory."""
    if not isdir(target):
        rename(source, target)
        return
    previous = temporary_name(target)
    rename(target, previous)
    try:
        rename(source, target)
    except BaseException:
        rename(previous, target)
        raise
    rmtree(previous)


@contextlib.contextmanager
def new_directory(final_dir: str, overwrite: bool = False):
    """Yields a scratch directory beside `final_dir`; on success it becomes `final_dir`.

    For outputs that are directories as a whole (SavedModels). An existing
    `final_dir` is an error unless `overwrite`, checked before any work; it is
    replaced only once the new one is complete. On failure the scratch
    directory is removed and `final_dir` is untouched. An existing empty
    directory counts as absent.
    """
    final_dir = absolute(final_dir).rstrip("/")
    check_new_directory(final_dir, overwrite)
    scratch = temporary_name(final_dir)
    makedirs(scratch)
    try:
        yield scratch
        if exists(final_dir):
            previous = temporary_name(final_dir)
            rename(final_dir, previous)
            rename(scratch, final_dir)
            rmtree(previous)
        else:
            rename(scratch, final_dir)
    finally:
        if exists(scratch):
            rmtree(scratch)


def check_new_directory(final_dir: str, overwrite: bool = False,
                        hint: str = "remove it, pass --overwrite or choose another output "
                                    "directory") -> None:
    """What `new_directory` refuses, checked on its own: for commands that write the
    directory only at their end, so that they refuse it before their work. `hint`: what the
    user can do, in the error."""
    final_dir = absolute(final_dir).rstrip("/")
    if exists(final_dir) and (not isdir(final_dir) or listdir(final_dir)) and not overwrite:
        raise InputError(f"{final_dir} already exists and is not empty; {hint}")


@contextlib.contextmanager
def local_scratch_dir(prefix: str = "albert-"):
    """A temporary local directory, removed afterwards."""
    directory = tempfile.mkdtemp(prefix=prefix)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
