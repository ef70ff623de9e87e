"""Fine-tuning runs that failed silently: checks made after every evaluation.

A fine-tuning run that learned nothing still prints a dev accuracy: the
share of the class it always answers. These checks, run on every
evaluation (`albert.training.diagnostics`), mark such an evaluation
`degenerate` in `eval_results.json` (with the reason) and warn in the log:

* **one answer** — a classifier that puts every dev example in one class,
  or a multiple-choice model that always picks the same option;
* **constant regression** — a regression head whose dev predictions do not
  vary (their standard deviation is below a thousandth of the labels'): its
  MSE is that of predicting the mean, though Pearson, blind to scale, may
  still find a faint order in the tiny differences;
* **no answers** — a SQuAD model whose every prediction is empty;
* **content-blind loss** — a SQuAD run whose training loss has not gone
  below what a model that never reads the text scores: predicting the
  answer positions from their frequencies in the training features (the
  entropy of the start and end positions; for v2.0 plus that of
  "impossible"). A run at learning rate 0 stays far above it; a run stuck
  where the model has learned only where answers usually are sits on it.

The numbers the checks read are diagnostic metrics: the tasks compute them
with the dev metrics, and the trainer keeps them out of the journal's
metrics (eval_results.txt keeps the original's lines).
"""

import math
from typing import Dict, Optional, Sequence

import numpy as np

from albert.training.diagnostics import Check, Finding, unigram_cross_entropy
from albert.training.run_directory import read_train_log

TOP_SHARE = "predicted_top_share"          # share of the most frequent answer
TOP_ANSWER = "predicted_top_answer"        # that answer (class or option index)
TOP_LABEL_SHARE = "label_share_of_top_answer"  # its share among the labels
ONE_ANSWER_METRICS = (TOP_SHARE, TOP_ANSWER, TOP_LABEL_SHARE)
PREDICTION_STD, LABEL_STD = "prediction_std", "label_std"
REGRESSION_METRICS = (PREDICTION_STD, LABEL_STD)
EMPTY_SHARE = "predicted_empty_share"
SQUAD_METRICS = (EMPTY_SHARE,)


def answer_shares(predictions: np.ndarray, labels: np.ndarray) -> Dict[str, float]:
    """The one-answer check's metrics for class (or option) `predictions`."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if not len(predictions):
        return {}
    values, counts = np.unique(predictions, return_counts=True)
    top = values[counts.argmax()]
    return {TOP_SHARE: float(counts.max() / len(predictions)), TOP_ANSWER: float(top),
            TOP_LABEL_SHARE: float(np.mean(labels == top))}


def regression_spread(predictions: np.ndarray, labels: np.ndarray) -> Dict[str, float]:
    """The constant-regression check's metrics."""
    if not len(predictions):
        return {}
    return {PREDICTION_STD: float(np.std(np.asarray(predictions, np.float64))),
            LABEL_STD: float(np.std(np.asarray(labels, np.float64)))}


def empty_share(answers: Sequence[str]) -> Dict[str, float]:
    """The no-answers check's metric: the share of empty answers ("" or v1.1's "empty",
    what the decoding answers when no span is valid)."""
    answers = list(answers)
    if not answers:
        return {}
    return {EMPTY_SHARE: sum(a.strip() in ("", "empty") for a in answers) / len(answers)}


class OneAnswer(Check):
    """Every dev example gets the same answer (`what`: "class" or "option")."""

    def __init__(self, what: str, accuracy: str):
        self.what = what
        self.accuracy = accuracy

    def observe_evaluation(self, step: int, metrics: Dict[str, float]) -> Optional[Finding]:
        share = metrics.get(TOP_SHARE)
        if share is None or share < 1.0:
            return None
        answer = int(metrics[TOP_ANSWER])
        accuracy = metrics.get(self.accuracy, float("nan"))
        return Finding(
            f"one_{self.what}", step,
            f"degenerate evaluation: every dev example gets {self.what} {answer}; the "
            f"{self.accuracy} {accuracy:.4f} is that {self.what}'s share of the labels "
            f"({metrics[TOP_LABEL_SHARE]:.4f}), not something learned",
            {"answer": answer, "label_share": metrics[TOP_LABEL_SHARE]}, degenerate=True)


class ConstantRegression(Check):
    """The regression head's dev predictions do not vary (std below `ratio` × the labels')."""

    def __init__(self, ratio: float = 1e-3):
        self.ratio = ratio

    def observe_evaluation(self, step: int, metrics: Dict[str, float]) -> Optional[Finding]:
        spread, label_spread = metrics.get(PREDICTION_STD), metrics.get(LABEL_STD)
        if spread is None or not spread <= self.ratio * max(label_spread, 1e-12):
            return None
        return Finding(
            "constant_regression", step,
            f"degenerate evaluation: the dev predictions are constant (standard deviation "
            f"{spread:.3g}, the labels' {label_spread:.3g}): the model has collapsed to one "
            "value; a correlation it scores comes from differences of that size",
            {"prediction_std": spread, "label_std": label_spread}, degenerate=True)


class NoAnswers(Check):
    """Every SQuAD prediction is empty."""

    def observe_evaluation(self, step: int, metrics: Dict[str, float]) -> Optional[Finding]:
        share = metrics.get(EMPTY_SHARE)
        if share is None or share < 1.0:
            return None
        return Finding("no_answers", step,
                       "degenerate evaluation: every prediction is empty (no answer span)",
                       {"empty_share": share}, degenerate=True)


def position_prior_loss(start_positions, end_positions, is_impossible=None) -> float:
    """The SQuAD loss of the best predictor that never reads the text: answer positions
    drawn from their training frequencies (the loss's formula, with entropies for its
    cross-entropies)."""
    def entropy(values):
        return unigram_cross_entropy(np.bincount(np.asarray(values, np.int64)))

    loss = 0.5 * (entropy(start_positions) + entropy(end_positions))
    if is_impossible is not None:
        loss += 0.5 * entropy(is_impossible)
    return loss


class ContentBlindLoss(Check):
    """The training loss up to an evaluated step has not gone below `blind_loss` − `margin`.

    Reads the step log of the run in `output_dir`
    (`run_directory.read_train_log`, so a resumed run sees its whole
    history): the loss is the mean of the last tenth of the steps (1 to 50
    of them) up to the evaluated step.
    """

    def __init__(self, blind_loss: float, output_dir: str, margin: float = 0.1):
        self.blind_loss = blind_loss
        self.output_dir = output_dir
        self.margin = margin

    def _recent_loss(self, step: int) -> Optional[float]:
        losses = [record["loss"] for record in read_train_log(self.output_dir)
                  if record["step"] <= step]
        if not losses:
            return None
        recent = losses[-min(50, max(1, len(losses) // 10)):]
        return sum(recent) / len(recent)

    def observe_evaluation(self, step: int, metrics: Dict[str, float]) -> Optional[Finding]:
        loss = self._recent_loss(step)
        if loss is None or math.isnan(self.blind_loss) or loss < self.blind_loss - self.margin:
            return None
        return Finding(
            "content_blind_loss", step,
            f"degenerate evaluation: the training loss ({loss:.3f}, recent steps) has not gone "
            f"below {self.blind_loss:.3f}, what a model that never reads the text scores by "
            "predicting answer positions from their frequencies: the model does not use the "
            "question or the passage",
            {"loss": loss, "blind_loss": self.blind_loss}, degenerate=True)
