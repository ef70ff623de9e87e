"""Saying when a run is not learning: checks the training loop runs for every task.

A run that learns nothing looks like any other run from the outside: the loss
is finite, checkpoints are written, the evaluation prints numbers. Two
failures are common enough in ALBERT pretraining to be named:

* **The unigram plateau.** A masked LM that uses no context at all predicts
  every masked token with the tokens' overall frequencies; the best such
  predictor has a cross-entropy equal to the entropy of the masked-token
  distribution, which the data gives before training starts. Runs at an
  unsuitable learning rate (or too few steps) sit there: the loss falls from
  ln(vocabulary) to that entropy in a few hundred steps and stays.
* **A one-label head.** A classifier that answers the same label for every
  example scores the held-out set's majority share; its accuracy looks like
  a number, not like a failure.

`Diagnostics` is what a `Task` hands the `Trainer`: it sees every training
step's losses and every evaluation's metrics, adds numbers to the step
records (`train_log.jsonl`, TensorBoard) and findings to the evaluation
journal (`eval_results.json`), and warns once per kind of finding.
"""

import collections
import dataclasses
import logging
import math
from typing import Dict, List, Optional, Sequence

import numpy as np

logger = logging.getLogger("albert")


def unigram_cross_entropy(counts: Sequence[int]) -> float:
    """Cross-entropy (nats) of the best context-free predictor of tokens with these counts."""
    counts = np.asarray(counts, np.float64)
    total = counts.sum()
    if total <= 0:
        return float("nan")
    probabilities = counts[counts > 0] / total
    return float(-(probabilities * np.log(probabilities)).sum())


@dataclasses.dataclass
class Finding:
    """Something a check found: `kind` names the check, `numbers` say how it was judged."""

    kind: str
    step: int
    message: str
    numbers: Dict[str, float]
    #: the evaluated model is degenerate (it answers without using its input): the
    #: evaluation's journal entry says so (`degenerate: true` and the reason)
    degenerate: bool = False

    def as_dict(self) -> dict:
        found = {"kind": self.kind, "step": self.step, "message": self.message, **self.numbers}
        if self.degenerate:
            found["degenerate"] = True
        return found


class Check:
    """One diagnostic; both hooks are optional."""

    def observe_steps(self, records: List[dict]) -> Optional[Finding]:
        """Sees the step records (it may add numeric fields to them)."""
        return None

    def observe_evaluation(self, step: int, metrics: Dict[str, float]) -> Optional[Finding]:
        return None


class UnigramPlateau(Check):
    """Warns when the masked-LM loss has not gone below the unigram loss for `window` steps.

    The loss is smoothed over the last `smoothing` steps; "below" means by
    more than `margin` nats. Every step record gets
    `<loss_name>_minus_unigram`, so TensorBoard shows the distance.
    """

    def __init__(self, unigram_loss: float, window: int, advice: str, margin: float = 0.1,
                 smoothing: int = 50, loss_name: str = "masked_lm_loss"):
        self.unigram_loss = unigram_loss
        self.window = window
        self.advice = advice
        self.margin = margin
        self.loss_name = loss_name
        self._recent = collections.deque(maxlen=smoothing)
        self._stuck_since: Optional[int] = None
        self._found = False

    def observe_steps(self, records: List[dict]) -> Optional[Finding]:
        finding = None
        for record in records:
            loss = record.get(self.loss_name)
            if loss is None:
                continue
            record[f"{self.loss_name}_minus_unigram"] = loss - self.unigram_loss
            self._recent.append(loss)
            smoothed = sum(self._recent) / len(self._recent)
            if smoothed < self.unigram_loss - self.margin:
                self._stuck_since = None
                continue
            if self._stuck_since is None:
                self._stuck_since = record["step"] - 1
            stuck_for = record["step"] - self._stuck_since
            if not self._found and stuck_for >= self.window:
                self._found = True
                where = ("on the unigram plateau" if smoothed <= self.unigram_loss + self.margin
                         else "above the unigram loss")
                finding = Finding(
                    "unigram_plateau", record["step"],
                    f"the masked-LM loss has stayed {where} for {stuck_for} steps (mean of the "
                    f"last {len(self._recent)} steps {smoothed:.3f} nats; a predictor that "
                    f"ignores context, using only token frequencies, scores "
                    f"{self.unigram_loss:.3f}): the model predicts masked tokens without using "
                    f"their context. {self.advice}",
                    {"unigram_loss": self.unigram_loss, "masked_lm_loss": smoothed,
                     "steps": stuck_for, "margin": self.margin})
        return finding


