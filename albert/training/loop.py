"""The one training loop every run_* script uses.

A `Task` says what to train (model, data, losses, metrics); `Trainer` does
the rest, the same way for every task:

* any tf.distribute strategy; each worker reads its share of the seeded
  input stream and each replica its slice of the worker's batch, so the
  global batch — and the training — is the same on 1 device or many;
* optional XLA (`jit_compile`) for the forward and backward pass, mixed
  precision (`mixed_bfloat16`, `mixed_float16` with dynamic loss scaling);
* `steps_per_loop` steps per call into the graph (TPU-style loops);
* checkpoints every `save_checkpoints_steps` (original names, optimizer
  slots, input position), `keep_checkpoint_max`, written atomically;
  automatic resume from the latest one, with the same data order and
  random state as an uninterrupted run;
* evaluation of each checkpoint once on held-out data, `model.ckpt-best` by
  the task's metric, `eval_results.json` (and the original's
  `eval_results.txt`);
* TensorBoard summaries and `train_log.jsonl` (one JSON object per step),
  a progress bar with steps/s and ETA;
* a NaN or infinite loss stops the run with a clear message; the last
  checkpoint (taken before it) is kept.
"""

import abc
import dataclasses
import json
import logging
import math
import os
import time
from typing import Dict, Optional

import keras
import tensorflow as tf

from albert.errors import InputError, TrainingDivergedError
from albert.training.checkpointing import TrainingCheckpoints
from albert.training.distribute import WorkerInfo, worker_info

logger = logging.getLogger("albert")

MIXED_PRECISION = ("none", "mixed_bfloat16", "mixed_float16")


class Task(abc.ABC):
    """What a training run trains. Subclasses: pretraining, GLUE, SQuAD, RACE."""

    #: metric that picks model.ckpt-best (higher is better)
    best_metric: str
    #: keys of `losses()`, "loss" (the objective) first
    loss_names: tuple

    @abc.abstractmethod
    def build_model(self) -> keras.Model:
        """A new model (called inside the strategy scope)."""

    def initialize(self, model) -> None:
        """Initial weights for a run that does not resume (e.g. --init_checkpoint)."""

    @abc.abstractmethod
    def train_dataset(self, worker: WorkerInfo, worker_batch_size: int) -> tf.data.Dataset:
        """This worker's batches of the seeded global input stream (repeating)."""

    def eval_dataset(self, batch_size: int) -> Optional[tf.data.Dataset]:
        """Held-out batches, in order, once; None when there is nothing to evaluate."""
        return None

    @abc.abstractmethod
    def loss_normalizers(self, features) -> Dict[str, tf.Tensor]:
        """Local denominators of the losses; the loop sums them across replicas."""

    @abc.abstractmethod
    def losses(self, outputs, features, normalizers) -> Dict[str, tf.Tensor]:
        """This replica's share of each global-batch loss; must include "loss"."""

    @abc.abstractmethod
    def metric_sums(self, outputs, features) -> Dict[str, tuple]:
        """{metric: (total, count)} for one evaluation batch."""


@dataclasses.dataclass
class TrainerConfig:
    output_dir: str
    num_train_steps: int
    train_batch_size: int
    eval_batch_size: int = 64
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    steps_per_loop: int = 1
    max_eval_steps: int = 100
    jit_compile: bool = False
    mixed_precision: str = "none"
    show_progress: bool = True


