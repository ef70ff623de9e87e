"""The small actions the training loop's host side is made of (`Trainer._train_steps`).

After each call into the device (`steps_per_loop` steps), the host turns the
losses it read into one record per step, stops a diverged run, hands the
records to its sinks, then asks whether to save:

* `CheckpointSchedule`: when to save (every `save_checkpoints_steps`, at the
  last step, and when the workers agree to stop) and so how many steps the
  next device call may run;
* `step_records` / `first_non_finite`: the per-step records and the guard;
* sinks, each `write(records)`, in this order: `Findings` (the task's
  diagnostics; it adds fields to the records, such as the masked-LM loss
  above the unigram loss), `StepLog` (`train_log.jsonl` and TensorBoard,
  through the run directory), `ProgressDisplay` (the bar or its log lines);
  the steps before a diverged one reach them too;
* `StopAgreement`: SIGTERM on any worker stops every worker at the same step.

A new sink is a class with `write(records)` added to the list
`Trainer._sinks` builds; a new schedule replaces `CheckpointSchedule`.
"""

import dataclasses
import math
from typing import Dict, List, Optional

from albert import interrupts
from albert.training.replica_step import agreement_function


@dataclasses.dataclass(frozen=True)
class CheckpointSchedule:
    """Checkpoints every `every` steps and at `last`; a stop agreed by the workers saves too."""

    every: int
    last: int

    def steps_in_next_call(self, step: int, steps_per_loop: int) -> int:
        """How many steps the next device call runs: never past the next save."""
        next_save = (step // self.every + 1) * self.every
        return min(steps_per_loop, next_save - step, self.last - step)

    def saves_at(self, step: int, stopping: bool) -> bool:
        return stopping or step % self.every == 0 or step == self.last


def step_records(values: Dict[str, list], step: int, count: int, seconds: float,
                 batch_size: int) -> List[dict]:
    """One record per step from the device's per-step columns (losses, learning rate)."""
    return [dict({name: column[offset] for name, column in values.items()},
                 step=step + offset + 1, examples_per_second=batch_size * count / seconds)
            for offset in range(count)]


def first_non_finite(records: List[dict], loss_names) -> Optional[int]:
    """The index of the first record with a NaN or infinite loss, or None."""
    for index, record in enumerate(records):
        if not all(math.isfinite(record[name]) for name in loss_names):
            return index
    return None


class StepLog:
    """`train_log.jsonl` and the TensorBoard scalars of every step (the run directory's)."""

    def __init__(self, directory):
        self.directory = directory

    def write(self, records: List[dict]) -> None:
        self.directory.log_steps(records)


class Findings:
    """What the task's diagnostics find in the steps, kept in eval_results.json."""

    def __init__(self, diagnostics, directory):
        self.diagnostics = diagnostics
        self.directory = directory

    def write(self, records: List[dict]) -> None:
        findings = self.diagnostics.observe_steps(records)
        self.directory.record_findings([finding.as_dict() for finding in findings])


class ProgressDisplay:
    """The progress bar (or its log lines): the last step's loss and learning rate."""

    def __init__(self, progress):
        self.progress = progress

    def write(self, records: List[dict]) -> None:
        self.progress.set_postfix(loss=f"{records[-1]['loss']:.4f}",
                                  lr=f"{records[-1]['learning_rate']:.2e}", refresh=False)
        self.progress.update(len(records))


class StopAgreement:
    """`agree() -> bool`: True on every worker when SIGTERM reached any of them.

    One collective per host loop under several workers (every worker calls it
    at the same point); one process asks only itself.
    """

    def __init__(self, strategy, workers: int):
        self._agree = agreement_function(strategy) if workers > 1 else bool

    def __call__(self) -> bool:
        return self._agree(interrupts.termination_requested())
