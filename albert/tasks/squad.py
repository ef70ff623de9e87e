"""SQuAD v1.1 / v2.0 as a `Task` of the training loop: loss, and evaluation by decoding + scoring.

Training reads the training feature file (`albert.finetuning_data.squad`). Losses, as
the original:
- v1.1: `(CE(start) + CE(end)) / 2`, softmax over all positions;
- v2.0: `0.5·(CE(start) + CE(end)) + 0.5·sigmoid-CE(is_impossible, cls_logits)`,
  on the `p_mask`-masked log-probabilities.

Evaluation decodes the prediction windows (`albert.evaluation.squad_decoding`),
writes `predictions.json`, `nbest_predictions.json` (and `null_odds.json`),
and scores them with the official formulas: v1.1 `exact_match`, `f1`; v2.0
`exact`, `f1`, `total`, `null_score_diff_threshold`. Without a fixed
threshold, v2.0 tunes it on the evaluation data itself, as the original: a
first pass answers every question, the threshold with the best F1 on those
predictions is taken, and the questions are decoded again with it (so the
reported F1 is optimistic; pass `null_score_diff_threshold` for a fair test).
"""

import dataclasses
import logging
import time
from typing import ClassVar, Dict, Optional

import numpy as np
import tensorflow as tf

from albert.finetuning_data.squad import PredictFeatures
from albert.records.streams import RecordSource
from albert.evaluation import squad_decoding, squad_metrics
from albert.modeling import AlbertSquadV1, AlbertSquadV2
from albert.tasks.finetuning import (TOKEN_FEATURES, FineTuningTask, bucketed_outputs,
                                     record_lengths, trim_to_longest)
from albert.training import degenerate
from albert.training.diagnostics import Diagnostics
from albert.training.inputs import TaskInput

logger = logging.getLogger("albert")

V1_OUTPUTS = ("start_logits", "end_logits")
V2_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
              "cls_logits")


class SquadParser:
    """`parse(records, positions) -> features` for the training feature file."""

    def __init__(self, max_seq_length: int):
        self.spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
                     for name in (*TOKEN_FEATURES, "p_mask")}
        for name in ("unique_ids", "start_positions", "end_positions", "is_impossible"):
            self.spec[name] = tf.io.FixedLenFeature([], tf.int64)

    def __call__(self, records, positions) -> dict:
        parsed = tf.io.parse_example(records, self.spec)
        features = {model_name: tf.cast(parsed[name], tf.int32)
                    for name, model_name in TOKEN_FEATURES.items()}
        for name in ("p_mask", "start_positions", "end_positions", "is_impossible"):
            features[name] = tf.cast(parsed[name], tf.int32)
        return features


@dataclasses.dataclass
class SquadEvaluation:
    """What evaluation decodes and scores against."""

    predict: PredictFeatures
    dataset: list  # the predict file's "data"
    output_dir: str
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: Optional[float] = None
    #: cut prediction batches to their longest window (v1.1: padding positions then no
    #: longer compete for the n-best, unlike the original)
    bucket_v1: bool = False

    def __post_init__(self):
        self.inputs = self.predict.model_inputs()
        self.table = squad_decoding.WindowTable.from_features(
            self.predict.features, self.inputs["input_word_ids"].shape[1])

    @property
    def has_gold_answers(self) -> bool:
        return squad_metrics.has_gold_answers(self.dataset)