class _RunFiles:
    """train_log.jsonl, eval_results.{json,txt} and TensorBoard writers (chief only)."""

    def __init__(self, output_dir: str, enabled: bool):
        self.enabled = enabled
        self.output_dir = output_dir
        self.train_log = os.path.join(output_dir, "train_log.jsonl")
        self.eval_json = os.path.join(output_dir, "eval_results.json")
        self.eval_txt = os.path.join(output_dir, "eval_results.txt")
        self.tensorboard = os.path.join(output_dir, "tensorboard")
        if enabled:
            self.train_writer = tf.summary.create_file_writer(os.path.join(self.tensorboard, "train"))
            self.eval_writer = tf.summary.create_file_writer(os.path.join(self.tensorboard, "eval"))

    def truncate_train_log(self, step: int) -> None:
        """Drops log lines after `step` (a resumed run writes them again)."""
        if not self.enabled or not tf.io.gfile.exists(self.train_log):
            return
        with tf.io.gfile.GFile(self.train_log) as handle:
            kept = [line for line in handle if line.strip() and json.loads(line)["step"] <= step]
        temporary = self.train_log + ".tmp"
        with tf.io.gfile.GFile(temporary, "w") as handle:
            handle.write("".join(kept))
        tf.io.gfile.rename(temporary, self.train_log, overwrite=True)

    def log_steps(self, records) -> None:
        if not self.enabled:
            return
        with tf.io.gfile.GFile(self.train_log, "a") as handle:
            for record in records:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
        with self.train_writer.as_default():
            for record in records:
                for key, value in record.items():
                    if key != "step":
                        tf.summary.scalar(key, value, step=record["step"])
        self.train_writer.flush()

    def evaluations(self) -> dict:
        if tf.io.gfile.exists(self.eval_json):
            with tf.io.gfile.GFile(self.eval_json) as handle:
                return json.load(handle)
        return {"evaluations": [], "best": None}

    def log_evaluation(self, step: int, metrics: dict, best: dict) -> None:
        if not self.enabled:
            return
        results = self.evaluations()
        results["evaluations"] = [e for e in results["evaluations"] if e["step"] != step]
        results["evaluations"].append(dict(metrics, step=step))
        results["evaluations"].sort(key=lambda e: e["step"])
        results["best"] = best
        temporary = self.eval_json + ".tmp"
        with tf.io.gfile.GFile(temporary, "w") as handle:
            json.dump(results, handle, indent=2, sort_keys=True)
            handle.write("\n")
        tf.io.gfile.rename(temporary, self.eval_json, overwrite=True)
        with tf.io.gfile.GFile(self.eval_txt, "a") as handle:
            for key, value in sorted(dict(metrics, global_step=step).items()):
                handle.write(f"{key} = {value}\n")
        with self.eval_writer.as_default():
            for key, value in metrics.items():
                tf.summary.scalar(key, value, step=step)
        self.eval_writer.flush()


