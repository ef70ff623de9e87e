"""One way to build a training run from plain settings, for every script.

`run_pretraining.py` and the fine-tuning scripts (through `albert.finetuning`)
turn their flags into a `RunSettings`; `build_trainer` does the rest the same
way for all of them: the run's random seed, the host-loop settings for the
strategy's devices, the warning when the batch will not fit them by the memory
estimate (`albert.memory`), the `TrainerConfig` and the optimizer factory.
Nothing here reads flags.
"""

import dataclasses
import logging
from typing import Optional

import keras

from albert import memory
from albert.training import distribute
from albert.training.loop import Trainer, TrainerConfig, variable_names_for
from albert.training.optimization import create_optimizer

logger = logging.getLogger("albert")


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """The original's optimizer flags; called with the model's variable names it makes the
    optimizer (`Trainer`'s `make_optimizer`)."""

    name: str                 # "lamb" or "adamw"
    learning_rate: float
    num_train_steps: int
    num_warmup_steps: int
    start_warmup_step: int = 0
    poly_power: float = 1.0
    bias_correction: bool = False  # Adam's bias correction (not the original's)

    def __call__(self, variable_names):
        # The training loop sums gradients across replicas itself (replica_step.py).
        return create_optimizer(self.name, self.learning_rate, self.num_train_steps,
                                self.num_warmup_steps, self.start_warmup_step, self.poly_power,
                                variable_names=variable_names,
                                bias_correction=self.bias_correction,
                                gradients_summed_by_caller=True)


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What a training run's flags say, whatever the script. The host-loop settings are the
    flags' (None: chosen for the devices by `distribute.loop_settings`); `build_trainer`
    puts the resolved ones into the trainer's configuration."""

    trainer: TrainerConfig
    optimizer: OptimizerSettings
    steps_per_loop: Optional[int] = None
    iterations_per_loop: int = 1000        # the original's TPU flag
    jit_compile: Optional[bool] = None


def build_trainer(task, strategy, settings: RunSettings, seq_length: int, predictions: int = 0,
                  sequences_per_example: int = 1) -> Trainer:
    """The `Trainer` of `task` on `strategy`. `seq_length`, `predictions` (masked-LM slots
    per sequence) and `sequences_per_example` (RACE's choices) size the memory estimate."""
    steps_per_loop, jit_compile = distribute.loop_settings(
        strategy, settings.steps_per_loop, settings.iterations_per_loop, settings.jit_compile)
    config = dataclasses.replace(settings.trainer, steps_per_loop=steps_per_loop,
                                 jit_compile=jit_compile)
    keras.utils.set_random_seed(config.random_seed)
    too_large = memory.fit_warning(
        task.config, seq_length, predictions, config.train_batch_size, strategy,
        config.gradient_accumulation_steps, config.rematerialize, config.mixed_precision,
        sequences_per_example)
    if too_large:
        logger.warning(too_large)
    return Trainer(task, strategy, config, make_optimizer=settings.optimizer,
                   variable_names=variable_names_for)
