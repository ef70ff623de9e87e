"""Masked-LM + sentence-order pretraining as a `Task` of the training loop."""

import dataclasses
import logging
from typing import Optional

import numpy as np
import tensorflow as tf

from albert.checkpoints import (ALBERT_CONFIG_FILE, assign_model_weights, find_head,
                                model_variables, read_checkpoint)
from albert.checkpoints.naming import MASKED_LM_HEAD, PRETRAINING_HEAD, head_names
from albert.checkpoints.group0 import group0_weights
from albert.config import AlbertConfig
from albert.errors import InputError
from albert.modeling import (AlbertPretrainer, pretraining_losses, pretraining_metric_sums,
                             pretraining_normalizers)
from albert.pretraining_data.inputs import DynamicMasking, PretrainingParser
from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary
from albert.pretraining_data.schema import MASKING_SETTINGS, DataContract
from albert.records.streams import RecordSource
from albert.training.diagnostics import (Diagnostics, OneLabelHead, UnigramPlateau,
                                         unigram_cross_entropy)
from albert.training.inputs import TaskInput
from albert.training.loop import Task

logger = logging.getLogger("albert")


def check_contract(contract: DataContract, config: AlbertConfig, what: str) -> None:
    """Refuses data the model cannot read: sequences too long, ids beyond the vocabulary."""
    if contract.max_seq_length > config.max_position_embeddings:
        raise InputError(f"The {what} data has max_seq_length={contract.max_seq_length}, more than "
                         f"the config's max_position_embeddings={config.max_position_embeddings}")
    largest = contract.max_token_id if contract.max_token_id is not None else (
        contract.vocab_size - 1 if contract.vocab_size is not None else None)
    if largest is not None and largest >= config.vocab_size:
        raise InputError(
            f"The {what} data holds token ids up to {largest} (its vocabulary has "
            f"{contract.vocab_size} pieces; {', '.join(contract.summaries) or 'data summary'}), "
            f"but the config's vocab_size is {config.vocab_size}; use the config of that "
            "vocabulary")


def warn_if_not_globally_shuffled(contract: DataContract) -> None:
    """Training reads records nearly in file order: say so when that order is not random."""
    files = contract.not_globally_shuffled
    if not files:
        return
    logger.warning(
        "%d of the %d training files (%s%s) are not known to hold globally shuffled records "
        "(their summary lacks \"shuffle\": \"global\", or they have none). Training shuffles "
        "only within --shuffle_buffer_size records (100 by default), so records in corpus order train in corpus order, one source "
        "after another. Remake them with this version of create_pretraining_data.py, which "
        "shuffles all records of the corpus as the original did.", len(files),
        len(contract.files), ", ".join(files[:3]), ", ..." if len(files) > 3 else "")


SENTENCE_DIAGNOSTIC_METRICS = ("sentence_order_predicted_one", "sentence_order_label_one")
# Masked tokens counted for the unigram loss: enough for a stable estimate, read in a second.
_UNIGRAM_SAMPLE_RECORDS = 20000

PLATEAU_ADVICE = (
    "Try a larger --learning_rate for this batch size, --num_warmup_steps of about a tenth of "
    "the steps, or more --num_train_steps; docs/pretraining.md lists what was measured on "
    "small hardware.")