@dataclasses.dataclass(kw_only=True)
class SquadTask(FineTuningTask):
    """Fine-tuning on SQuAD v1.1 (`version_2=False`) or v2.0.

    Args:
      version_2: the v2.0 head, loss, decoding and scorer.
      start_n_top, end_n_top: the v2.0 inference beam.
      evaluation: prediction windows, gold data and decoding settings (None:
        no evaluation).
      The others are `FineTuningTask`'s (`head_dropout`: v2.0's `--dropout_prob`;
      v1.1 has no head dropout).
    """

    version_2: bool = False
    start_n_top: int = 5
    end_n_top: int = 5
    evaluation: Optional[SquadEvaluation] = dataclasses.field(default=None, repr=False)
    best_metric = "f1"
    #: eval_results.txt as the original SQuAD scripts write it
    eval_text_layout: ClassVar[str] = "squad"

    def build_model(self):
        if self.version_2:
            return AlbertSquadV2(self.config, self.start_n_top, self.end_n_top,
                                 self.head_dropout)
        return AlbertSquadV1(self.config)

    def train_input(self) -> TaskInput:
        return TaskInput(RecordSource((self.train_cache,), (self.train_records,)),
                         SquadParser(self.max_seq_length),
                         lengths=record_lengths(self.max_seq_length), trim=trim_to_longest)

    def eval_input(self):
        return None

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["input_word_ids"])[0], tf.float32)}

    def _position_loss(self, log_probs, positions, normalizers):
        picked = tf.gather(log_probs, positions, batch_dims=1)
        return -tf.reduce_sum(picked) / normalizers["examples"]

    def losses(self, outputs, features, normalizers):
        if self.version_2:
            start = self._position_loss(outputs["start_log_probs"], features["start_positions"],
                                        normalizers)
            end = self._position_loss(outputs["end_log_probs"], features["end_positions"],
                                      normalizers)
            answerable = tf.nn.sigmoid_cross_entropy_with_logits(
                labels=tf.cast(features["is_impossible"], tf.float32),
                logits=outputs["cls_logits"])
            return {"loss": 0.5 * (start + end)
                    + 0.5 * tf.reduce_sum(answerable) / normalizers["examples"]}
        start = self._position_loss(tf.nn.log_softmax(outputs["start_logits"]),
                                    features["start_positions"], normalizers)
        end = self._position_loss(tf.nn.log_softmax(outputs["end_logits"]),
                                  features["end_positions"], normalizers)
        return {"loss": 0.5 * (start + end)}

    # ---------------------------------------------------------- inference
    def raw_outputs(self, model, batch_size: int, jit_compile: bool = False
                    ) -> Dict[str, np.ndarray]:
        """The head's outputs for every prediction window (window order)."""
        evaluation = self.evaluation
        began = time.perf_counter()
        if self.version_2:
            outputs = bucketed_outputs(model, evaluation.inputs, batch_size, jit_compile,
                                       V2_OUTPUTS, extra_inputs=("p_mask",),
                                       min_length=max(self.start_n_top, self.end_n_top))
        else:
            outputs = bucketed_outputs(model, evaluation.inputs, batch_size, jit_compile,
                                       V1_OUTPUTS, trim=evaluation.bucket_v1,
                                       position_outputs=V1_OUTPUTS)
        seconds = time.perf_counter() - began
        logger.info("Ran the model on %d windows in %.1f s (%.1f windows/s)",
                    len(evaluation.inputs["input_mask"]), seconds,
                    len(evaluation.inputs["input_mask"]) / max(seconds, 1e-9))
        return outputs

    def decode(self, outputs: Dict[str, np.ndarray]) -> squad_decoding.Decoded:
        evaluation = self.evaluation
        if self.version_2:
            candidates = squad_decoding.v2_candidates(evaluation.table, outputs,
                                                      evaluation.max_answer_length)
            cls_logits = outputs["cls_logits"]
        else:
            candidates = squad_decoding.v1_candidates(
                evaluation.table, outputs["start_logits"], outputs["end_logits"],
                evaluation.n_best_size, evaluation.max_answer_length)
            cls_logits = None
        return squad_decoding.decode(evaluation.predict.examples, evaluation.table, candidates,
                                     evaluation.n_best_size, self.version_2, cls_logits)

    def predict_and_score(self, model, batch_size: int, jit_compile: bool = False
                          ) -> Optional[Dict[str, float]]:
        """Decodes every question, writes the prediction files, returns the scores (None
        when the predict file has no gold answers to score against)."""
        return self._predict_and_score(model, batch_size, jit_compile)[0]

    def _predict_and_score(self, model, batch_size: int, jit_compile: bool):
        """(scores or None, {question id: answer})."""
        evaluation = self.evaluation
        decoded = self.decode(self.raw_outputs(model, batch_size, jit_compile))
        scores, predictions = None, decoded.predictions(evaluation.null_score_diff_threshold)
        if self.version_2:
            threshold = evaluation.null_score_diff_threshold
            if threshold is None:
                # The original's two passes: tune the threshold on these questions.
                first = squad_metrics.evaluate_v2(evaluation.dataset, predictions,
                                                  decoded.null_scores)
                threshold = first["best_f1_thresh"]
                predictions = decoded.predictions(threshold)
            result = squad_metrics.evaluate_v2(evaluation.dataset, predictions,
                                               decoded.null_scores)
            scores = {"exact": result["exact"], "f1": result["f1"], "total": result["total"],
                      "null_score_diff_threshold": threshold}
        elif evaluation.has_gold_answers:
            scores = squad_metrics.evaluate_v1(evaluation.dataset, predictions,
                                               warn=logger.warning)
        squad_decoding.write_prediction_files(evaluation.output_dir, decoded, predictions)
        return scores, predictions

    def evaluate(self, model, config, strategy=None):
        if self.evaluation is None:
            return None
        scores, predictions = self._predict_and_score(model, config.eval_batch_size,
                                                      config.jit_compile)
        if scores is not None:
            # What the degenerate-run checks read (kept out of the journal's metrics).
            scores.update(degenerate.empty_share(predictions.values()))
        return scores

    def diagnostics(self, config, training):
        """Flags evaluations whose predictions are all empty, or whose training loss is no
        better than predicting answer positions without reading the text."""
        if training:
            return None  # the checks run after evaluations only
        checks = [degenerate.NoAnswers()]
        if self.train_cache is not None:
            checks.append(degenerate.ContentBlindLoss(
                self.blind_loss(), config.output_dir))
        return Diagnostics(checks, diagnostic_metrics=degenerate.SQUAD_METRICS)

    def blind_loss(self, max_records: int = 20000) -> float:
        """The training loss of a model that never reads the text, from the answer positions
        of the first `max_records` training windows (`degenerate.position_prior_loss`)."""
        names = ("start_positions", "end_positions", "is_impossible")
        spec = {name: tf.io.FixedLenFeature([], tf.int64) for name in names}
        dataset = tf.data.TFRecordDataset(self.train_cache).take(max_records).batch(1024).map(
            lambda records: tf.io.parse_example(records, spec))
        values = {name: [] for name in names}
        for batch in dataset:
            for name in names:
                values[name].extend(batch[name].numpy().tolist())
        if not values["start_positions"]:
            return float("nan")
        return degenerate.position_prior_loss(
            values["start_positions"], values["end_positions"],
            values["is_impossible"] if self.version_2 else None)
