"""The one input path of the training loop: a record stream, distributed by tf.distribute.

Every strategy — one device, several GPUs, several workers, TPU — gets its
batches from `strategy.distribute_datasets_from_function`, the path TPUs
require: each input pipeline (one per worker) builds a dataset of static-shape
per-replica batches on the host, and TensorFlow hands consecutive batches to
the worker's replicas in turn.

The global batch of step `s` is records `[s·B, (s+1)·B)` of the run's stream
(`albert.records.streams`); global replica `g` (worker `w`, local replica `r`,
`g = w·R + r`) gets the `g`-th slice of `B / (W·R)` records. Each worker
reads the stream, keeps its `R` slices of every step and parses only those.
So the union of a step's batches is the same for any topology, and so are the
losses, which are normalised by global sums.

Each example also gets a dropout seed derived from its stream position and
the run's seed (`albert.modeling.dropout`), so its dropout masks do not
depend on where it is computed either.
"""

import dataclasses
from typing import Callable, Optional

import tensorflow as tf

from albert.records.streams import CYCLE_LENGTH, RecordSource, evaluation_records, training_records
from albert.errors import InputError
from albert.modeling.dropout import mix32
from albert.modeling.encoder import DROPOUT_SEEDS


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


def distributed_training_dataset(strategy, task_input: TaskInput, global_batch_size: int,
                                 seed: int, start_step: int, shuffle_window: int = 100,
                                 cycle_length: int = CYCLE_LENGTH, bucket_window: int = 0):
    """The distributed dataset of the run's global batches from step `start_step` on.

    `bucket_window > 0` groups records of similar length into batches within
    windows of that many steps and cuts each batch to its longest example
    (`bucket_by_length`): faster on short texts, but shapes vary from batch
    to batch, which TPUs do not accept.
    """
    replicas = strategy.num_replicas_in_sync
    if bucket_window > 0 and (task_input.lengths is None or task_input.trim is None):
        raise InputError("This task does not support --bucket_by_length")
    if global_batch_size < 1:
        raise InputError(f"--train_batch_size must be at least 1, got {global_batch_size}")
    if global_batch_size % replicas:
        raise InputError(f"--train_batch_size={global_batch_size} is not a multiple of the "
                         f"{replicas} replicas")

    def dataset_fn(context: tf.distribute.InputContext):
        workers, worker = context.num_input_pipelines, context.input_pipeline_id
        per_replica = context.get_per_replica_batch_size(global_batch_size)
        local_replicas = replicas // workers
        if bucket_window > 0:
            window, skipped_steps = divmod(start_step, bucket_window)
            stream = training_records(task_input.source, seed,
                                      start=window * bucket_window * global_batch_size,
                                      cycle_length=cycle_length, shuffle_window=shuffle_window)
            stream = bucket_by_length(stream, task_input, global_batch_size, bucket_window, seed,
                                      window).skip(skipped_steps * global_batch_size)
        else:
            stream = training_records(task_input.source, seed,
                                      start=start_step * global_batch_size,
                                      cycle_length=cycle_length, shuffle_window=shuffle_window)
        # A step's records are consecutive: worker w's share of a step is the
        # w-th run of R · b records, which its R replicas receive in turn.
        stream = stream.batch(local_replicas * per_replica, drop_remainder=True)
        if workers > 1:
            stream = stream.shard(workers, worker)
        stream = stream.rebatch(per_replica, drop_remainder=True)

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