def masked_token_counts(contract: DataContract, max_records: int = _UNIGRAM_SAMPLE_RECORDS):
    """How often each token id is a masked-LM target in the first `max_records` records."""
    spec = {"masked_lm_ids": tf.io.FixedLenFeature([contract.max_predictions_per_seq], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([contract.max_predictions_per_seq],
                                                       tf.float32)}
    dataset = tf.data.TFRecordDataset(list(contract.files)).take(max_records).batch(1024).map(
        lambda records: tf.io.parse_example(records, spec))
    counts = np.zeros(0, np.int64)
    for batch in dataset:
        ids = batch["masked_lm_ids"].numpy()[batch["masked_lm_weights"].numpy() > 0]
        found = np.bincount(ids)
        if len(found) > len(counts):
            counts = np.pad(counts, (0, len(found) - len(counts)))
        counts[:len(found)] += found
    return counts


def _assign(model, weights, source) -> None:
    """Loads the backbone (all of it) and the heads when the checkpoint has them."""
    head, _ = find_head(weights)
    if head == PRETRAINING_HEAD:
        assign_model_weights(model, weights, source)
    elif head == MASKED_LM_HEAD:
        # A masked LM alone (a KerasHub AlbertMaskedLM has no sentence-order head).
        assign_model_weights(model.encoder, weights, source)
        variables = model_variables(model)
        for row in head_names(model.encoder.albert_config, MASKED_LM_HEAD):
            variables[row.original].assign(weights[row.original])
        logger.warning("%s has no sentence-order head: it starts from random initialisation",
                       source)
    else:
        assign_model_weights(model.encoder, weights, source)
        logger.warning("%s has no MLM/SOP heads: they start from random initialisation", source)


@dataclasses.dataclass
class PretrainingTask(Task):
    """Pretraining on create_pretraining_data TFRecords.

    Args:
      config: the model's `AlbertConfig`.
      train_data: the training files' contract (`albert.pretraining_data.schema.load_data_contract`).
      eval_data: the held-out files' contract (None: no evaluation).
      seed: seeds the dynamic masks.
      init_checkpoint: initial weights (any format `albert.checkpoints` reads).
      init_from_group0: initialise every group from the checkpoint's group_0.
      masked_lm_budget: > 0 draws new masks on the fly at this rate.
      sentence_objective: False trains the masked LM alone (the sentence head
        is left untrained; its accuracy is still evaluated).
      plateau_window_steps: steps the masked-LM loss may stay at or above the
        unigram loss before a warning (0: a fifth of the run, at least 200).
    """

    config: AlbertConfig
    train_data: DataContract
    eval_data: Optional[DataContract] = None
    seed: int = 12345
    init_checkpoint: Optional[str] = None
    init_checkpoint_format: str = "auto"
    init_from_group0: bool = False
    masked_lm_budget: float = 0.0
    sentence_objective: bool = True
    plateau_window_steps: int = 0  # 0: a fifth of the run, at least 200 steps
    best_metric: str = "masked_lm_accuracy"
    loss_names: tuple = ("loss", "masked_lm_loss", "sentence_order_loss")
    _initial_weights: Optional[dict] = dataclasses.field(default=None, repr=False)

    def _load_initial_weights(self) -> dict:
        if self._initial_weights is None:
            if self.init_from_group0:
                self._initial_weights = group0_weights(self.config, self.init_checkpoint,
                                                       self.init_checkpoint_format)
            else:
                self._initial_weights, _ = read_checkpoint(
                    self.init_checkpoint, self.init_checkpoint_format, self.config, heads="optional")
        return self._initial_weights

    def check_inputs(self) -> None:
        """Everything that can be checked before a run writes anything."""
        check_contract(self.train_data, self.config, "training")
        warn_if_not_globally_shuffled(self.train_data)
        if self.eval_data is not None:
            check_contract(self.eval_data, self.config, "evaluation")
            for key in ("max_seq_length", "max_predictions_per_seq"):
                train, held_out = getattr(self.train_data, key), getattr(self.eval_data, key)
                if train != held_out:
                    raise InputError(f"The evaluation data has {key}={held_out}, the training "
                                     f"data {train}; make both with the same settings")
        if self.masked_lm_budget > 0:
            self._dynamic_masking()
        if self.init_from_group0 and self.init_checkpoint is None:
            raise InputError("--init_from_group0 needs --init_checkpoint")
        if self.init_checkpoint:
            self._load_initial_weights()  # a checkpoint that does not fit fails here

    def build_model(self):
        return AlbertPretrainer(self.config)

    def initialize(self, model) -> None:
        if not self.init_checkpoint:
            return
        weights = self._load_initial_weights()
        _assign(model, weights, self.init_checkpoint)
        self._initial_weights = None  # free the memory
        logger.info("Initialised %d variables from %s", len(weights), self.init_checkpoint)

    def run_files(self):
        return {ALBERT_CONFIG_FILE: self.config.to_json_string()}

    def data_order(self) -> dict:
        # Masks drawn on the fly are part of what step s reads: a resume must draw them alike,
        # by the same algorithm at the same rate.
        if self.masked_lm_budget <= 0:
            return {}
        return {"dynamic_masking": DynamicMasking.version,
                "masked_lm_budget": self.masked_lm_budget}

    def _dynamic_masking(self) -> Optional[DynamicMasking]:
        if self.masked_lm_budget <= 0:
            return None
        data = self.train_data
        if not data.has_token_boundary:
            raise InputError("--masked_lm_budget draws masks from token_boundary, which the "
                             "training records lack; make them with create_pretraining_data.py")
        if data.masking_conflict:
            raise InputError("--masked_lm_budget draws masks with the span settings the data "
                             f"was made with, and the input files disagree: "
                             f"{data.masking_conflict}")
        if data.special_ids is None or data.vocab_size is None:
            raise InputError("--masked_lm_budget needs the [CLS], [SEP] and [MASK] ids and the "
                             "vocabulary size from the data summary (<output>.summary.json of "
                             "create_pretraining_data.py), found beside none of the input files")
        return DynamicMasking(
            # The data's span settings (n-gram length, whole words), as its summary recorded.
            MaskingConfig(masked_lm_prob=self.masked_lm_budget,
                          max_predictions_per_seq=data.max_predictions_per_seq,
                          **{name: value for name, value in (data.masking or {}).items()
                             if name in MASKING_SETTINGS}),
            MaskingVocabulary(vocab_size=data.vocab_size, mask_id=data.special_ids.mask,
                              cls_id=data.special_ids.cls, sep_id=data.special_ids.sep),
            self.seed)

    def diagnostics(self, config, training: bool) -> Diagnostics:
        """The one-label check of the sentence head; in training also the unigram plateau."""
        checks = []
        if self.sentence_objective:
            checks.append(OneLabelHead("sentence_order", *SENTENCE_DIAGNOSTIC_METRICS,
                                       accuracy="sentence_order_accuracy"))
        if training:
            counts = masked_token_counts(self.train_data)
            unigram = unigram_cross_entropy(counts)
            window = self.plateau_window_steps or max(200, config.num_train_steps // 5)
            logger.info("Masked tokens of the first %d training records: %d; the best prediction "
                        "without context (token frequencies) has a loss of %.3f nats. A masked "
                        "LM that stays there for %d steps is reported as stuck.",
                        min(_UNIGRAM_SAMPLE_RECORDS, self.train_data.total_records),
                        int(counts.sum()), unigram, window)
            checks.append(UnigramPlateau(unigram, window, PLATEAU_ADVICE))
        return Diagnostics(checks, diagnostic_metrics=SENTENCE_DIAGNOSTIC_METRICS)

    def train_input(self) -> TaskInput:
        data = self.train_data
        return TaskInput(RecordSource(tuple(data.files), tuple(data.record_counts)),
                         PretrainingParser(data.schema, self._dynamic_masking()))

    def eval_input(self) -> Optional[TaskInput]:
        data = self.eval_data
        if data is None:
            return None
        return TaskInput(RecordSource(tuple(data.files), tuple(data.record_counts)),
                         PretrainingParser(data.schema))

    def loss_normalizers(self, features):
        return pretraining_normalizers(features)

    def losses(self, outputs, features, normalizers):
        return pretraining_losses(outputs, features, normalizers, self.sentence_objective)

    def metric_sums(self, outputs, features):
        return pretraining_metric_sums(outputs, features)

    def evaluate(self, model, config, strategy=None) -> Optional[dict]:
        """The metric sums' means, and `loss` as the original reports it beside them: the
        training objective, masked-LM loss plus (with the sentence objective) sentence-order
        loss. Here both are means over the evaluated batches (`max_eval_steps`); the
        original's is the mean over evaluation batches of each batch's total, which weighs
        masks by batch."""
        metrics = super().evaluate(model, config, strategy)
        if metrics and "masked_lm_loss" in metrics:
            metrics["loss"] = metrics["masked_lm_loss"] + (
                metrics["sentence_order_loss"] if self.sentence_objective else 0.0)
        return metrics
