"""GLUE fine-tuning as a `Task` of the training loop, and its prediction files.

Training and evaluation read the feature caches (`<task>_train.tf_record`,
`<task>_eval.tf_record`) the way every fine-tuning task does
(`albert.tasks.finetuning`); this module adds the classifier, its loss (mean
cross-entropy, or mean squared error for STS-B), the GLUE metrics and the
original's prediction files.
"""

import dataclasses
import logging
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert import io
from albert.finetuning_data.glue import GlueTask, InputFeatures
from albert.finetuning_data.labelled_files import FileTask
from albert.modeling import AlbertClassifier
from albert.tasks.finetuning import (CachedFeatureParser, FineTuningTask, bucketed_logits,
                                     cross_entropy, softmax)
from albert.training import degenerate
from albert.training.diagnostics import Diagnostics
from albert.training.run_directory import CONCATENATED

logger = logging.getLogger("albert")

def stack_features(features: List[InputFeatures], regression: bool) -> Dict[str, np.ndarray]:
    """Features converted in memory (e.g. the test set), in the cache's layout (`regression`:
    float labels, as multi-label's too)."""
    return {"input_word_ids": np.array([f.input_ids for f in features], np.int32),
            "input_mask": np.array([f.input_mask for f in features], np.int32),
            "input_type_ids": np.array([f.segment_ids for f in features], np.int32),
            "label_ids": np.array([f.label_id for f in features],
                                  np.float32 if regression else np.int32)}


def predictions_from_logits(logits: np.ndarray, regression: bool,
                            multi_label_threshold: Optional[float] = None):
    """(probabilities, predictions): softmax and arg-max, or the raw score for regression,
    or (multi-label, a threshold given) each label's sigmoid and whether it reaches the
    threshold (`[examples, labels]` of 0/1)."""
    if regression:
        return logits, logits[:, 0]
    if multi_label_threshold is not None:
        probabilities = sigmoid(logits)
        return probabilities, (probabilities >= multi_label_threshold).astype(np.int32)
    probabilities = softmax(logits)
    return probabilities, probabilities.argmax(axis=1)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(logits, np.float64))).astype(np.float32)


def classification_loss(logits: np.ndarray, labels: np.ndarray, regression: bool,
                        multi_label: bool = False) -> float:
    """Mean cross-entropy (or mean squared error for regression; for multi-label, each
    label's sigmoid cross-entropy averaged over labels and examples), in float64."""
    if regression:
        return float(np.mean((logits[:, 0].astype(np.float64) - labels) ** 2))
    if multi_label:
        x = logits.astype(np.float64)
        return float(np.mean(np.maximum(x, 0) - x * labels + np.log1p(np.exp(-np.abs(x)))))
    return cross_entropy(logits, labels)


