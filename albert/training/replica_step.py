"""The device half of the training loop: what runs inside `strategy.run` and XLA.

Nothing here touches files, logs or the clock; `albert.training.loop` (the
host half) calls the `train_steps(num_steps)` that `train_steps_function`
builds once per host loop, and reads back one value per step of each loss and
of the learning rate.

One optimizer step on one replica:

1. the loss normalisers (masked-token and example counts) are summed across
   replicas, so every loss is this replica's share of the global-batch loss;
2. forward and backward pass (the loss scaled under mixed_float16), in
   `--gradient_accumulation_steps` micro-batches whose gradients are summed;
3. the gradients are summed across replicas — once, here, before anything
   looks at them;
4. the optimizer applies the summed gradients: under mixed_float16 the
   loss-scale decision ("are the gradients finite?") is taken on the summed
   gradients, which every replica and worker holds identically, so they all
   skip or all apply the step together. (Keras's `LossScaleOptimizer` alone
   decides on each replica's own, unsummed gradients: an overflow on one
   replica then reaches the others through the later sum as NaN weights,
   and under MultiWorkerMirroredStrategy workers that disagree split between
   entering and skipping the gradient all-reduce, and hang.)

Compilation: with `jit_compile`, a strategy of one replica per program (one
device) compiles the whole step — forward, backward, clipping, the loss-scale
decision and LAMB / AdamW — into one XLA computation; on TPUs the whole loop
is compiled by the TPU strategy itself. With several replicas on GPUs or CPU
devices, tf.distribute's cross-device all-reduce and the optimizer's
per-variable update (a `merge_call`) cannot enter an XLA cluster: there the
forward and backward pass is compiled and the all-reduce and update run as
TensorFlow ops on the devices.
"""

from typing import Dict, Optional, Sequence

import keras
import tensorflow as tf

from albert.training.distribute import is_tpu

# The size of one all-reduce pack (see `ReplicaStep._sum`): large enough that a pack's
# collective is not dominated by its fixed cost, small beside a large model's gradients.
ALL_REDUCE_PACK_BYTES = 32 * 2 ** 20


def inner_optimizer(optimizer):
    """The optimizer that owns the learning rate (inside a loss-scale wrapper, if any)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def compiles_whole_step(strategy, jit_compile: bool) -> bool:
    """True when one XLA computation can hold the whole replica step (see the module docstring)."""
    return jit_compile and strategy.num_replicas_in_sync == 1 and not is_tpu(strategy)


def check_optimizer_takes_summed_gradients(optimizer) -> None:
    """Gradients reach the optimizer summed (step 3): it must have been built not to sum
    them again, which only ALBERT's optimizers can be."""
    owner = inner_optimizer(optimizer)
    if not getattr(owner, "gradients_summed_by_caller", False):
        raise TypeError(
            f"The training loop sums the gradients across replicas before the optimizer "
            f"applies them: it needs one of ALBERT's optimizers "
            f"(albert.training.optimization) built with gradients_summed_by_caller=True "
            f"({type(owner).__name__} is not)")


