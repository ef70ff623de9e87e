"""The training stream: addressable at every position, seeded, the same for every topology."""


import numpy as np
import pytest
import tensorflow as tf

from albert.data.streams import RecordSource, evaluation_records, round_robin_position, training_records
from albert.training.inputs import TaskInput, distributed_training_dataset


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    directory = tmp_path_factory.mktemp("stream")
    counts = [7, 3, 11, 5, 1, 9, 4]
    files = []
    for index, count in enumerate(counts):
        path = str(directory / f"part-{index}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for record in range(count):
                writer.write(f"{index}:{record}".encode())
        files.append(path)
    return RecordSource(tuple(files), tuple(counts))


def _records(dataset, count):
    return [(int(position), record.numpy().decode()) for position, record in dataset.take(count)]


@pytest.mark.parametrize("cycle_length, window", [(4, 5), (1, 1), (2, 7), (10, 3)])
def test_the_stream_started_anywhere_continues_the_whole_stream(source, cycle_length, window):
    whole = _records(training_records(source, seed=3, cycle_length=cycle_length,
                                      shuffle_window=window), 160)
    assert [position for position, _ in whole] == list(range(160))
    for start in (1, 4, 5, 17, 39, 40, 41, 77, 120):
        resumed = _records(training_records(source, seed=3, start=start, cycle_length=cycle_length,
                                            shuffle_window=window), 30)
        assert resumed == whole[start:start + 30], start


def test_each_epoch_reads_every_record_once_in_a_seeded_order(source):
    total = source.total_records   # 40
    window = 8                     # divides the epoch, so windows do not straddle epochs
    first = [r for _, r in _records(training_records(source, seed=3, shuffle_window=window), 3 * total)]
    for epoch in range(3):
        assert sorted(first[epoch * total:(epoch + 1) * total]) == sorted(
            f"{i}:{j}" for i, n in enumerate(source.record_counts) for j in range(n))
    assert first[:total] != first[total:2 * total]   # epochs are shuffled afresh
    again = [r for _, r in _records(training_records(source, seed=3, shuffle_window=window), total)]
    other = [r for _, r in _records(training_records(source, seed=4, shuffle_window=window), total)]
    assert again == first[:total] and other != first[:total]


def test_round_robin_positions():
    assert round_robin_position([3, 1, 2], 0) == ([0, 0, 0], 0)
    assert round_robin_position([3, 1, 2], 4) == ([2, 1, 1], 2)   # a b c | a (b done) c
    assert round_robin_position([3, 1, 2], 5) == ([2, 1, 2], 0)
    with pytest.raises(ValueError):
        round_robin_position([1, 1], 2)


def test_evaluation_reads_the_files_in_order_once(source):
    records = [r.numpy().decode() for r in evaluation_records(source)]
    assert records == [f"{i}:{j}" for i, n in enumerate(source.record_counts) for j in range(n)]


def _parse(records, positions):
    return {"record": records, "position": positions}


@pytest.mark.parametrize("devices", [1, 2])
def test_replicas_together_receive_the_global_batch_of_each_step(source, devices):
    strategy = (tf.distribute.OneDeviceStrategy("/cpu:0") if devices == 1 else
                tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")]))
    if strategy.num_replicas_in_sync != devices:
        pytest.fail("the test session must split the CPU into two logical devices (conftest)")
    task_input = TaskInput(source, _parse)
    dataset = distributed_training_dataset(strategy, task_input, global_batch_size=6, seed=3,
                                           start_step=2, shuffle_window=5)
    whole = _records(training_records(source, seed=3, shuffle_window=5), 60)
    iterator = iter(dataset)
    for step in range(2, 7):
        batch = next(iterator)
        shares = strategy.experimental_local_results(batch["position"])
        positions = np.concatenate([share.numpy() for share in shares]).tolist()
        assert positions == list(range(step * 6, step * 6 + 6))
        seeds = np.concatenate([s.numpy() for s in strategy.experimental_local_results(
            batch["dropout_seeds"])])
        assert len(set(seeds.tolist())) == 6
        records = np.concatenate([s.numpy() for s in strategy.experimental_local_results(
            batch["record"])])
        assert [r.decode() for r in records] == [r for _, r in whole[step * 6:step * 6 + 6]]
