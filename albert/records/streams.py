"""Record streams whose every position is addressable: what lets any run resume exactly.

The training stream of a run is an infinite, seeded sequence of serialised
records. Record `p` of the stream is a pure function of the input files,
their record counts, the seed and `p`, and the stream can be started at any
`p` after reading at most one group of files partially. So a run needs no
saved iterator state: after step `s` with global batch `B`, it continues at
`p = s · B` — on any number of devices or workers, with or without TPU
input pipelines (whose iterators TensorFlow cannot checkpoint).

Order of the stream (the original's scheme, made addressable):

* epoch `e` visits every file once, in the order of a seeded shuffle of the
  file list (`stateless_shuffle` with seed `(seed, e)`);
* the epoch's files are taken in groups of `cycle_length` (the original
  interleaved 4 files); a group's files are read round-robin, one record
  each in turn, a file leaving the rotation when it ends;
* consecutive windows of `shuffle_window` records are permuted with seed
  `(seed + 1, window index)` (the original shuffled through a 100-record
  buffer, whose state cannot be addressed).

Evaluation streams are the records in file order, once.
"""

import dataclasses
from typing import List, Sequence, Tuple

import tensorflow as tf

from albert.errors import InputError

CYCLE_LENGTH = 4


@dataclasses.dataclass(frozen=True)
class RecordSource:
    """TFRecord files and the number of records in each."""

    files: Tuple[str, ...]
    record_counts: Tuple[int, ...]

    def __post_init__(self):
        if len(self.files) != len(self.record_counts):
            raise ValueError("one record count per file")
        if not self.files:
            raise InputError("No input files")
        empty = [f for f, n in zip(self.files, self.record_counts) if n == 0]
        if empty:
            raise InputError(f"{empty[0]} holds no records")

    @property
    def total_records(self) -> int:
        return sum(self.record_counts)


def epoch_file_order(num_files: int, seed: int, epoch: int) -> List[int]:
    """The seeded order in which epoch `epoch` visits the files (same op as in the graph)."""
    return tf.random.experimental.stateless_shuffle(
        tf.range(num_files, dtype=tf.int64),
        seed=tf.constant([seed, epoch], tf.int64)).numpy().tolist()


def round_robin_position(counts: Sequence[int], consumed: int) -> Tuple[List[int], int]:
    """Where round-robin reading of files with `counts` records stands after `consumed` records.

    Returns (records taken from each file, index of the file read next).
    Rounds are whole passes over the files that still have records.
    """
    taken = [0] * len(counts)
    remaining = consumed
    while True:
        active = [i for i, count in enumerate(counts) if count > taken[i]]
        if not active:
            raise ValueError("position beyond the end of the group")
        # Every active file gives one record per round until the shortest ends.
        rounds = min(counts[i] - taken[i] for i in active)
        if remaining >= rounds * len(active):
            remaining -= rounds * len(active)
            for i in active:
                taken[i] += rounds
            continue
        full, partial = divmod(remaining, len(active))
        for i in active:
            taken[i] += full
        for i in active[:partial]:
            taken[i] += 1
        return taken, active[partial]


def _group_start(counts_in_order: Sequence[int], offset: int, cycle_length: int):
    """(group index, records into the group) of record `offset` of an epoch."""
    group = 0
    for start in range(0, len(counts_in_order), cycle_length):
        size = sum(counts_in_order[start:start + cycle_length])
        if offset < size:
            return group, offset
        offset -= size
        group += 1
    raise ValueError("offset beyond the epoch")


def training_records(source: RecordSource, seed: int, start: int = 0,
                     cycle_length: int = CYCLE_LENGTH, shuffle_window: int = 100):
    """`(position, record)` pairs of the run's training stream from position `start`, endlessly."""
    if shuffle_window < 1:
        raise InputError("--shuffle_buffer_size must be at least 1")
    files = tf.constant(list(source.files))
    num_files = len(source.files)
    cycle = max(1, min(cycle_length, num_files))
    padded = -(-num_files // cycle) * cycle

    def read_group(group_files, skips):
        active = tf.data.Dataset.from_tensor_slices((group_files, skips)).filter(
            lambda path, skip: tf.strings.length(path) > 0)
        return active.interleave(
            lambda path, skip: tf.data.TFRecordDataset(path).skip(skip),
            cycle_length=cycle, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True)

    def epoch_groups(epoch):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(num_files, dtype=tf.int64), seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
        ordered = tf.concat([tf.gather(files, order), tf.fill([padded - num_files], "")], axis=0)
        groups = tf.reshape(ordered, [padded // cycle, cycle])
        return tf.data.Dataset.from_tensor_slices((groups, tf.zeros_like(groups, tf.int64)))

    # The window holding `start`, from its first record.
    window, offset_in_window = divmod(start, shuffle_window)
    first = window * shuffle_window
    epoch, offset = divmod(first, source.total_records)
    order = epoch_file_order(num_files, seed, epoch)
    counts = [source.record_counts[i] for i in order]
    group, into_group = _group_start(counts, offset, cycle)
    members = list(range(group * cycle, min((group + 1) * cycle, num_files)))
    taken, next_member = round_robin_position([counts[m] for m in members], into_group)
    # Rotate so the file read next comes first; the round-robin then continues exactly.
    rotated = members[next_member:] + members[:next_member]
    taken = taken[next_member:] + taken[:next_member]
    first_group = tf.data.Dataset.from_tensors((
        tf.constant([source.files[order[m]] for m in rotated] + [""] * (cycle - len(rotated))),
        tf.constant(taken + [0] * (cycle - len(rotated)), tf.int64)))
    groups = first_group.concatenate(epoch_groups(tf.constant(epoch, tf.int64)).skip(group + 1))
    groups = groups.concatenate(
        tf.data.Dataset.range(epoch + 1, 2**62).flat_map(epoch_groups))
    records = groups.flat_map(read_group)

    def shuffle_window_records(index, batch):
        return tf.random.experimental.stateless_shuffle(
            batch, seed=tf.stack([tf.constant(seed + 1, tf.int64), index]))

    records = records.batch(shuffle_window, drop_remainder=True).enumerate(start=window)
    records = records.map(shuffle_window_records, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True).unbatch()
    return records.skip(offset_in_window).enumerate(start=start)


def evaluation_records(source: RecordSource):
    """The records of `source` in file order, once."""
    return tf.data.TFRecordDataset(list(source.files))
