"""The one training loop every run_* script uses.

A `Task` says what to train (model, inputs, losses, metrics); `Trainer` does
the rest, the same way for every task:

* any tf.distribute strategy, fed by the one input path
  (`albert.training.inputs`): per-replica static-shape batches from
  `distribute_datasets_from_function`, a global batch that is the same on 1
  device or many, dropout masks that depend only on each example;
* optional XLA (`jit_compile`) for the forward and backward pass, mixed
  precision (`mixed_bfloat16`, `mixed_float16` with dynamic loss scaling whose
  skipped steps still count);
* `steps_per_loop` steps per call into the graph (TPU-style loops);
* checkpoints every `save_checkpoints_steps` in the original's layout,
  `keep_checkpoint_max`, written atomically; automatic resume from the latest
  one, continuing the input stream at `global_step × batch`;
* evaluation of every checkpoint exactly once, even across kills,
  `model.ckpt-best` by the task's metric, `eval_results.json` /
  `eval_results.txt`;
* TensorBoard summaries and `train_log.jsonl`, a progress bar (log lines
  when stderr is not a terminal); Ctrl-C ends a run with a `RunInterrupted`
  saying at which step it stopped and which checkpoint it resumes from;
* nothing is written before every check has passed (inputs, resume
  compatibility, run files, locks); a NaN or infinite loss stops the run and
  keeps the last checkpoint; a TensorFlow error during the run (corrupt
  record, token id outside the vocabulary, out of memory) ends it with one
  line.
"""

import abc
import dataclasses
import logging
import time
import re
from typing import Dict, Optional

import keras
import tensorflow as tf

from albert import interrupts, io
from albert.cli import progress_display
from albert.checkpoints import model_variables
from albert.modeling.encoder import set_rematerialization
from albert.errors import (AlbertError, CheckpointDamagedError, InputError, RunInterrupted,
                           RunPreempted, TrainingDivergedError)
from albert.records.tfrecord import find_corruption
from albert.training.checkpointing import TrainingCheckpoints
from albert.training.diagnostics import Diagnostics
from albert.training.distribute import worker_info
from albert.training.evaluation import MetricSumsEvaluation
from albert.training.host_actions import (CheckpointSchedule, Findings, ProgressDisplay,
                                          StepLog, StopAgreement, first_non_finite, step_records)
from albert.training.inputs import (TaskInput, check_global_batch,
                                    distributed_training_dataset)
from albert.training.optimization import AlbertLossScaleOptimizer
from albert.training.replica_step import (check_optimizer_takes_summed_gradients,
                                          inner_optimizer, replica_values,
                                          train_steps_function)
from albert.training.run_directory import CONCATENATED, DATA_ORDER_FILE, RunDirectory

logger = logging.getLogger("albert")

MIXED_PRECISION = ("none", "mixed_bfloat16", "mixed_float16")


