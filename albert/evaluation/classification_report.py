"""Metrics of a classifier or regressor fine-tuned on a user's files, each beside its baseline.

Classification: accuracy, macro-F1 (the unweighted mean of the classes' F1), each class's
precision, recall and F1, and the confusion matrix (rows: the true class, columns: the
predicted one). The baseline is the commonest training label's share of the evaluated
examples: what always answering that label scores. A class never predicted has precision
0, one never present has recall 0 (as scikit-learn's `zero_division=0`).

Multi-label (each example has any number of the labels): subset accuracy (the share of
examples whose predicted label set is exactly the true one), micro-F1 (from the true and
false positives and negatives pooled over every label), macro-F1, and each label's
precision, recall and F1; scikit-learn's `accuracy_score` and `f1_score(average="micro" /
"macro", zero_division=0)` on the same indicator matrices give the same numbers. The
baseline predicts, for every example, the labels that more than half of the training
examples have.

Regression: Pearson and Spearman correlation and the mean squared error; the baseline MSE
is that of always predicting the training labels' mean.

`classification_metrics` / `regression_metrics` give the flat numbers the training loop
journals for every checkpoint (`eval_results.json` / `eval_results.txt`); `report` gives
the whole picture of one evaluation (`eval_report.json`, `eval_report.md`,
`confusion_matrix.png`).
"""

import logging
from typing import Dict, List, Optional, Sequence

import numpy as np

from albert import io
from albert.evaluation.glue_metrics import accuracy, pearson, spearman

logger = logging.getLogger("albert")

REPORT_JSON = "eval_report.json"
REPORT_MARKDOWN = "eval_report.md"
CONFUSION_PNG = "confusion_matrix.png"


def confusion_matrix(predictions, labels, num_labels: int) -> np.ndarray:
    """counts[true, predicted]."""
    counts = np.zeros((num_labels, num_labels), np.int64)
    np.add.at(counts, (np.asarray(labels, np.int64), np.asarray(predictions, np.int64)), 1)
    return counts


def per_class(counts: np.ndarray) -> Dict[str, np.ndarray]:
    """precision, recall, f1 and support of every class from a confusion matrix."""
    true_positives = np.diag(counts).astype(np.float64)
    predicted, actual = counts.sum(axis=0), counts.sum(axis=1)
    precision = np.divide(true_positives, predicted, out=np.zeros_like(true_positives),
                          where=predicted > 0)
    recall = np.divide(true_positives, actual, out=np.zeros_like(true_positives),
                       where=actual > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)
    return {"precision": precision, "recall": recall, "f1": f1, "support": actual}


def classification_metrics(predictions, labels, class_names: Sequence[str], loss: float,
                           baseline_class: Optional[int] = None) -> Dict[str, float]:
    """Flat metrics of one evaluation: accuracy, macro-F1, per-class scores, the baseline.

    `baseline_class`: the commonest training label (default: the commonest label here)."""
    labels = np.asarray(labels, np.int64)
    counts = confusion_matrix(predictions, labels, len(class_names))
    scores = per_class(counts)
    if baseline_class is None:
        baseline_class = int(np.bincount(labels, minlength=len(class_names)).argmax())
    metrics = {"eval_accuracy": accuracy(predictions, labels), "eval_loss": loss,
               "macro_f1": float(scores["f1"].mean()),
               "baseline_accuracy": float(np.mean(labels == baseline_class))}
    for index, name in enumerate(class_names):
        for score in ("precision", "recall", "f1"):
            metrics[f"{score}_{name}"] = float(scores[score][index])
    return metrics


def label_set_counts(predictions, labels) -> Dict[str, np.ndarray]:
    """Per label of indicator matrices `[examples, labels]`: true positives, false positives,
    false negatives and support."""
    predictions = np.asarray(predictions, bool)
    labels = np.asarray(labels, bool)
    return {"tp": (predictions & labels).sum(axis=0), "fp": (predictions & ~labels).sum(axis=0),
            "fn": (~predictions & labels).sum(axis=0), "support": labels.sum(axis=0)}


def _f1_scores(tp, fp, fn):
    tp, fp, fn = (np.asarray(x, np.float64) for x in (tp, fp, fn))
    predicted, actual = tp + fp, tp + fn
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros_like(tp), where=actual > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)
    return precision, recall, f1


