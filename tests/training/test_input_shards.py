"""What each worker reads: with --input_shards a multiple of the workers, only its own files."""

import collections
import re

import pytest
import tensorflow as tf

from albert.errors import InputError
from albert.records.streams import RecordSource, training_records
from albert.training.inputs import (InputPlan, TaskInput, check_global_batch, shard_sources,
                                    worker_records)

BATCH = 8
STEPS = 6


@pytest.fixture
def source(synthetic_records):
    files, _ = synthetic_records
    counts = [sum(1 for _ in tf.data.TFRecordDataset(f)) for f in files]
    return RecordSource(tuple(files), tuple(counts))


@pytest.fixture
def records_read(monkeypatch):
    """Counts the records every TFRecordDataset of the pipeline reads, per file."""
    counts = collections.Counter()
    real = tf.data.TFRecordDataset

    def counting(path, *args, **kwargs):
        def count(name):
            counts[name.numpy().decode()] += 1
            return name

        return real(path, *args, **kwargs).map(
            lambda record: (tf.py_function(count, [path], tf.string), record)[1])

    monkeypatch.setattr(tf.data, "TFRecordDataset", counting)
    return counts


def _steps(source, plan, steps=STEPS, start_step=0):
    task_input = TaskInput(source, parse=None)
    dataset = worker_records(task_input, plan, BATCH, seed=7, start_step=start_step)
    return [(p.numpy().tolist(), r.numpy().tolist()) for p, r in dataset.take(steps)]


def test_one_shard_is_the_runs_stream_unchanged(source):
    stream = training_records(source, 7).batch(BATCH).take(STEPS)
    expected = [(p.numpy().tolist(), r.numpy().tolist()) for p, r in stream]
    assert _steps(source, InputPlan(1, 1, 0)) == expected


def test_each_worker_reads_only_its_own_files_and_the_batches_do_not_depend_on_workers(
        source, records_read):
    one_reader = _steps(source, InputPlan(2, 1, 0))
    assert sum(records_read.values()) > 0
    per_worker = []
    for worker in range(2):
        records_read.clear()
        per_worker.append(_steps(source, InputPlan(2, 2, worker)))
        own = source.files[worker]
        print(f"worker {worker} read {dict(records_read)}")
        assert set(records_read) == {own}
    # Worker w's slice of every step is the w-th half of the global batch.
    for step in range(STEPS):
        positions, records = one_reader[step]
        assert sorted(positions) == list(range(step * BATCH, (step + 1) * BATCH))
        assert per_worker[0][step][0] + per_worker[1][step][0] == positions
        assert per_worker[0][step][1] + per_worker[1][step][1] == records


def test_workers_that_do_not_divide_the_shards_read_everything_and_keep_their_slice(
        source, records_read):
    full = _steps(source, InputPlan(1, 1, 0))
    halves = []
    for worker in range(2):
        records_read.clear()
        halves.append(_steps(source, InputPlan(1, 2, worker)))
        assert set(records_read) == set(source.files)
    for step in range(STEPS):
        assert halves[0][step][0] + halves[1][step][0] == full[step][0]


def test_a_resumed_sharded_stream_continues_exactly(source):
    plan = InputPlan(2, 2, 1)
    assert _steps(source, plan, steps=STEPS)[3:] == _steps(source, plan, steps=3, start_step=3)


def test_more_shards_than_files_are_refused(source):
    with pytest.raises(InputError, match="input_shards=3 needs at least as many input files"):
        shard_sources(source, 3)


@pytest.mark.parametrize("batch, replicas, shards, micro_batches, message", [
    (0, 1, 1, 1, "--train_batch_size must be at least 1, got 0"),
    (6, 4, 1, 1, "--train_batch_size=6 is not a multiple of the 4 replicas"),
    (8, 2, 3, 1, "--train_batch_size=8 is not a multiple of --input_shards=3"),
    (8, 2, 1, 3, "--train_batch_size=8 does not split into 2 replica(s) x "
                 "--gradient_accumulation_steps=3 equal micro-batches")])
def test_the_global_batch_is_checked_in_one_place(batch, replicas, shards, micro_batches, message):
    with pytest.raises(InputError, match=re.escape(message)):
        check_global_batch(batch, replicas, shards, micro_batches)
    check_global_batch(24, 2, 3, 4)  # 12 per replica, 8 per shard, 3 per micro-batch
