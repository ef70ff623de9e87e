"""GLUE metrics, as the original computes them plus what the leaderboard also reports.

The original reports `eval_accuracy` and `eval_loss` for the classification
tasks, `matthew_corr` for CoLA and `pearson` and `MSE` for STS-B; the GLUE
leaderboard also reports F1 for MRPC and QQP (positive class `1`) and
Spearman's rank correlation for STS-B, added here under their own keys.
"""

import math
from typing import Dict

import numpy as np


def accuracy(predictions, labels) -> float:
    return float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def matthews_correlation(predictions, labels) -> float:
    """(tp·tn − fp·fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)); 0 when the denominator is 0."""
    predictions, labels = np.asarray(predictions) == 1, np.asarray(labels) == 1
    tp = float(np.sum(predictions & labels))
    tn = float(np.sum(~predictions & ~labels))
    fp = float(np.sum(predictions & ~labels))
    fn = float(np.sum(~predictions & labels))
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def f1(predictions, labels, positive: int = 1) -> float:
    predictions, labels = np.asarray(predictions) == positive, np.asarray(labels) == positive
    tp = float(np.sum(predictions & labels))
    precision_denominator, recall_denominator = float(np.sum(predictions)), float(np.sum(labels))
    if not tp:
        return 0.0
    precision, recall = tp / precision_denominator, tp / recall_denominator
    return 2 * precision * recall / (precision + recall)


def pearson(predictions, labels) -> float:
    x, y = np.asarray(predictions, np.float64), np.asarray(labels, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(np.sum(x * x) * np.sum(y * y)))
    return float(np.sum(x * y) / denominator) if denominator else 0.0


def _ranks(values) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), 1-based."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(predictions, labels) -> float:
    return pearson(_ranks(predictions), _ranks(labels))


def glue_metrics(task_name: str, predictions, labels, loss: float) -> Dict[str, float]:
    """The metrics of `task_name` for predicted class ids (or scores for STS-B)."""
    if task_name == "sts-b":
        predictions = np.asarray(predictions, np.float64)
        labels = np.asarray(labels, np.float64)
        return {"pearson": pearson(predictions, labels), "spearman": spearman(predictions, labels),
                "MSE": float(np.mean((predictions - labels) ** 2)), "eval_loss": loss}
    metrics = {"eval_accuracy": accuracy(predictions, labels), "eval_loss": loss}
    if task_name == "cola":
        metrics["matthew_corr"] = matthews_correlation(predictions, labels)
    if task_name in ("mrpc", "qqp"):
        metrics["f1"] = f1(predictions, labels)
    return metrics
