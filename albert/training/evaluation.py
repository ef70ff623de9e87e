"""Held-out evaluation by sums of per-batch metrics, on the strategy's replicas.

`MetricSumsEvaluation` evaluates a task whose metrics are ratios of sums over
examples (`Task.metric_sums`: masked-LM accuracy and loss, sentence-order
accuracy, ...):

* the batches have one static shape: the last, partial batch is padded with
  zero rows whose `example_weights` are 0, so padding counts in no sum (the
  metrics equal those of unpadded batches) and nothing is compiled twice;
* each batch is split over the replicas with `strategy.run` (on a TPU the
  TPU itself evaluates, not its host), and the replicas' sums are added on
  the devices; the host reads the totals once per evaluation;
* the step is traced (and, with `jit_compile`, compiled) once per run and
  reused by every later evaluation.

Under MultiWorkerMirroredStrategy only the chief evaluates (the others go on
to the next training loop), so there it runs on the chief's own device,
outside the strategy, as before.
"""

from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from albert.training.inputs import TaskInput, evaluation_dataset

EXAMPLE_WEIGHTS = "example_weights"


def padded_evaluation_dataset(task_input: TaskInput, batch_size: int, max_batches: int,
                              padded_size: int):
    """`evaluation_dataset` (batches of `batch_size` records, the last one partial) with
    every batch padded to `padded_size` rows; padding rows weigh 0."""
    dataset = evaluation_dataset(task_input, batch_size, max_batches)

    def pad(features):
        features = dict(features)
        real = tf.shape(next(iter(features.values())))[0]
        missing = padded_size - real
        padded = {}
        for name, value in features.items():
            paddings = [[0, missing]] + [[0, 0]] * (len(value.shape) - 1)
            value = tf.pad(value, paddings)
            padded[name] = tf.ensure_shape(value, [padded_size, *value.shape[1:]])
        padded[EXAMPLE_WEIGHTS] = tf.ensure_shape(
            tf.concat([tf.ones([real]), tf.zeros([missing])], axis=0), [padded_size])
        return padded

    return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


class MetricSumsEvaluation:
    """Evaluates `task.metric_sums` over the held-out records (see the module docstring).

    Args:
      task: the `Task` (its `eval_input()` and `metric_sums`).
      model: the model to evaluate (weights may change between calls).
      strategy: the run's strategy, or None to evaluate on the default device.
      jit_compile: compile the evaluation step with XLA.
    """

    def __init__(self, task, model, strategy=None, jit_compile: bool = False):
        self.task = task
        self.model = model
        self.strategy = strategy or tf.distribute.get_strategy()
        self.traces = 0  # times the step was traced (a test checks it stays 1)
        self._step = tf.function(self._replica_sums, jit_compile=jit_compile)
        self._distributed_step = tf.function(self._distributed_sums)

    def _replica_sums(self, batch):
        self.traces += 1
        sums = self.task.metric_sums(self.model(batch, training=False), batch)
        return {name: tf.stack([tf.cast(total, tf.float32), tf.cast(count, tf.float32)])
                for name, (total, count) in sums.items()}

    def _distributed_sums(self, batch):
        per_replica = self.strategy.run(self._step, args=(batch,))
        return {name: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                for name, value in per_replica.items()}

    def __call__(self, batch_size: int, max_batches: int) -> Optional[Dict[str, float]]:
        task_input = self.task.eval_input()
        if task_input is None:
            return None
        replicas = self.strategy.num_replicas_in_sync
        # Batches hold the same records as on one device; padding gives each
        # replica an equal share.
        padded_size = -(-batch_size // replicas) * replicas
        dataset = padded_evaluation_dataset(task_input, batch_size, max_batches, padded_size)
        dataset = self.strategy.experimental_distribute_dataset(dataset)
        batches = [self._distributed_step(batch) for batch in dataset]
        if not batches:
            return {}
        # One read of the devices; the batches are added on the host in float64.
        metrics = {}
        for name in batches[0]:
            total, count = np.sum([batch[name].numpy() for batch in batches], axis=0,
                                  dtype=np.float64)
            metrics[name] = float(total / count) if count else float("nan")
        return metrics
