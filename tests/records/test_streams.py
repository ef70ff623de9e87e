"""The training stream: addressable at every position, seeded, the same for every topology."""


import numpy as np
import pytest
import tensorflow as tf

from albert.records.streams import RecordSource, evaluation_records, round_robin_position, training_records
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


def test_length_buckets_regroup_each_window_and_resume_mid_window(source):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    # Records "i:j" get lengths from a hash of their text, so lengths vary.
    task_input = TaskInput(source, _parse,
                           lengths=lambda records: tf.strings.to_hash_bucket_fast(records, 50),
                           trim=lambda features: features)
    batch, window = 4, 5

    def steps(start, count, bucket_window):
        dataset = distributed_training_dataset(strategy, task_input, batch, seed=3,
                                               start_step=start, shuffle_window=5,
                                               bucket_window=bucket_window)
        iterator = iter(dataset)
        return [[(int(p), r.decode()) for p, r in zip(b["position"].numpy(), b["record"].numpy())]
                for b in (next(iterator) for _ in range(count))]

    plain = steps(0, 2 * window, 0)
    bucketed = steps(0, 2 * window, window)
    for w in range(2):   # the same records in each window, regrouped
        assert sorted(sum(plain[w * window:(w + 1) * window], [])) == \
            sorted(sum(bucketed[w * window:(w + 1) * window], []))
    assert bucketed != plain
    # Within a window, batches are runs of the length order.
    lengths = {r: int(tf.strings.to_hash_bucket_fast([r], 50)[0]) for _, r in sum(bucketed, [])}
    spans = [(min(lengths[r] for _, r in b), max(lengths[r] for _, r in b)) for b in bucketed[:window]]
    spans.sort()
    assert all(high <= next_low for (_, high), (next_low, _) in zip(spans, spans[1:]))
    # Resuming at step 7 (inside the second window) continues exactly.
    assert steps(7, 3, window) == bucketed[7:10]