class Trainer:
    """Trains and evaluates a `Task` (see the module docstring).

    Args:
      task: the `Task`.
      strategy: a tf.distribute strategy (`albert.training.distribute`).
      config: `TrainerConfig`.
      make_optimizer: `variable_names -> keras optimizer` ({path: original name}).
      variable_names: `model -> {variable path: original name}` for the
        optimizer's weight-decay exclusions.
      learning_rate: `step -> learning rate`, for the logs.

    Example:
        trainer = Trainer(task, create_strategy("auto"), TrainerConfig(...), make_optimizer)
        trainer.train()
    """

    def __init__(self, task: Task, strategy, config: TrainerConfig, make_optimizer, variable_names,
                 learning_rate=None):
        if config.mixed_precision not in MIXED_PRECISION:
            raise InputError(f"--mixed_precision must be one of {', '.join(MIXED_PRECISION)}")
        self.task = task
        self.strategy = strategy
        self.config = config
        self.make_optimizer = make_optimizer
        self.variable_names = variable_names
        self.learning_rate = learning_rate or (lambda step: float("nan"))
        self.worker = worker_info(strategy)
        if config.train_batch_size % strategy.num_replicas_in_sync:
            raise InputError(f"train_batch_size {config.train_batch_size} is not a multiple of the "
                             f"{strategy.num_replicas_in_sync} replicas")
        self.checkpoints = TrainingCheckpoints(config.output_dir, config.keep_checkpoint_max,
                                               self.worker.index, self.worker.is_chief)
        self.files = None
        self.model = self.optimizer = None

    # -------------------------------------------------------------- set-up
    def _build(self):
        if self.config.mixed_precision != "none":
            keras.mixed_precision.set_global_policy(self.config.mixed_precision)
        with self.strategy.scope():
            model = self.task.build_model()
            optimizer = self.make_optimizer(self.variable_names(model))
            if self.config.mixed_precision == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(model.trainable_variables)
        self.model, self.optimizer = model, optimizer
        return model, optimizer

    def _replica_slice(self, batch):
        """This replica's slice of the worker's batch."""
        local = self.worker.local_replicas
        if local == 1:
            return batch
        context = tf.distribute.get_replica_context()
        index = context.replica_id_in_sync_group % local
        size = self.config.train_batch_size // self.strategy.num_replicas_in_sync
        return tf.nest.map_structure(lambda t: t[index * size:(index + 1) * size], batch)

    def _train_function(self, model, optimizer, iterator):
        task, strategy = self.task, self.strategy
        variables = model.trainable_variables
        scales_loss = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

        def forward_backward(features, normalizers):
            with tf.GradientTape() as tape:
                outputs = model(features, training=True)
                losses = task.losses(outputs, features, normalizers)
                objective = optimizer.scale_loss(losses["loss"]) if scales_loss else losses["loss"]
            return losses, tape.gradient(objective, variables)

        if self.config.jit_compile:
            forward_backward = tf.function(forward_backward, jit_compile=True)

        def replica_step(batch):
            context = tf.distribute.get_replica_context()
            features = self._replica_slice(batch)
            normalizers = {name: context.all_reduce(tf.distribute.ReduceOp.SUM, value)
                           for name, value in task.loss_normalizers(features).items()}
            losses, gradients = forward_backward(features, normalizers)
            optimizer.apply(gradients, variables)
            return losses

        @tf.function
        def train_steps(num_steps):
            arrays = {name: tf.TensorArray(tf.float32, size=num_steps) for name in task.loss_names}
            for index in tf.range(num_steps):
                per_replica = strategy.run(replica_step, args=(next(iterator),))
                arrays = {name: arrays[name].write(index, tf.cast(strategy.reduce(
                    tf.distribute.ReduceOp.SUM, per_replica[name], axis=None), tf.float32))
                          for name in task.loss_names}
            return {name: array.stack() for name, array in arrays.items()}

        return train_steps

    def _barrier(self):
        """All workers reach this point before the chief publishes a checkpoint."""
        if self.worker.count > 1:
            self.strategy.reduce(tf.distribute.ReduceOp.SUM,
                                 self.strategy.run(lambda: tf.constant(1.0)), axis=None)

    # ------------------------------------------------------------ training
    def train(self, do_eval: bool = False) -> Optional[dict]:
        """Trains to `num_train_steps` (resuming if a checkpoint exists); returns the last eval."""
        config = self.config
        model, optimizer = self._build()
        tf.io.gfile.makedirs(config.output_dir)
        self.files = _RunFiles(config.output_dir, self.worker.is_chief)
        worker_batch = config.train_batch_size // self.worker.count
        iterator = iter(self.task.train_dataset(self.worker, worker_batch))

        step = self.checkpoints.latest_step()
        if step is not None:
            self.checkpoints.restore(step, model, optimizer, iterator)
            self.files.truncate_train_log(step)
            logger.info("Resumed from %s", self.checkpoints.prefix(step))
        else:
            step = 0
            self.task.initialize(model)
        if step >= config.num_train_steps:
            logger.info("Already trained to step %d", step)
            return None

        train_steps = self._train_function(model, optimizer, iterator)
        progress = self._progress(step)
        last_eval = None
        while step < config.num_train_steps:
            next_save = (step // config.save_checkpoints_steps + 1) * config.save_checkpoints_steps
            count = min(config.steps_per_loop, next_save - step, config.num_train_steps - step)
            start = time.time()
            try:
                losses = train_steps(tf.constant(count))
            except tf.errors.DataLossError as error:
                raise InputError(f"Corrupt input record: {error.message}") from None
            losses = {name: value.numpy() for name, value in losses.items()}
            seconds = time.time() - start
            records = []
            for offset in range(count):
                values = {name: float(array[offset]) for name, array in losses.items()}
                records.append(dict(values, step=step + offset + 1,
                                    learning_rate=float(self.learning_rate(step + offset)),
                                    examples_per_second=config.train_batch_size * count / seconds))
            bad = [r for r in records if not all(math.isfinite(r[k]) for k in losses)]
            if bad:
                self.files.log_steps(records[:records.index(bad[0])])
                raise TrainingDivergedError(
                    f"The loss became {bad[0]['loss']} at step {bad[0]['step']}; stopping. The last "
                    f"checkpoint ({self.checkpoints.latest_step() or 'none'}) is kept. Lower "
                    "--learning_rate, or check the input data")
            self.files.log_steps(records)
            step += count
            if progress is not None:
                progress.update(count)
                progress.set_postfix(loss=f"{records[-1]['loss']:.4f}",
                                     lr=f"{records[-1]['learning_rate']:.2e}", refresh=False)
            if step % config.save_checkpoints_steps == 0 or step == config.num_train_steps:
                self.checkpoints.save_input_state(step, iterator)
                self._barrier()
                self.checkpoints.save(step, model, optimizer)
                if do_eval and self.worker.is_chief:
                    last_eval = self.evaluate_and_track(step, model)
        if progress is not None:
            progress.close()
        return last_eval

    def _progress(self, step):
        if not (self.config.show_progress and self.worker.is_chief):
            return None
        from tqdm import tqdm

        return tqdm(total=self.config.num_train_steps, initial=step, unit="step",
                    desc="training", mininterval=1.0, dynamic_ncols=True)

    # ---------------------------------------------------------- evaluation
    def evaluate(self, model) -> Optional[dict]:
        dataset = self.task.eval_dataset(self.config.eval_batch_size)
        if dataset is None:
            return None
        task = self.task

        @tf.function(jit_compile=self.config.jit_compile)
        def eval_step(batch):
            return task.metric_sums(model(batch, training=False), batch)

        totals: Dict[str, list] = {}
        for batch in dataset.take(self.config.max_eval_steps):
            for name, (total, count) in eval_step(batch).items():
                entry = totals.setdefault(name, [0.0, 0.0])
                entry[0] += float(total)
                entry[1] += float(count)
        return {name: total / count if count else float("nan")
                for name, (total, count) in totals.items()}

    def evaluate_and_track(self, step: int, model) -> dict:
        """Evaluates the model at `step`, records it, and updates model.ckpt-best."""
        metrics = self.evaluate(model)
        if metrics is None:
            return None
        best = self.files.evaluations().get("best")
        value = metrics[self.task.best_metric]
        if best is None or value > best[self.task.best_metric]:
            best = {"step": step, self.task.best_metric: value}
            self.checkpoints.copy_to_best(step)
        self.files.log_evaluation(step, metrics, best)
        logger.info("Step %d: %s", step, ", ".join(f"{k} = {v:.4f}" for k, v in sorted(metrics.items())))
        return metrics

    def evaluate_checkpoints(self) -> Optional[dict]:
        """Evaluates every checkpoint in output_dir that has not been evaluated yet, once."""
        model, optimizer = self._build()
        self.files = _RunFiles(self.config.output_dir, self.worker.is_chief)
        done = {entry["step"] for entry in self.files.evaluations()["evaluations"]}
        last = None
        for step in self.checkpoints.steps():
            if step in done:
                continue
            self.checkpoints.restore(step, model, optimizer)
            last = self.evaluate_and_track(step, model)
        if last is None and not self.checkpoints.steps():
            raise InputError(f"No checkpoint to evaluate in {self.config.output_dir}")
        return last


def variable_names_for(model) -> Dict[str, str]:
    """{Keras variable path: original TF1 name} for the optimizer's exclusions."""
    from albert.checkpoints import model_variables

    return {variable.path: name for name, variable in model_variables(model).items()}


__all__ = ["MIXED_PRECISION", "Task", "Trainer", "TrainerConfig", "variable_names_for"]