@dataclasses.dataclass(kw_only=True)
class ClassificationTask(FineTuningTask):
    """Fine-tuning a classifier (or regressor) on a sentence or a pair.

    `glue_task` says what is predicted and how it is scored: one of the original's GLUE
    tasks (`albert.finetuning_data.glue.TASKS`) or a task read from a user's labelled files
    (`albert.finetuning_data.labelled_files.FileTask`); both give `labels`,
    `is_regression`, `num_labels`, `best_metric` and `metrics(...)`. The other arguments
    are `FineTuningTask`'s.
    """

    glue_task: "GlueTask | FileTask"

    @property
    def best_metric(self) -> str:
        return self.glue_task.best_metric

    def build_model(self):
        return AlbertClassifier(self.config, self.glue_task.num_labels, self.head_dropout)

    def parser(self) -> CachedFeatureParser:
        multi_label = self.glue_task.is_multi_label
        return CachedFeatureParser(self.max_seq_length,
                                   float_labels=self.glue_task.is_regression,
                                   label_width=self.glue_task.num_labels if multi_label else None)

    def losses(self, outputs, features, normalizers):
        logits = outputs["logits"]
        labels = features["label_ids"]
        if self.glue_task.is_regression:
            per_example = tf.square(logits[:, 0] - tf.cast(labels, tf.float32))
            return {"loss": tf.reduce_sum(per_example) / normalizers["examples"]}
        if self.glue_task.is_multi_label:
            # Each label an independent yes/no: sigmoid cross-entropy, averaged over labels.
            per_example = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
                labels=tf.cast(labels, tf.float32), logits=tf.cast(logits, tf.float32)), axis=-1)
            return {"loss": tf.reduce_sum(per_example) / normalizers["examples"]}
        return {"loss": self.softmax_loss(logits, labels, normalizers)}

    def evaluate(self, model, config, strategy=None):
        if self.eval_cache is None:
            return None
        task = self.glue_task
        features = self.eval_features()
        logits = bucketed_logits(model, features, config.eval_batch_size, config.jit_compile)
        _, predictions = predictions_from_logits(logits, task.is_regression,
                                                 task.multi_label_threshold)
        labels = features["label_ids"]
        metrics = task.metrics(predictions, labels, classification_loss(
            logits, labels, task.is_regression, task.is_multi_label))
        # What the degenerate-run checks read (kept out of the journal's metrics).
        if task.is_regression:
            metrics.update(degenerate.regression_spread(predictions, labels))
            # The original's STS-B evaluation also prints every prediction and label.
            metrics[CONCATENATED] = {"pred": predictions, "label_ids": labels}
        elif task.is_multi_label:
            metrics.update(degenerate.answer_shares(*label_set_codes(predictions, labels)))
        else:
            metrics.update(degenerate.answer_shares(predictions, labels))
        return metrics

    def diagnostics(self, config, training):
        """Flags evaluations whose predictions are all one class (or one label set, or
        constant for regression)."""
        if self.glue_task.is_regression:
            return Diagnostics([degenerate.ConstantRegression()],
                               diagnostic_metrics=degenerate.REGRESSION_METRICS)
        what = "label set" if self.glue_task.is_multi_label else "class"
        return Diagnostics([degenerate.OneAnswer(what, "eval_accuracy")],
                           diagnostic_metrics=degenerate.ONE_ANSWER_METRICS)


def label_set_codes(predictions: np.ndarray, labels: np.ndarray):
    """Multi-label indicator rows as one number each (the set's bits, label 0 the lowest), so
    that the one-answer check sees a label set as an answer."""
    weights = 2.0 ** np.arange(np.shape(predictions)[1])
    return (np.asarray(predictions, np.float64) @ weights,
            np.asarray(labels, np.float64) @ weights)


def write_predictions(output_dir: str, glue_task: GlueTask, guids: List[str],
                      probabilities: np.ndarray, predictions: np.ndarray) -> List[str]:
    """Writes the original's test_results.tsv and submit_results.tsv, and the GLUE server's file.

    `test_results.tsv`: one line per test example, the class probabilities
    (STS-B: the predicted score) separated by tabs, no header.
    `submit_results.tsv` and `<Task>.tsv` (the name the GLUE server expects,
    e.g. `SST-2.tsv`, `MNLI-m.tsv`, `AX.tsv`): a header `index<TAB>prediction`,
    then `<index><TAB><label>` per example.
    """
    results = "".join("\t".join(str(float(p)) for p in row) + "\n" for row in probabilities)
    if glue_task.is_regression:
        labels = [str(float(value)) for value in predictions]
    else:
        labels = [glue_task.labels[int(index)] for index in predictions]
    submission = "index\tprediction\n" + "".join(
        f"{guid}\t{label}\n" for guid, label in zip(guids, labels))
    written = prediction_files(output_dir, glue_task)
    for path, text in zip(written, (results, submission, submission)):
        io.write_text_atomically(path, text)
    return written


def prediction_files(output_dir: str, glue_task: GlueTask) -> List[str]:
    """test_results.tsv, submit_results.tsv and the GLUE server's file, in `output_dir`."""
    return [io.join(output_dir, name)
            for name in ("test_results.tsv", "submit_results.tsv", glue_task.server_file)]