class ReplicaStep:
    """One optimizer step on this replica (steps 1-4 of the module docstring).

    Args:
      task: the `albert.training.loop.Task` (losses, normalisers).
      strategy: the run's tf.distribute strategy.
      model, optimizer: built inside `strategy.scope()`; the optimizer is one
        of ALBERT's (`albert.training.optimization`) built with
        `gradients_summed_by_caller=True` (this step sums the gradients across
        replicas, step 3), optionally inside `AlbertLossScaleOptimizer`.
      jit_compile: compile with XLA (the whole step where the strategy allows).
      whole_step: False compiles only the forward and backward pass even where
        the whole step could be compiled (how the loop compiled before; for
        benchmarks); None: `compiles_whole_step`.
      accumulation_steps: micro-batches per replica batch (see `_gradients`).
    """

    def __init__(self, task, strategy, model, optimizer, jit_compile: bool,
                 whole_step: Optional[bool] = None, accumulation_steps: int = 1):
        self.task = task
        self.accumulation_steps = accumulation_steps
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.variables = model.trainable_variables
        self.scales_loss = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        self.replicas = strategy.num_replicas_in_sync
        check_optimizer_takes_summed_gradients(optimizer)
        self.forward_backward = self._forward_backward
        self.step = self._step
        if whole_step is None:
            whole_step = compiles_whole_step(strategy, jit_compile)
        if jit_compile and whole_step:
            self.step = tf.function(self._step, jit_compile=True)
        elif jit_compile:
            self.forward_backward = tf.function(self._forward_backward, jit_compile=True)

    def _sum(self, values):
        """Sum across every replica of the run (the identity on one replica).

        In packs of about `ALL_REDUCE_PACK_BYTES`: tf.distribute packs the tensors of one
        all-reduce into one buffer, sums it and splits it back, so in one pack every gradient
        was held three times over (the packed buffer, the sum, the split copies) besides
        itself. Its collectives run one after another, so with small packs only a few packs'
        copies exist at a time. The sums are the same.
        """
        if self.replicas == 1:
            return values
        options = tf.distribute.experimental.CommunicationOptions(
            bytes_per_pack=ALL_REDUCE_PACK_BYTES)
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, values,
                                                              options=options)

    def _forward_backward(self, features, normalizers):
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            losses = self.task.losses(outputs, features, normalizers)
            objective = losses["loss"]
            if self.scales_loss:
                objective = self.optimizer.scale_loss(objective)
        return losses, tape.gradient(objective, self.variables)

    def _gradients(self, features, normalizers):
        """(losses, gradients) of this replica's batch; a gradient is None for a variable
        the objective does not reach.

        With `accumulation_steps` K > 1 the batch is cut into K consecutive
        micro-batches, run one after the other in a loop on the device, and
        their losses and gradients summed. Every loss is a sum over examples
        divided by a normaliser of the whole global batch (summed across
        replicas before the loop), and each example carries its own dropout
        seed, so the sums are the unsplit step's, to rounding; only one
        micro-batch's activations are alive at a time.
        """
        if self.accumulation_steps == 1:
            losses, gradients = self.forward_backward(features, normalizers)
            # Embedding gradients arrive as IndexedSlices with repeated rows; the
            # all-reduce, the clip's norm and the moments need them dense, as the
            # original's update had them.
            return losses, [None if g is None else tf.convert_to_tensor(g) for g in gradients]
        steps = self.accumulation_steps
        micro_batches = {
            name: tf.reshape(value, tf.concat([[steps, -1], tf.shape(value)[1:]], axis=0))
            for name, value in features.items()}
        reached = []  # per variable: does the objective reach it (known once traced)

        def body(index, loss_sums, gradient_sums):
            batch = {name: value[index] for name, value in micro_batches.items()}
            losses, gradients = self.forward_backward(batch, normalizers)
            reached[:] = [g is not None for g in gradients]
            gradients = [tf.zeros(v.shape, v.dtype) if g is None else tf.convert_to_tensor(g)
                         for g, v in zip(gradients, self.variables)]
            return (index + 1,
                    {name: loss_sums[name] + tf.cast(losses[name], tf.float32)
                     for name in loss_sums},
                    [total + g for total, g in zip(gradient_sums, gradients)])

        # One micro-batch at a time: parallel iterations would keep several
        # micro-batches' activations alive at once, which is what the split avoids.
        _, losses, gradients = tf.while_loop(
            lambda index, *_: index < steps, body,
            (tf.constant(0), {name: tf.zeros([], tf.float32) for name in self.task.loss_names},
             [tf.zeros(v.shape, v.dtype) for v in self.variables]), parallel_iterations=1)
        return losses, [g if used else None for g, used in zip(gradients, reached)]

    def _step(self, features) -> Dict[str, tf.Tensor]:
        normalizers = self._sum(self.task.loss_normalizers(features))
        losses, gradients = self._gradients(features, normalizers)
        # Variables the objective does not reach (the sentence head under
        # --nosentence_objective) have no gradient: they are left as they are,
        # as Keras would, without its warning on every trace.
        used = [(g, v) for g, v in zip(gradients, self.variables) if g is not None]
        summed = self._sum([g for g, _ in used])
        self.optimizer.apply(summed, [v for _, v in used])
        return losses

    def __call__(self, features):
        return self.step(features)


def train_steps_function(task, strategy, model, optimizer, iterator, jit_compile: bool,
                         loss_names: Sequence[str], whole_step: Optional[bool] = None,
                         accumulation_steps: int = 1):
    """`train_steps(num_steps) -> {name: float32 [num_steps]}`, one graph call per host loop.

    The values are the global-batch losses of each step and the learning rate
    the step used (`learning_rate`), gathered on the device and read by the
    host once per call.
    """
    replica_step = ReplicaStep(task, strategy, model, optimizer, jit_compile, whole_step,
                               accumulation_steps)
    owner = inner_optimizer(optimizer)
    names = (*loss_names, "learning_rate")

    def current_learning_rate():
        rate = owner.learning_rate  # read before the step's update: the step's own rate
        return tf.cast(tf.convert_to_tensor(rate), tf.float32)

    @tf.function
    def train_steps(num_steps):
        arrays = {name: tf.TensorArray(tf.float32, size=num_steps) for name in names}
        for index in tf.range(num_steps):
            rate = current_learning_rate()
            per_replica = strategy.run(replica_step, args=(next(iterator),))
            values = {name: tf.cast(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[name],
                                                    axis=None), tf.float32)
                      for name in loss_names}
            values["learning_rate"] = rate
            arrays = {name: arrays[name].write(index, values[name]) for name in names}
        return {name: array.stack() for name, array in arrays.items()}

    return train_steps


def agreement_function(strategy):
    """`agree(flag) -> bool`: True on every worker when the flag is True on any of them.

    One scalar all-reduce through the strategy's own collectives, called by
    every worker at the same point of the host loop (after each call of
    `train_steps`), so all of them stop at the same step.
    """

    @tf.function
    def any_worker(flag):
        def replica_fn():
            return tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tf.cast(flag, tf.float32))

        # Every replica holds the same sum: any one of them answers.
        return strategy.experimental_local_results(strategy.run(replica_fn))[0] > 0

    return lambda flag: bool(any_worker(tf.constant(bool(flag))))


def replica_values(strategy, value: int):
    """[value on replica 0, on replica 1, ...] of a host integer: one all-gather across the
    cluster (replica 0 is on the chief; a worker's replicas all give its value)."""

    @tf.function
    def gather():
        def replica_fn():
            return tf.distribute.get_replica_context().all_gather(
                tf.constant([value], tf.int64), axis=0)

        return strategy.experimental_local_results(strategy.run(replica_fn))[0]

    return gather().numpy().tolist()
