"""Write outputs under temporary names and move them into place on success.

A run that fails half-way (bad input, crash, Ctrl-C) must leave no partial
output file behind and must not damage files that were already there.
"""

import contextlib
import os
import shutil
import tempfile

from albert.errors import InputError


@contextlib.contextmanager
def atomic_output_dir(final_dir: str, overwrite: bool = False):
    """Yields a scratch directory; on success moves its files into `final_dir`.

    Files are renamed one by one (atomic per file, same file system). Existing
    files of the same name in `final_dir` are an error unless `overwrite`.
    On failure the scratch directory is removed and `final_dir` is untouched.
    """
    final_dir = os.path.abspath(final_dir)
    parent = os.path.dirname(final_dir)
    os.makedirs(parent, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(final_dir)}.tmp-", dir=parent)
    try:
        yield scratch
        names = sorted(os.listdir(scratch))
        if not overwrite:
            clashes = [name for name in names if os.path.exists(os.path.join(final_dir, name))]
            if clashes:
                raise InputError(
                    f"{final_dir} already holds {', '.join(clashes)}; "
                    "remove them or choose another output directory")
        os.makedirs(final_dir, exist_ok=True)
        for name in names:
            os.replace(os.path.join(scratch, name), os.path.join(final_dir, name))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def atomic_output_file(path: str):
    """Yields a temporary path beside `path`; renames it to `path` on success."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-",
                                         dir=os.path.dirname(path))
    os.close(handle)
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
