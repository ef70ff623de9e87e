"""Multiple choice (RACE) as a `Task` of the training loop, and its prediction files.

Loss: mean softmax cross-entropy over each example's options. Metrics:
`eval_accuracy` and `eval_loss` as the original, plus the accuracy of each
part of the evaluation set (RACE: `eval_accuracy_middle`,
`eval_accuracy_high`), which the original obtained only from separate runs.
"""

import dataclasses
from typing import Dict, List, Sequence, Tuple

import numpy as np

from albert import io
from albert.finetuning_data.race import RaceExample, RaceFeatures
from albert.modeling import AlbertMultipleChoice
from albert.tasks.finetuning import (CachedFeatureParser, FineTuningTask, bucketed_logits,
                                     cross_entropy, softmax)
from albert.training import degenerate
from albert.training.diagnostics import Diagnostics
from albert.training.run_directory import estimator_text

PREDICTIONS_FILE = "predictions.tsv"
PREDICT_RESULTS_FILE = "predict_results.txt"


def multiple_choice_metrics(logits: np.ndarray, labels: np.ndarray,
                            parts: Sequence[Tuple[str, int]] = ()) -> Dict[str, float]:
    """`eval_accuracy`, `eval_loss`, and `eval_accuracy_<part>` for consecutive parts.

    `parts` lists (name, number of examples) in the order the examples come.
    """
    labels = np.asarray(labels)
    correct = logits.argmax(axis=-1) == labels
    metrics = {"eval_accuracy": float(np.mean(correct)),
               "eval_loss": cross_entropy(logits, labels)}
    start = 0
    for name, count in parts:
        if count:
            metrics[f"eval_accuracy_{name}"] = float(np.mean(correct[start:start + count]))
        start += count
    return metrics


def stack_choice_features(features: List[RaceFeatures]) -> Dict[str, np.ndarray]:
    """Features converted in memory (e.g. the test set), shaped as the parser's."""
    return {"input_word_ids": np.array([f.input_ids for f in features], np.int32),
            "input_mask": np.array([f.input_mask for f in features], np.int32),
            "input_type_ids": np.array([f.segment_ids for f in features], np.int32),
            "label_ids": np.array([f.label_id for f in features], np.int32)}


@dataclasses.dataclass(kw_only=True)
class MultipleChoiceTask(FineTuningTask):
    """Fine-tuning on multiple-choice data in the RACE layout.

    Args:
      num_choices: options per example.
      eval_parts: (name, examples) of the consecutive parts of the dev cache
        (RACE: its levels), for per-part accuracy.
      The others are `FineTuningTask`'s (`head_dropout`: the original's
      `--dropout_prob`).
    """

    num_choices: int = 4
    eval_parts: Tuple[Tuple[str, int], ...] = ()
    best_metric = "eval_accuracy"

    def build_model(self):
        return AlbertMultipleChoice(self.config, self.num_choices, self.head_dropout)

    def parser(self) -> CachedFeatureParser:
        return CachedFeatureParser(self.max_seq_length, num_choices=self.num_choices)

    def losses(self, outputs, features, normalizers):
        return {"loss": self.softmax_loss(outputs["logits"], features["label_ids"], normalizers)}

    def evaluate(self, model, config, strategy=None):
        if self.eval_cache is None:
            return None
        features = self.eval_features()
        logits = bucketed_logits(model, features, config.eval_batch_size, config.jit_compile)
        metrics = multiple_choice_metrics(logits, features["label_ids"], self.eval_parts)
        # What the degenerate-run check reads (kept out of the journal's metrics).
        metrics.update(degenerate.answer_shares(logits.argmax(axis=-1), features["label_ids"]))
        return metrics

    def diagnostics(self, config, training):
        """Flags evaluations in which every question gets the same option."""
        return Diagnostics([degenerate.OneAnswer("option", self.best_metric)],
                           diagnostic_metrics=degenerate.ONE_ANSWER_METRICS)


def write_race_predictions(output_dir: str, examples: Sequence[RaceExample], logits: np.ndarray,
                           metrics: Dict[str, float], best: object) -> List[str]:
    """Writes predict_results.txt (the original's) and predictions.tsv.

    `predict_results.txt`: `***** Predict results *****`, then `key = value`
    per metric, then `best = <best dev value>`, as the original.
    `predictions.tsv`: a header `level article_id question_index prediction
    prob_A ...`, then one row per question in reading order.
    """
    probabilities = softmax(logits)
    letters = [chr(ord("A") + index) for index in range(probabilities.shape[1])]
    header = ["level", "article_id", "question_index", "prediction",
              *(f"prob_{letter}" for letter in letters)]
    rows = ["\t".join(header)]
    for example, row in zip(examples, probabilities):
        rows.append("\t".join([example.level, example.article_id, str(example.question_index),
                               letters[int(row.argmax())], *(str(float(p)) for p in row)]))
    results = ["***** Predict results *****", *(f"{key} = {estimator_text(value)}" for key, value
                                                in sorted(metrics.items())),
               f"best = {estimator_text(best)}"]
    written = race_prediction_files(output_dir)
    for path, lines in zip(written, (results, rows)):
        io.write_text_atomically(path, "\n".join(lines) + "\n")
    return written


def race_prediction_files(output_dir: str) -> List[str]:
    """predict_results.txt and predictions.tsv, in `output_dir`."""
    return [io.join(output_dir, name) for name in (PREDICT_RESULTS_FILE, PREDICTIONS_FILE)]
