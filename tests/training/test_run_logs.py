"""The step log on object stores: parts written once, never re-uploaded; one reader; truncation.

An object store cannot append: TensorFlow's `gs://` file system downloads the
object and uploads all of it again on every append, so appending a few lines
per host loop costs the whole log each time. The tests run on TensorFlow's
in-memory `ram://` (remote for `albert.io`, like `gs://`) with `albert.io`'s
file opening instrumented to charge what an object store uploads: the bytes
written, plus, for an append to an object, the object's existing size.
"""

import json
import os
import uuid

import pytest
import tensorflow as tf

from albert import io
from albert.training import run_directory
from albert.training.run_directory import TRAIN_LOG, RunDirectory, part_name, read_train_log

CALLS, STEPS_PER_CALL, CALLS_PER_FLUSH = 50, 10, 5


def _records(first: int, count: int):
    return [{"step": step, "loss": 4.0 + (step % 7) / 8, "masked_lm_loss": 3.5 + (step % 5) / 4,
             "learning_rate": 0.00125, "examples_per_second": 512.0}
            for step in range(first, first + count)]


class _CountingHandle:
    """A file object that charges the bytes written through it to `uploads`."""

    def __init__(self, handle, path, uploads):
        self._handle, self._path, self._uploads = handle, path, uploads

    def write(self, data):
        self._uploads.append((self._path, len(data.encode("utf-8") if isinstance(data, str)
                                              else data)))
        return self._handle.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._handle.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._handle, name)


@pytest.fixture
def uploads(monkeypatch):
    """(path, bytes) of every upload through `albert.io`, as an object store would charge."""
    charged = []
    real_open = io.open_file

    def open_file(path, mode="r"):
        if "a" in mode and io.is_remote(path) and io.exists(path):
            charged.append((path, io.size(path)))  # an append re-uploads the object
        handle = real_open(path, mode)
        return _CountingHandle(handle, path, charged) if set(mode) & set("wa") else handle

    monkeypatch.setattr(io, "open_file", open_file)
    return charged


@pytest.fixture
def ram_dir():
    path = f"ram://run-logs-{uuid.uuid4().hex[:8]}/run"
    yield path
    io.rmtree(io.dirname(path))


def _event_files(output_dir):
    directory = io.join(output_dir, "tensorboard", "train")
    if not io.isdir(directory):
        return {}
    return {name: io.size(io.join(directory, name)) for name in io.listdir(directory)
            if name.startswith("events.")}


def _log_in_windows(directory, uploads, flush):
    """CALLS calls of STEPS_PER_CALL records, `flush()` after every CALLS_PER_FLUSH; the
    bytes uploaded in each window (its calls and its flush)."""
    windows, calls_bytes = [], []
    for call in range(CALLS):
        before = sum(size for _, size in uploads)
        directory.log_steps(_records(call * STEPS_PER_CALL + 1, STEPS_PER_CALL))
        calls_bytes.append(sum(size for _, size in uploads) - before)
        if (call + 1) % CALLS_PER_FLUSH == 0:
            flush()
            windows.append(sum(size for _, size in uploads))
    return [b - a for a, b in zip([0] + windows, windows)], calls_bytes


def test_on_an_object_store_each_flush_uploads_only_its_own_records(ram_dir, uploads):
    directory = RunDirectory(ram_dir)
    per_flush, per_call = _log_in_windows(directory, uploads, directory.flush_logs)
    print(f"bytes uploaded per flush: first {per_flush[0]}, last {per_flush[-1]}")
    assert per_call == [0] * CALLS  # log_steps only keeps the records
    assert per_flush[0] > 0 and per_flush[-1] <= 1.2 * per_flush[0]
    # Each flush is one new object holding its records, named by its last step.
    steps_per_flush = STEPS_PER_CALL * CALLS_PER_FLUSH
    lasts = range(steps_per_flush, CALLS * STEPS_PER_CALL + 1, steps_per_flush)
    assert [io.basename(path).split(".tmp-")[0] for path, _ in uploads] == [
        f".{part_name(last)}" for last in lasts]  # written beside their names, then renamed
    names = io.listdir(ram_dir)
    assert TRAIN_LOG not in names
    assert [name for name in names if name.startswith("train_log")] == [
        part_name(last) for last in lasts]
    assert part_name(1200) == "train_log-000001200.jsonl"
    # One reader for the whole log: every record, in order, as written.
    assert read_train_log(ram_dir) == _records(1, CALLS * STEPS_PER_CALL)
    # TensorBoard: one event file per flush, written once.
    assert len(_event_files(ram_dir)) == CALLS // CALLS_PER_FLUSH
    directory.unlock()


def test_the_old_append_path_grows_with_the_log(ram_dir, uploads):
    """What the instrumentation would show if log_steps appended on an object store again."""
    directory = RunDirectory(ram_dir)
    directory._buffered = False  # the local path: append at every call
    per_flush, _ = _log_in_windows(directory, uploads, directory.flush_logs)
    print(f"bytes uploaded per flush (appending): first {per_flush[0]}, last {per_flush[-1]}")
    assert per_flush[-1] > 5 * per_flush[0]
    assert read_train_log(ram_dir) == _records(1, CALLS * STEPS_PER_CALL)
    directory.unlock()


def test_tensorboard_is_not_written_between_flushes_on_an_object_store(ram_dir):
    directory = RunDirectory(ram_dir)
    directory.log_steps(_records(1, 10))
    directory.flush_logs()
    first = _event_files(ram_dir)
    assert len(first) == 1
    for call in range(3):
        directory.log_steps(_records(11 + 10 * call, 10))
        assert _event_files(ram_dir) == first  # nothing uploaded, nothing re-uploaded
    directory.flush_logs()
    second = _event_files(ram_dir)
    assert len(second) == 2 and {name: second[name] for name in first} == first
    directory.unlock()