class Task(abc.ABC):
    """What a training run trains. Subclasses: pretraining, and the fine-tuning tasks."""

    #: metric that picks model.ckpt-best (higher is better)
    best_metric: str
    #: keys of `losses()`, "loss" (the objective) first
    loss_names: tuple
    #: eval_results.txt layout: "pretraining" (metrics only), "finetuning"
    #: (each evaluation followed by `best = <best before it>` and a rule) or
    #: "squad" (followed by `best f1 = <best so far>` and a rule)
    eval_text_layout = "pretraining"

    @abc.abstractmethod
    def build_model(self) -> keras.Model:
        """A new model (called inside the strategy scope)."""

    def initialize(self, model) -> None:
        """Initial weights for a run that does not resume (e.g. --init_checkpoint)."""

    @abc.abstractmethod
    def train_input(self) -> TaskInput:
        """The training records and their parser."""

    def eval_input(self) -> Optional[TaskInput]:
        """Held-out records and their parser; None when there is nothing to evaluate."""
        return None

    def run_files(self) -> Dict[str, str]:
        """Files that describe the run (e.g. albert_config.json): {name: text}."""
        return {}

    def data_order(self) -> dict:
        """The task's settings that fix what step `s` reads, kept beside the trainer's
        (`TrainerConfig.data_order`) in the run's DATA_ORDER_FILE."""
        return {}

    @abc.abstractmethod
    def loss_normalizers(self, features) -> Dict[str, tf.Tensor]:
        """Local denominators of the losses; the loop sums them across replicas."""

    @abc.abstractmethod
    def losses(self, outputs, features, normalizers) -> Dict[str, tf.Tensor]:
        """This replica's share of each global-batch loss; must include "loss"."""

    def metric_sums(self, outputs, features) -> Dict[str, tuple]:
        """{metric: (total, count)} for one evaluation batch (used by `evaluate`).

        Batches are padded to one static shape: rows whose `example_weights`
        feature is 0 are padding and must count in no total or count.
        """
        raise NotImplementedError

    def diagnostics(self, config: "TrainerConfig", training: bool) -> Optional[Diagnostics]:
        """Checks that say when the run is not learning (`albert.training.diagnostics`)."""
        return None

    def evaluate(self, model, config: "TrainerConfig", strategy=None) -> Optional[dict]:
        """Metrics of `model` on the held-out data; None without held-out data.

        The default sums `metric_sums` over the first `max_eval_steps`
        batches of `eval_input()` on the replicas of `strategy`
        (`albert.training.evaluation`; None: the default device), compiled
        once per run; tasks whose metrics are not sums over examples
        (correlations, SQuAD's answer spans) override it and evaluate on the
        host's default device. A task may add whole-dev-set arrays under
        `CONCATENATED` (name → values); they are journaled beside the metrics
        (eval_results.json's `concatenated`) and printed in eval_results.txt,
        never read as metrics.
        """
        if self.eval_input() is None:
            return None
        evaluation = getattr(self, "_metric_sums_evaluation", None)
        if evaluation is None or evaluation.model is not model or (
                strategy is not None and evaluation.strategy is not strategy):
            evaluation = MetricSumsEvaluation(self, model, strategy, config.jit_compile)
            self._metric_sums_evaluation = evaluation
        return evaluation(config.eval_batch_size, config.max_eval_steps)


@dataclasses.dataclass
class TrainerConfig:
    output_dir: str
    num_train_steps: int
    train_batch_size: int
    eval_batch_size: int = 64
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    # Never delete a checkpoint that was not evaluated, also when this run does not evaluate:
    # fine-tuning's two-step workflow (train, then --do_eval picks the best of all).
    keep_unevaluated_checkpoints: bool = False
    steps_per_loop: int = 1
    max_eval_steps: int = 100
    jit_compile: bool = False
    mixed_precision: str = "none"
    show_progress: bool = True
    random_seed: int = 12345
    shuffle_buffer_size: int = 100
    input_shards: int = 1    # files split into shards read side by side (albert.training.inputs)
    initial_loss_scale: float = 2.0 ** 15
    bucket_window: int = 0   # > 0: length-bucketed training batches (albert.training.inputs)
    gradient_accumulation_steps: int = 1  # micro-batches per replica batch (replica_step)
    rematerialize: bool = False  # recompute each block's activations in the backward pass

    def data_order(self) -> dict:
        """The settings that fix which records step `s` reads (albert.training.inputs): kept in
        the run directory's DATA_ORDER_FILE, so that a resumed run reads on in the same order
        (a forgotten --random_seed or --train_batch_size would otherwise mix two orders)."""
        return {"train_batch_size": self.train_batch_size, "random_seed": self.random_seed,
                "shuffle_buffer_size": self.shuffle_buffer_size,
                "input_shards": self.input_shards, "bucket_window": self.bucket_window}

    def validate(self) -> None:
        if self.mixed_precision not in MIXED_PRECISION:
            raise InputError(f"--mixed_precision must be one of {', '.join(MIXED_PRECISION)}")
        positive = {"train_batch_size": self.train_batch_size,
                    "eval_batch_size": self.eval_batch_size,
                    "save_checkpoints_steps": self.save_checkpoints_steps,
                    "steps_per_loop": self.steps_per_loop,
                    "max_eval_steps": self.max_eval_steps,
                    "shuffle_buffer_size": self.shuffle_buffer_size,
                    "input_shards": self.input_shards,
                    "gradient_accumulation_steps": self.gradient_accumulation_steps}
        for name, value in positive.items():
            if value < 1:
                raise InputError(f"--{name} must be at least 1, got {value}")
        if self.num_train_steps < 0:
            raise InputError(f"--num_train_steps must not be negative, got {self.num_train_steps}")


class RunError(AlbertError, RuntimeError):
    """A TensorFlow error stopped the run (bad record, id outside the vocabulary, memory)."""


