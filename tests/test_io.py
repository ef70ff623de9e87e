"""albert.io: stale temporaries of killed runs are removed, live ones kept."""

import os
import subprocess
import sys

from albert import io


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_remove_stale_temporaries_removes_dead_writers_files_only(tmp_path):
    target = tmp_path / "train.tfrecord"
    dead = _dead_pid()
    stale_file = tmp_path / f".train.tfrecord.tmp-{dead}-abcd1234"
    stale_dir = tmp_path / f".train.tfrecord.tmp-{dead}-ef567890"
    live_file = tmp_path / f".train.tfrecord.tmp-{os.getpid()}-00000000"
    other_name = tmp_path / f".other.tfrecord.tmp-{dead}-abcd1234"
    for path in (stale_file, live_file, other_name):
        path.write_bytes(b"partial")
    stale_dir.mkdir()
    (stale_dir / "part").write_bytes(b"x")

    removed = io.remove_stale_temporaries(str(target))

    assert sorted(removed) == sorted([str(stale_file), str(stale_dir)])
    assert not stale_file.exists() and not stale_dir.exists()
    assert live_file.exists() and other_name.exists()