def test_unlock_writes_what_is_held_even_when_the_run_fails(ram_dir):
    directory = RunDirectory(ram_dir)
    with pytest.raises(KeyboardInterrupt):
        try:
            directory.log_steps(_records(1, 7))
            assert read_train_log(ram_dir) == []  # held in memory
            raise KeyboardInterrupt
        finally:
            directory.unlock()
    assert read_train_log(ram_dir) == _records(1, 7)
    assert part_name(7) in io.listdir(ram_dir)
    directory.flush_logs()  # nothing held: nothing written
    assert read_train_log(ram_dir) == _records(1, 7)


def test_a_resumed_run_drops_the_records_after_its_checkpoint_from_the_parts(ram_dir, uploads):
    directory = RunDirectory(ram_dir)
    _log_in_windows(directory, uploads, directory.flush_logs)  # parts of 50 steps, to 500
    directory.unlock()
    del uploads[:]

    resumed = RunDirectory(ram_dir)
    resumed.truncate_train_log(275)
    assert read_train_log(ram_dir) == _records(1, 275)
    parts = [name for name in io.listdir(ram_dir) if name.startswith("train_log")]
    # Untouched up to 250; the part straddling 275 rewritten under its new last step.
    assert parts == [part_name(last) for last in range(50, 251, 50)] + [part_name(275)]
    assert [io.basename(path).split(".tmp-")[0] for path, _ in uploads] == [
        f".{part_name(275)}"]
    assert sum(size for _, size in uploads) == len(
        "".join(json.dumps(r, sort_keys=True) + "\n" for r in _records(251, 25)))

    # The resumed run writes the steps again, flushed at other steps.
    resumed.log_steps(_records(276, 24))
    resumed.flush_logs()
    resumed.log_steps(_records(300, 101))
    resumed.unlock()
    assert read_train_log(ram_dir) == _records(1, 400)

    # A part wholly after the checkpoint goes; one ending at it stays as it is.
    again = RunDirectory(ram_dir)
    again.truncate_train_log(299)
    assert read_train_log(ram_dir) == _records(1, 299)
    assert [name for name in io.listdir(ram_dir) if name.startswith("train_log")][-2:] == [
        part_name(275), part_name(299)]
    again.unlock()


def test_records_held_past_the_checkpoint_are_dropped_too(ram_dir):
    directory = RunDirectory(ram_dir)
    directory.log_steps(_records(1, 30))
    directory.truncate_train_log(12)
    directory.unlock()
    assert read_train_log(ram_dir) == _records(1, 12)


def test_a_log_begun_as_one_file_continues_in_parts(ram_dir):
    """A run directory on an object store written before the parts (one train_log.jsonl)."""
    io.makedirs(ram_dir)
    io.write_text_atomically(io.join(ram_dir, TRAIN_LOG), "".join(
        json.dumps(record, sort_keys=True) + "\n" for record in _records(1, 40)))
    directory = RunDirectory(ram_dir)
    directory.truncate_train_log(30)
    directory.log_steps(_records(31, 20))
    directory.unlock()
    assert read_train_log(ram_dir) == _records(1, 50)
    assert len(io.split_lines(io.read_text(io.join(ram_dir, TRAIN_LOG)))) == 30


def test_a_local_log_is_appended_at_every_call_as_before(tmp_path, uploads):
    """Local directories: train_log.jsonl exactly as the code before the parts wrote it."""
    output_dir = str(tmp_path / "run")
    os.makedirs(output_dir)  # as the trainer makes it (run files, locks) before logging
    directory = RunDirectory(output_dir)
    expected = ""
    event_sizes = []
    for call in range(6):
        records = _records(call * 4 + 1, 4)
        directory.log_steps(records)
        expected += "".join(json.dumps(record, sort_keys=True) + "\n" for record in records)
        # Written (and its summaries flushed) at every call, before any flush_logs().
        assert (tmp_path / "run" / TRAIN_LOG).read_bytes() == expected.encode("utf-8")
        event_sizes.append(sum(_event_files(output_dir).values()))
        if call % 2:
            directory.flush_logs()
            assert (tmp_path / "run" / TRAIN_LOG).read_bytes() == expected.encode("utf-8")
    assert event_sizes == sorted(set(event_sizes))  # grew at every call
    assert len(uploads) == 6  # one append per call
    directory.unlock()
    assert (tmp_path / "run" / TRAIN_LOG).read_bytes() == expected.encode("utf-8")
    assert sorted(os.listdir(tmp_path / "run")) == ["tensorboard", TRAIN_LOG]
    assert read_train_log(output_dir) == _records(1, 24)

    directory = RunDirectory(output_dir)
    directory.truncate_train_log(10)
    assert (tmp_path / "run" / TRAIN_LOG).read_text() == "".join(
        json.dumps(record, sort_keys=True) + "\n" for record in _records(1, 10))


def test_no_log_reads_as_empty(tmp_path, ram_dir):
    assert read_train_log(str(tmp_path / "absent")) == []
    assert read_train_log(ram_dir) == []
    assert tf.io.gfile.exists(ram_dir) is False


def test_a_run_not_flushed_for_long_writes_a_part_anyway(ram_dir, monkeypatch):
    monkeypatch.setattr(run_directory, "MAX_BUFFERED_STEPS", 25)
    directory = RunDirectory(ram_dir)
    for call in range(5):
        directory.log_steps(_records(call * 10 + 1, 10))
    assert [name for name in io.listdir(ram_dir) if name.startswith("train_log")] == [
        part_name(30)]
    directory.unlock()
    assert read_train_log(ram_dir) == _records(1, 50)