def multi_label_metrics(predictions, labels, class_names: Sequence[str], loss: float,
                        baseline_labels: Optional[Sequence[int]] = None) -> Dict[str, float]:
    """Flat metrics of one multi-label evaluation (`predictions`, `labels`: 0/1 matrices
    `[examples, labels]`): subset accuracy, micro- and macro-F1, per-label scores, and the
    same for the baseline label set (default: the labels more than half of these have)."""
    labels = np.asarray(labels, bool)
    predictions = np.asarray(predictions, bool)
    if baseline_labels is None:
        baseline_labels = np.flatnonzero(labels.mean(axis=0) > 0.5)
    baseline = np.zeros_like(labels)
    baseline[:, list(baseline_labels)] = True
    metrics = {"eval_loss": loss}
    for prefix, predicted in (("", predictions), ("baseline_", baseline)):
        counts = label_set_counts(predicted, labels)
        precision, recall, f1 = _f1_scores(counts["tp"], counts["fp"], counts["fn"])
        _, _, micro = _f1_scores(counts["tp"].sum(), counts["fp"].sum(), counts["fn"].sum())
        metrics[f"{prefix or 'eval_'}accuracy"] = float(np.mean(np.all(predicted == labels,
                                                                        axis=1)))
        metrics[f"{prefix}micro_f1"] = float(micro)
        metrics[f"{prefix}macro_f1"] = float(f1.mean())
        if not prefix:
            for index, name in enumerate(class_names):
                metrics[f"precision_{name}"] = float(precision[index])
                metrics[f"recall_{name}"] = float(recall[index])
                metrics[f"f1_{name}"] = float(f1[index])
    return metrics


def regression_metrics(predictions, labels, loss: float,
                       baseline_mean: Optional[float] = None) -> Dict[str, float]:
    """Pearson, Spearman, MSE and the MSE of predicting `baseline_mean` (the training
    labels' mean; default: these labels' mean)."""
    predictions = np.asarray(predictions, np.float64)
    labels = np.asarray(labels, np.float64)
    mean = float(labels.mean()) if baseline_mean is None else float(baseline_mean)
    return {"pearson": pearson(predictions, labels), "spearman": spearman(predictions, labels),
            "MSE": float(np.mean((predictions - labels) ** 2)),
            "baseline_MSE": float(np.mean((mean - labels) ** 2)), "eval_loss": loss}


def report(predictions, labels, class_names: Optional[Sequence[str]], loss: float,
           baseline=None) -> dict:
    """Everything about one evaluation, for eval_report.json."""
    if class_names is None:
        return {"task_type": "regression", "examples": int(len(labels)),
                "metrics": regression_metrics(predictions, labels, loss, baseline)}
    if np.ndim(labels) == 2:
        flat = multi_label_metrics(predictions, labels, class_names, loss, baseline)
        counts = label_set_counts(predictions, labels)
        scores = _f1_scores(counts["tp"], counts["fp"], counts["fn"])
        return {"task_type": "multi_label", "examples": int(len(labels)),
                "labels": list(class_names), "metrics": flat,
                "baseline_labels": [class_names[i] for i in
                                    (baseline if baseline is not None else
                                     np.flatnonzero(np.mean(labels, axis=0) > 0.5))],
                "per_label": {name: {"precision": float(scores[0][i]),
                                     "recall": float(scores[1][i]), "f1": float(scores[2][i]),
                                     **{key: int(counts[key][i])
                                        for key in ("tp", "fp", "fn", "support")}}
                              for i, name in enumerate(class_names)}}
    counts = confusion_matrix(predictions, labels, len(class_names))
    scores = per_class(counts)
    flat = classification_metrics(predictions, labels, class_names, loss, baseline)
    return {"task_type": "classification", "examples": int(len(labels)),
            "labels": list(class_names),
            "accuracy": flat["eval_accuracy"], "macro_f1": flat["macro_f1"],
            "baseline_accuracy": flat["baseline_accuracy"],
            "baseline_label": class_names[baseline if baseline is not None else
                                          int(np.bincount(np.asarray(labels, np.int64),
                                                          minlength=len(class_names)).argmax())],
            "eval_loss": loss,
            "per_class": {name: {"precision": float(scores["precision"][i]),
                                 "recall": float(scores["recall"][i]),
                                 "f1": float(scores["f1"][i]),
                                 "support": int(scores["support"][i])}
                          for i, name in enumerate(class_names)},
            "confusion_matrix": counts.tolist()}