class OneLabelHead(Check):
    """Finds a classification head that answers one label for (nearly) every held-out example.

    Reads two evaluation metrics: the share of examples predicted as label 1
    (`predicted_one`) and the share labelled 1 (`label_one`).
    """

    def __init__(self, head: str, predicted_one: str, label_one: str, accuracy: str,
                 tolerance: float = 0.005):
        self.head = head
        self.predicted_one = predicted_one
        self.label_one = label_one
        self.accuracy = accuracy
        self.tolerance = tolerance

    def observe_evaluation(self, step: int, metrics: Dict[str, float]) -> Optional[Finding]:
        predicted = metrics.get(self.predicted_one)
        if predicted is None or math.isnan(predicted):
            return None
        if self.tolerance < predicted < 1 - self.tolerance:
            return None
        label = 1 if predicted >= 0.5 else 0
        share = metrics[self.label_one] if label == 1 else 1 - metrics[self.label_one]
        return Finding(
            f"{self.head}_one_label", step,
            f"the {self.head.replace('_', '-')} head answers label {label} for "
            f"{100 * max(predicted, 1 - predicted):.1f}% of the held-out examples: its accuracy "
            f"{metrics.get(self.accuracy, float('nan')):.4f} is the share of that label in the "
            f"held-out set ({share:.4f}), not something learned (chance, always answering the "
            f"commoner label, is {max(share, 1 - share):.4f})",
            {"label": label, "predicted_share": max(predicted, 1 - predicted),
             "label_share": share, "accuracy": metrics.get(self.accuracy, float("nan"))})


class Diagnostics:
    """The checks of one run; each kind of finding is warned about once per process.

    Metrics named in `diagnostic_metrics` feed the checks but are not
    journaled as metrics (eval_results.txt keeps the original's lines).
    """

    def __init__(self, checks: Sequence[Check], diagnostic_metrics: Sequence[str] = ()):
        self.checks = list(checks)
        self.diagnostic_metrics = tuple(diagnostic_metrics)
        self._warned = set()

    def _report(self, finding: Optional[Finding]) -> Optional[Finding]:
        if finding is None:
            return None
        # A degenerate evaluation is said at every evaluation it happens in: a run can
        # start degenerate and recover, and the log should say which checkpoints were.
        if finding.degenerate or finding.kind not in self._warned:
            self._warned.add(finding.kind)
            logger.warning("Step %d: %s", finding.step, finding.message)
        return finding

    def observe_steps(self, records: List[dict]) -> List[Finding]:
        """Adds numbers to `records`; returns what was found (also attached to the record)."""
        findings = []
        for check in self.checks:
            finding = self._report(check.observe_steps(records))
            if finding is not None:
                findings.append(finding)
                for record in records:
                    if record["step"] == finding.step:
                        record.setdefault("findings", []).append(finding.as_dict())
        return findings

    def observe_evaluation(self, step: int, metrics: Dict[str, float]) -> List[Finding]:
        return [finding for check in self.checks
                if (finding := self._report(check.observe_evaluation(step, metrics))) is not None]

    def split_metrics(self, metrics: Dict[str, float]) -> Dict[str, float]:
        """The metrics to journal: `metrics` without the diagnostic-only ones."""
        return {k: v for k, v in metrics.items() if k not in self.diagnostic_metrics}