class Trainer:
    """Trains and evaluates a `Task` (see the module docstring).

    Args:
      task: the `Task`.
      strategy: a tf.distribute strategy (`albert.training.distribute`).
      config: `TrainerConfig`.
      make_optimizer: `variable_names -> optimizer` ({path: original name}): one of
        ALBERT's, built with `gradients_summed_by_caller=True` (`run_builder.OptimizerSettings`).
      variable_names: `model -> {variable path: original name}` for the
        optimizer's weight-decay exclusions.

    Example:
        trainer = Trainer(task, create_strategy("auto"), TrainerConfig(...), make_optimizer,
                          variable_names_for)
        trainer.train(do_eval=True)
    """

    def __init__(self, task: Task, strategy, config: TrainerConfig, make_optimizer, variable_names):
        config.validate()
        check_global_batch(config.train_batch_size, strategy.num_replicas_in_sync,
                           config.input_shards, config.gradient_accumulation_steps)
        self.task = task
        self.strategy = strategy
        self.config = config
        self.make_optimizer = make_optimizer
        self.variable_names = variable_names
        self.worker = worker_info(strategy)
        self.checkpoints = TrainingCheckpoints(config.output_dir, config.keep_checkpoint_max,
                                               self.worker.is_chief)
        self.directory = RunDirectory(config.output_dir, self.worker.is_chief)
        self.model = self.optimizer = None
        self._diagnostics = {}
        self._step = 0  # the last step trained (for the message of an interrupted run)

    # -------------------------------------------------------------- set-up
    def _diagnostics_for(self, training: bool) -> Diagnostics:
        """The task's checks (made once per kind of use; none: an empty set)."""
        if training not in self._diagnostics:
            self._diagnostics[training] = (self.task.diagnostics(self.config, training)
                                           or Diagnostics([]))
        return self._diagnostics[training]

    def build(self):
        """The model and its optimizer, built under the strategy (the loop's own start; the
        speed benchmarks time steps on them without a run directory)."""
        if self.config.mixed_precision != "none":
            keras.mixed_precision.set_global_policy(self.config.mixed_precision)
        with self.strategy.scope():
            model = self.task.build_model()
            if self.config.rematerialize and not set_rematerialization(model):
                raise InputError("--rematerialize: this model has no ALBERT encoder")
            optimizer = self.make_optimizer(self.variable_names(model))
            # Before the loop writes anything (the scripts' caches may already be there).
            check_optimizer_takes_summed_gradients(optimizer)
            if self.config.mixed_precision == "mixed_float16":
                optimizer = AlbertLossScaleOptimizer(
                    optimizer, initial_scale=self.config.initial_loss_scale)
            optimizer.build(model.trainable_variables)
        self.model, self.optimizer = model, optimizer
        return model, optimizer

    def _start(self, model, optimizer, locks, training: bool) -> Optional[int]:
        """Every check, then the first writes: returns the step to resume from (or None).
        `training`: the run trains, so its data order is a run file too."""
        step = self.checkpoints.latest_step()
        if self.worker.count > 1:
            # First, while every worker is still here: a check one worker alone
            # fails would leave the others waiting in this collective.
            self._check_workers_share_output_dir(step)
        run_files = self.run_files(training)
        self.directory.check_run_files(run_files)
        step = self._newest_restorable(step, model, optimizer)
        self.directory.lock(*locks)
        try:
            self.directory.write_run_files(run_files)
        except BaseException:
            self.directory.unlock()
            raise
        return step

    def _newest_restorable(self, step: Optional[int], model, optimizer) -> Optional[int]:
        """`step`, or, where its checkpoint's index does not read back, the newest one before it
        that does (each damaged one named in a warning and left in place)."""
        while step is not None:
            try:
                self.checkpoints.check_restorable(step, model, optimizer)
                return step
            except CheckpointDamagedError as error:
                self.checkpoints.mark_damaged(step, error)
                step = self.checkpoints.latest_step()
        if self.checkpoints.damaged:
            raise self.checkpoints.no_intact_error()
        return None

    def _restore_newest_intact(self, step: int, model, optimizer) -> int:
        """Restores model.ckpt-<step>, or the newest intact one before it where a data file
        fails its read-back (cut short, checksum): the run resumes from there."""
        while True:
            try:
                self.checkpoints.restore(step, model, optimizer)
                return step
            except CheckpointDamagedError as error:
                self.checkpoints.mark_damaged(step, error)
            step = self._newest_restorable(self.checkpoints.latest_step(), model, optimizer)
            if step is None:
                raise self.checkpoints.no_intact_error()

    def run_files(self, training: bool) -> Dict[str, str]:
        """The files a run keeps in its directory and a resume must match: the task's (config,
        settings) and, for a run that trains, the data order."""
        run_files = dict(self.task.run_files())
        if training:
            run_files[DATA_ORDER_FILE] = io.json_text({**self.config.data_order(),
                                                       **self.task.data_order()})
        return run_files

    def _check_workers_share_output_dir(self, step: Optional[int]) -> None:
        """Refuses (on every worker) a cluster whose workers see different checkpoints.

        Only the chief writes; a worker whose --output_dir is not the chief's
        (a local path on each machine, say) would resume from another step,
        or from nothing, and train on other data than the rest.
        """
        steps = replica_values(self.strategy, -1 if step is None else step)
        if len(set(steps)) > 1:
            def shown(value):
                return "none" if value < 0 else str(value)

            raise InputError(
                f"The workers see different checkpoints in --output_dir={self.config.output_dir} "
                f"(the chief: {shown(steps[0])}, this worker: {shown(-1 if step is None else step)}"
                "): every worker needs the same output directory (a shared file system or "
                "gs://)")

    def _warn_about_warmup(self, optimizer) -> None:
        """Says so when the learning rate never leaves its warm-up (a short run with the
        pretraining defaults): the run would train at a small fraction of its rate, silently."""
        schedule = getattr(inner_optimizer(optimizer), "learning_rate_schedule", None)
        warning = schedule.warmup_warning() if schedule is not None else None
        if warning and self.worker.is_chief:
            logger.warning(warning)

    def training_steps(self, model, optimizer, iterator):
        """A function of N that runs N training steps on `iterator`'s batches and returns
        each loss per step, by name (the function the loop calls)."""
        return train_steps_function(self.task, self.strategy, model, optimizer, iterator,
                                    self.config.jit_compile, self.task.loss_names,
                                    accumulation_steps=self.config.gradient_accumulation_steps)

    # ------------------------------------------------------------ training
    def train(self, do_eval: bool = False) -> Optional[dict]:
        """Trains to `num_train_steps` (resuming if a checkpoint exists); returns the last eval."""
        config = self.config
        model, optimizer = self.build()
        step = self._start(model, optimizer, ("train", "eval") if do_eval else ("train",),
                           training=True)
        self._step = step or 0
        try:
            if step is not None:
                step = self._restore_newest_intact(step, model, optimizer)
                self._step = step
                self.directory.truncate_train_log(step)
                logger.info("Resumed from %s", self.checkpoints.prefix(step))
            else:
                step = 0
                self.task.initialize(model)
            last_eval = self._evaluate_pending(model, optimizer) if do_eval else None
            if step >= config.num_train_steps:
                logger.info("Already trained to step %d", step)
                return last_eval
            self._warn_about_warmup(optimizer)
            return self._train_from(step, model, optimizer, do_eval) or last_eval
        except KeyboardInterrupt:
            raise self._interrupted() from None
        finally:
            self.directory.unlock()

    def _train_from(self, step, model, optimizer, do_eval):
        config = self.config
        task_input = self.task.train_input()
        dataset = distributed_training_dataset(
            self.strategy, task_input, config.train_batch_size, config.random_seed, step,
            config.shuffle_buffer_size, bucket_window=config.bucket_window,
            input_shards=config.input_shards, workers=self.worker.count)
        iterator = iter(dataset)
        train_steps = self.training_steps(model, optimizer, iterator)
        diagnostics = None
        if self.worker.is_chief:
            with _run_errors(step, task_input):  # the checks may read the records first
                diagnostics = self._diagnostics_for(training=True)
        progress = self._progress(step)
        try:
            with interrupts.termination_deferred():
                return self._train_steps(step, model, optimizer, do_eval, train_steps,
                                         task_input, diagnostics, progress)
        finally:
            if progress is not None:
                progress.close()

    def _train_steps(self, step, model, optimizer, do_eval, train_steps, task_input, diagnostics,
                     progress):
        """The host loop: device steps, their records to the sinks, the checkpoint schedule."""
        config = self.config
        schedule = CheckpointSchedule(config.save_checkpoints_steps, config.num_train_steps)
        sinks = self._sinks(diagnostics, progress)
        interrupts.handle_termination_again()
        agree_to_stop = StopAgreement(self.strategy, self.worker.count)
        last_eval = None
        while step < config.num_train_steps:
            count = schedule.steps_in_next_call(step, config.steps_per_loop)
            records = self._device_steps(train_steps, step, count, task_input)
            self._stop_if_diverged(records, sinks)
            for sink in sinks:
                sink.write(records)
            step += count
            self._step = step
            interrupts.raise_if_requested()
            # The agreement and the save are collectives too: a peer lost
            # during them ends this worker with the same one line.
            with _run_errors(step, task_input):
                preempted = agree_to_stop()
                saving = schedule.saves_at(step, preempted)
                if saving:
                    self._save(step, model, optimizer)
            if saving:
                # A preempted run has seconds left: its checkpoint is evaluated
                # when the same command resumes (every checkpoint is, once).
                if do_eval and self.worker.is_chief and not preempted:
                    last_eval = self.evaluate_and_track(step, model)
                self.checkpoints.prune(
                    self._unevaluated()
                    if do_eval or config.keep_unevaluated_checkpoints else ())
            if preempted:
                raise RunPreempted(f"SIGTERM at step {step}: saved {self.checkpoints.prefix(step)}"
                                   "; the same command resumes from it")
        return last_eval

    def _sinks(self, diagnostics, progress) -> list:
        """Where each step's record goes, in this order (see albert.training.host_actions)."""
        sinks = [] if diagnostics is None else [Findings(diagnostics, self.directory)]
        sinks.append(StepLog(self.directory))
        if progress is not None:
            sinks.append(ProgressDisplay(progress))
        return sinks

    def _device_steps(self, train_steps, step: int, count: int, task_input) -> list:
        """Runs `count` steps on the device; their records, read in one go."""
        start = time.time()
        with _run_errors(step, task_input):
            # The one read of the device per host loop: every step's losses
            # and learning rate, gathered on the device.
            values = {name: value.numpy().tolist()
                      for name, value in train_steps(tf.constant(count)).items()}
        return step_records(values, step, count, time.time() - start,
                            self.config.train_batch_size)

    def _stop_if_diverged(self, records, sinks) -> None:
        """A NaN or infinite loss: hands the steps before it to the sinks, then stops the run."""
        bad = first_non_finite(records, self.task.loss_names)
        if bad is None:
            return
        if bad:
            for sink in sinks:
                sink.write(records[:bad])
        raise TrainingDivergedError(
            f"The loss became {records[bad]['loss']} at step {records[bad]['step']}; stopping. "
            f"The last checkpoint ({self.checkpoints.latest_step() or 'none'}) is kept. Lower "
            "--learning_rate, or check the input data")

    def _save(self, step: int, model, optimizer) -> None:
        global_step = int(optimizer.iterations.numpy())
        if global_step != step:
            raise RuntimeError(f"global_step {global_step} != loop step {step}")
        self.checkpoints.save(step, model, optimizer)
        self.directory.flush_logs()

    def _unevaluated(self):
        done = set(self.directory.evaluated_steps())
        return [step for step in self.checkpoints.steps() if step not in done]

    def _progress(self, step):
        if not (self.config.show_progress and self.worker.is_chief):
            return None

        return progress_display(self.config.num_train_steps, "training", "step", initial=step)

    def _interrupted(self) -> RunInterrupted:
        """Ctrl-C: where the run stopped, and where the same command goes on from."""
        latest = self.checkpoints.latest_step()
        goes_on = ("the same command starts again" if latest is None else
                   f"the same command resumes from {self.checkpoints.prefix(latest)}")
        return RunInterrupted(f"stopped at step {self._step}; {goes_on}")

    # ---------------------------------------------------------- evaluation
    def evaluate(self, model) -> Optional[dict]:
        # Under several workers only the chief evaluates: not on the strategy,
        # whose collectives would wait for the others.
        strategy = self.strategy if self.worker.count == 1 else None
        with _run_errors(None, self.task.eval_input()):
            return self.task.evaluate(model, self.config, strategy)

    def evaluate_and_track(self, step: int, model) -> Optional[dict]:
        """Evaluates the model at `step`, journals it, then updates model.ckpt-best."""
        metrics = self.evaluate(model)
        if metrics is None:
            return None
        concatenated = metrics.pop(CONCATENATED, None)
        diagnostics = self._diagnostics_for(training=False)
        findings = diagnostics.observe_evaluation(step, metrics)
        metrics = diagnostics.split_metrics(metrics)
        best = self.directory.best()
        value = metrics[self.task.best_metric]
        improved = best is None or value > best[self.task.best_metric]
        if improved:
            best = {"step": step, self.task.best_metric: value}
        # Journal first: a kill before the copy is repaired on the next start.
        self.directory.record_evaluation(step, metrics, best, self.task.best_metric,
                                         self.task.eval_text_layout,
                                         findings=[finding.as_dict() for finding in findings],
                                         concatenated=concatenated)
        if improved:
            self.checkpoints.copy_to_best(step)
        logger.info("Step %d: %s", step,
                    ", ".join(f"{k} = {v:.4f}" for k, v in sorted(metrics.items())))
        return metrics

    def _repair_best(self) -> None:
        """Finishes a best-checkpoint copy that a kill interrupted."""
        best = self.directory.best()
        if best is None or best["step"] not in self.checkpoints.steps():
            return
        if not self.checkpoints.best_is_copy_of(best["step"]):
            logger.info("Completing the copy of model.ckpt-%d to model.ckpt-best", best["step"])
            self.checkpoints.copy_to_best(best["step"])

    def _evaluate_pending(self, model, optimizer) -> Optional[dict]:
        """Evaluates every listed checkpoint not in the journal, oldest first, then restores
        the model to the latest checkpoint (or leaves it as it is if there is none)."""
        if not self.worker.is_chief:
            return None
        self._repair_best()
        pending = self._unevaluated()
        last = None
        for step in pending:
            self.checkpoints.restore(step, model, optimizer)
            last = self.evaluate_and_track(step, model)
            interrupts.raise_if_requested()
        if pending and pending[-1] != self.checkpoints.latest_step():
            self.checkpoints.restore(self.checkpoints.latest_step(), model, optimizer)
        return last

    def evaluate_checkpoints(self) -> Optional[dict]:
        """Evaluates every checkpoint in output_dir that has not been evaluated yet, once."""
        model, optimizer = self.build()
        if not self.checkpoints.steps():
            raise InputError(f"No checkpoint to evaluate in {self.config.output_dir}")
        self._start(model, optimizer, ("eval",), training=False)
        try:
            return self._evaluate_pending(model, optimizer)
        except KeyboardInterrupt:
            raise RunInterrupted("stopped while evaluating; the same command evaluates the "
                                 "checkpoints not evaluated yet") from None
        finally:
            self.directory.unlock()


