"""The one input path of the training loop: a record stream, distributed by tf.distribute.

Every strategy — one device, several GPUs, several workers, TPU — gets its
batches from `strategy.distribute_datasets_from_function`, the path TPUs
require: each input pipeline (one per worker) builds a dataset of static-shape
per-replica batches on the host, and TensorFlow hands consecutive batches to
the worker's replicas in turn.

With one input shard (the default) the global batch of step `s` is records
`[s·B, (s+1)·B)` of the run's stream (`albert.records.streams`). With `N`
shards the files are split `N` ways, each shard is a stream of its own, and
step `s` is `B/N` records of each, in shard order. Global replica `g`
(worker `w`, local replica `r`, `g = w·R + r`) gets the `g`-th slice of
`B / (W·R)` records. A worker whose slice is whole shards reads only their
files; otherwise it reads every shard and keeps its slice. So the union of a
step's batches depends on `N` but not on the topology, and neither do the
losses, which are normalised by global sums.

Each example also gets a dropout seed derived from its stream position and
the run's seed (`albert.modeling.dropout`), so its dropout masks do not
depend on where it is computed either.
"""

import dataclasses
import logging
from typing import Callable, List, Optional

import tensorflow as tf

from albert.records.streams import CYCLE_LENGTH, RecordSource, evaluation_records, training_records
from albert.errors import InputError
from albert.modeling.dropout import mix32
from albert.modeling.encoder import DROPOUT_SEEDS

logger = logging.getLogger(__name__)

# Shard k's sub-stream is seeded with seed + k · this (shard 0: the run's seed).
SHARD_SEED_STRIDE = 1_000_003


@dataclasses.dataclass(frozen=True)
class TaskInput:
    """What a task reads: records, and how to turn a batch of them into features.

    `parse(records, positions)` maps a batch of serialised records (string
    `[n]`) and their stream positions (int64 `[n]`) to the model's features
    (static shapes). Tasks that support length bucketing also give
    `lengths(records)` (real tokens per record, int32 `[n]`) and
    `trim(features)` (the features cut to their longest example).
    """

    source: RecordSource
    parse: Callable
    lengths: Optional[Callable] = None
    trim: Optional[Callable] = None