def markdown(result: dict, checkpoint: str) -> str:
    """eval_report.md: the numbers beside their baselines, per-class table, confusion matrix."""
    lines = [f"# Evaluation of {checkpoint}", "", f"{result['examples']:,} examples.", ""]
    if result["task_type"] == "regression":
        metrics = result["metrics"]
        lines += ["| metric | value | baseline (the training labels' mean) |", "|---|---|---|",
                  f"| Pearson | {metrics['pearson']:.4f} | 0 |",
                  f"| Spearman | {metrics['spearman']:.4f} | 0 |",
                  f"| MSE | {metrics['MSE']:.4f} | {metrics['baseline_MSE']:.4f} |"]
        return "\n".join(lines) + "\n"
    if result["task_type"] == "multi_label":
        metrics = result["metrics"]
        shown = ", ".join(map(repr, result["baseline_labels"])) or "no label"
        lines += [f"| metric | value | baseline (always the labels most examples have: {shown}) |",
                  "|---|---|---|"]
        for name, key in (("subset accuracy", "accuracy"), ("micro-F1", "micro_f1"),
                          ("macro-F1", "macro_f1")):
            value = metrics["eval_accuracy" if key == "accuracy" else key]
            lines.append(f"| {name} | {value:.4f} | {metrics['baseline_' + key]:.4f} |")
        lines += ["", "| label | precision | recall | F1 | true positives | false positives | "
                  "false negatives | examples with it |", "|---|---|---|---|---|---|---|---|"]
        for name, scores in result["per_label"].items():
            lines.append(f"| {_cell(name)} | {scores['precision']:.4f} | {scores['recall']:.4f} "
                         f"| {scores['f1']:.4f} | {scores['tp']:,} | {scores['fp']:,} | "
                         f"{scores['fn']:,} | {scores['support']:,} |")
        return "\n".join(lines) + "\n"
    lines += ["| metric | value | baseline (always the commonest training label, "
              f"{result['baseline_label']!r}) |", "|---|---|---|",
              f"| accuracy | {result['accuracy']:.4f} | {result['baseline_accuracy']:.4f} |",
              f"| macro-F1 | {result['macro_f1']:.4f} | "
              f"{_baseline_macro_f1(result):.4f} |", "",
              "| label | precision | recall | F1 | examples |", "|---|---|---|---|---|"]
    for name, scores in result["per_class"].items():
        lines.append(f"| {_cell(name)} | {scores['precision']:.4f} | {scores['recall']:.4f} | "
                     f"{scores['f1']:.4f} | {scores['support']:,} |")
    names = result["labels"]
    lines += ["", "Confusion matrix (rows: true label, columns: predicted label):", "",
              "| true \\ predicted | " + " | ".join(_cell(n) for n in names) + " |",
              "|---|" + "---|" * len(names)]
    for name, row in zip(names, result["confusion_matrix"]):
        lines.append(f"| {_cell(name)} | " + " | ".join(f"{v:,}" for v in row) + " |")
    return "\n".join(lines) + "\n"


def _baseline_macro_f1(result: dict) -> float:
    """Macro-F1 of always answering the baseline label."""
    names = result["labels"]
    support = np.array([result["per_class"][n]["support"] for n in names], np.float64)
    index = names.index(result["baseline_label"])
    share = support[index] / support.sum()
    f1 = 2 * share / (share + 1) if support[index] else 0.0
    return f1 / len(names)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def write_report(output_dir: str, result: dict, checkpoint: str) -> List[str]:
    """eval_report.json, eval_report.md and (classification, with matplotlib installed)
    confusion_matrix.png in `output_dir`; returns the paths written."""
    written = [io.join(output_dir, REPORT_JSON), io.join(output_dir, REPORT_MARKDOWN)]
    io.write_json_atomically(written[0], dict(result, checkpoint=checkpoint))
    io.write_text_atomically(written[1], markdown(result, checkpoint))
    if result["task_type"] == "classification":
        picture = plot_confusion(result, io.join(output_dir, CONFUSION_PNG))
        if picture:
            written.append(picture)
    return written


def plot_confusion(result: dict, path: str) -> Optional[str]:
    try:
        import matplotlib  # optional dependency: matplotlib comes with the demo extra
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # (the same optional dependency)
    except ImportError:
        logger.info("matplotlib is not installed: no %s (the table is in %s)", CONFUSION_PNG,
                    REPORT_MARKDOWN)
        return None
    counts = np.asarray(result["confusion_matrix"])
    names = result["labels"]
    size = max(3.5, 0.5 * len(names) + 2)
    figure, axes = plt.subplots(figsize=(size, size))
    axes.imshow(counts, cmap="Blues")
    axes.set_xticks(range(len(names)), names, rotation=45, ha="right")
    axes.set_yticks(range(len(names)), names)
    axes.set_xlabel("predicted label")
    axes.set_ylabel("true label")
    axes.set_title(f"accuracy {result['accuracy']:.3f} (baseline {result['baseline_accuracy']:.3f})")
    threshold = counts.max() / 2 if counts.size else 0
    for (row, column), value in np.ndenumerate(counts):
        axes.text(column, row, f"{value}", ha="center", va="center",
                  color="white" if value > threshold else "black")
    figure.tight_layout()
    with io.atomic_output_file(path) as temporary:
        figure.savefig(temporary, format="png", dpi=100)
    plt.close(figure)
    return path