# What TensorFlow says when a collective finds a peer gone (heartbeats stopped,
# connection refused or reset).
_PEER_LOST = re.compile(r"unhealthy|heartbeat|Connection reset|connection refused|Socket closed",
                        re.IGNORECASE)


class _run_errors:
    """Turns a TensorFlow error inside the run into one line naming its likely cause."""

    def __init__(self, step: Optional[int], task_input: Optional[TaskInput]):
        self.step = step
        self.task_input = task_input

    def __enter__(self):
        return self

    def __exit__(self, exc_type, error, traceback):
        if exc_type is None or not issubclass(exc_type, tf.errors.OpError):
            return False
        where = "evaluation" if self.step is None else f"training after step {self.step}"
        message = (error.message or str(error)).strip().splitlines()[0]
        if isinstance(error, tf.errors.DataLossError) and self.task_input is not None:
            located = find_corruption(self.task_input.source.files)
            raise RunError(f"{where} stopped: {located or message}") from None
        if isinstance(error, tf.errors.UnavailableError) and _PEER_LOST.search(str(error)):
            raise RunError(f"{where} stopped: another worker stopped answering ({message}); "
                           "launch every worker again with the same command to resume from "
                           "the last checkpoint") from None
        if isinstance(error, tf.errors.InvalidArgumentError) and "indices" in message:
            raise RunError(f"{where} stopped: a token id is outside the model's vocabulary "
                           f"({message}); is the config's vocab_size the data's?") from None
        raise RunError(f"{where} stopped: {type(error).__name__}: {message}") from None


def variable_names_for(model) -> Dict[str, str]:
    """{Keras variable path: original TF1 name} for the optimizer's exclusions."""
    return {variable.path: name for name, variable in model_variables(model).items()}


__all__ = ["MIXED_PRECISION", "RunError", "Task", "Trainer", "TrainerConfig",
           "variable_names_for"]