def bucket_by_length(stream, task_input: TaskInput, global_batch_size: int, window_batches: int,
                     seed: int, first_window: int):
    """Reorders `(position, record)` so each global batch holds records of similar length.

    Within each window of `window_batches` global batches, records are sorted
    by length and cut into batches, and the batches are put in a seeded random
    order. Every global batch is still a fixed set of records of the stream,
    so all topologies see the same batches.
    """
    size = global_batch_size * window_batches

    def reorder(index, batch):
        positions, records = batch
        order = tf.argsort(task_input.lengths(records), stable=True)
        batches = tf.reshape(order, [window_batches, global_batch_size])
        batches = tf.random.experimental.stateless_shuffle(
            batches, seed=tf.stack([tf.constant(seed + 2, tf.int64), index]))
        order = tf.reshape(batches, [-1])
        return tf.gather(positions, order), tf.gather(records, order)

    stream = stream.batch(size, drop_remainder=True).enumerate(start=first_window)
    stream = stream.map(reorder, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return stream.unbatch()


def example_seeds(positions, seed: int):
    """Per-example int32 dropout seeds from int64 stream positions and the run's seed."""
    low = tf.cast(tf.bitwise.bitwise_and(positions, 0x7FFFFFFF), tf.int32)
    high = tf.cast(tf.bitwise.right_shift(positions, 31), tf.int32)
    run = mix32(tf.constant(seed & 0x7FFFFFFF, tf.int32))
    return mix32(tf.bitwise.bitwise_xor(mix32(tf.bitwise.bitwise_xor(low, run)), high))


def shard_sources(source: RecordSource, input_shards: int) -> List[RecordSource]:
    """The files split into `input_shards` sources: file `i` goes to shard `i mod input_shards`."""
    if input_shards < 1:
        raise InputError(f"--input_shards must be at least 1, got {input_shards}")
    if input_shards > len(source.files):
        raise InputError(f"--input_shards={input_shards} needs at least as many input files; "
                         f"there are {len(source.files)}")
    return [RecordSource(source.files[k::input_shards], source.record_counts[k::input_shards])
            for k in range(input_shards)]


def shard_seed(seed: int, shard: int) -> int:
    """The seed of shard `shard`'s sub-stream (shard 0: the run's seed, so one shard is the
    stream of a run without shards)."""
    return seed + SHARD_SEED_STRIDE * shard


def shard_steps(source: RecordSource, seed: int, shard: int, chunk: int, global_batch_size: int,
                start_step: int, shuffle_window: int, cycle_length: int):
    """Shard `shard`'s `chunk` records of every step from `start_step` on, with global positions.

    Record `q` of the shard's own stream is record `q mod chunk` of the
    shard's part of step `q div chunk`, which starts at `shard · chunk` in
    that step's global batch.
    """
    stream = training_records(source, shard_seed(seed, shard), start=start_step * chunk,
                              cycle_length=cycle_length, shuffle_window=shuffle_window)

    def globally(positions, records):
        step, offset = positions // chunk, positions % chunk
        return step * global_batch_size + shard * chunk + offset, records

    return stream.batch(chunk, drop_remainder=True).map(globally)


@dataclasses.dataclass(frozen=True)
class InputPlan:
    """Which records one input pipeline (one worker) reads and keeps.

    The global batch of a step is `input_shards` consecutive chunks, one per
    shard. When the workers divide the shards, worker `w` reads only shards
    `[w·S/W, (w+1)·S/W)`, which are exactly its slice of every batch;
    otherwise it reads every shard and keeps its slice.
    """

    input_shards: int
    workers: int
    worker: int

    @property
    def reads_only_its_share(self) -> bool:
        return self.input_shards % self.workers == 0

    def shards_read(self) -> range:
        if not self.reads_only_its_share:
            return range(self.input_shards)
        per_worker = self.input_shards // self.workers
        return range(self.worker * per_worker, (self.worker + 1) * per_worker)


def worker_records(task_input: TaskInput, plan: InputPlan, global_batch_size: int, seed: int,
                   start_step: int, shuffle_window: int = 100, cycle_length: int = CYCLE_LENGTH,
                   bucket_window: int = 0):
    """`(positions, records)` of one worker's slice of every step's global batch, one element
    per step (`global_batch_size / workers` records)."""
    share = global_batch_size // plan.workers
    if bucket_window > 0:
        window, skipped_steps = divmod(start_step, bucket_window)
        stream = training_records(task_input.source, seed,
                                  start=window * bucket_window * global_batch_size,
                                  cycle_length=cycle_length, shuffle_window=shuffle_window)
        stream = bucket_by_length(stream, task_input, global_batch_size, bucket_window, seed,
                                  window).skip(skipped_steps * global_batch_size)
        steps = stream.batch(global_batch_size, drop_remainder=True)
    else:
        chunk = global_batch_size // plan.input_shards
        sources = shard_sources(task_input.source, plan.input_shards)
        parts = [shard_steps(sources[k], seed, k, chunk, global_batch_size, start_step,
                             shuffle_window, cycle_length) for k in plan.shards_read()]
        steps = parts[0] if len(parts) == 1 else tf.data.Dataset.zip(tuple(parts)).map(
            lambda *pairs: (tf.concat([p for p, _ in pairs], 0),
                            tf.concat([r for _, r in pairs], 0)))
        if plan.reads_only_its_share:
            return steps
    begin = plan.worker * share
    return steps.map(lambda positions, records: (positions[begin:begin + share],
                                                 records[begin:begin + share]))


def check_global_batch(global_batch_size: int, replicas: int, input_shards: int = 1,
                       accumulation_steps: int = 1) -> None:
    """The one check of a global batch: it splits into equal replica batches, shard chunks
    and micro-batches (`InputError` naming the flags otherwise)."""
    if global_batch_size < 1:
        raise InputError(f"--train_batch_size must be at least 1, got {global_batch_size}")
    if global_batch_size % replicas:
        raise InputError(f"--train_batch_size={global_batch_size} is not a multiple of the "
                         f"{replicas} replicas")
    if global_batch_size % input_shards:
        raise InputError(f"--train_batch_size={global_batch_size} is not a multiple of "
                         f"--input_shards={input_shards}")
    if accumulation_steps >= 1 and (global_batch_size // replicas) % accumulation_steps:
        raise InputError(
            f"--train_batch_size={global_batch_size} does not split into "
            f"{replicas} replica(s) x --gradient_accumulation_steps={accumulation_steps} "
            "equal micro-batches")


def distributed_training_dataset(strategy, task_input: TaskInput, global_batch_size: int,
                                 seed: int, start_step: int, shuffle_window: int = 100,
                                 cycle_length: int = CYCLE_LENGTH, bucket_window: int = 0,
                                 input_shards: int = 1, workers: int = 1):
    """The distributed dataset of the run's global batches from step `start_step` on.

    `bucket_window > 0` groups records of similar length into batches within
    windows of that many steps and cuts each batch to its longest example
    (`bucket_by_length`): faster on short texts, but shapes vary from batch
    to batch, which TPUs do not accept. `input_shards > 1` splits the files
    into that many shards read side by side (`InputPlan`); `workers` is the
    number of input pipelines, for the warning when they cannot divide them.
    """
    replicas = strategy.num_replicas_in_sync
    if bucket_window > 0 and (task_input.lengths is None or task_input.trim is None):
        raise InputError("This task does not support --bucket_by_length")
    if bucket_window > 0 and input_shards > 1:
        raise InputError("--bucket_by_length reads the records as one stream: --input_shards "
                         "must be 1")
    check_global_batch(global_batch_size, replicas, input_shards)
    shard_sources(task_input.source, input_shards)  # the file count is checked before any graph
    if workers > 1 and input_shards % workers:
        logger.warning("Every one of the %d workers reads all the training records and keeps its "
                       "share. A new run started with --input_shards=%d (a multiple of the "
                       "workers, at most the number of files) has each read only its own files; "
                       "it is a different record stream, so do not change it when resuming",
                       workers, workers)

    def dataset_fn(context: tf.distribute.InputContext):
        plan = InputPlan(input_shards, context.num_input_pipelines, context.input_pipeline_id)
        per_replica = context.get_per_replica_batch_size(global_batch_size)
        stream = worker_records(task_input, plan, global_batch_size, seed, start_step,
                                shuffle_window, cycle_length, bucket_window)
        # The worker's slice of a step is R · b records, which its R replicas receive in turn.
        stream = stream.unbatch().batch(per_replica, drop_remainder=True)

        def features(positions, records):
            parsed = dict(task_input.parse(records, positions))
            if bucket_window > 0:
                parsed = dict(task_input.trim(parsed))
            parsed[DROPOUT_SEEDS] = example_seeds(positions, seed)
            return parsed

        stream = stream.map(features, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return stream.prefetch(tf.data.AUTOTUNE)

    return strategy.distribute_datasets_from_function(dataset_fn)


def evaluation_dataset(task_input: Optional[TaskInput], batch_size: int, max_batches: int):
    """The first `max_batches` batches of the held-out records, in order, the last one partial."""
    if task_input is None:
        return None
    records = evaluation_records(task_input.source).enumerate().batch(batch_size)
    records = records.map(lambda positions, batch: task_input.parse(batch, positions),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return records.take(max_batches).prefetch(tf.data.AUTOTUNE)
