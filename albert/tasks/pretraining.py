"""Masked-LM + sentence-order pretraining as a `Task` of the training loop (SPEC §5)."""

import dataclasses
import logging
import re
from typing import List, Optional

import numpy as np

from albert.checkpoints import assign_model_weights, read_checkpoint
from albert.checkpoints.group0 import group0_weights
from albert.config import AlbertConfig
from albert.data.inputs import DynamicMasking, check_record_files, pretraining_dataset
from albert.data.masking import MaskingConfig, MaskingVocabulary
from albert.errors import CheckpointMismatchError, InputError
from albert.modeling import (AlbertPretrainer, pretraining_losses, pretraining_metric_sums,
                             pretraining_normalizers)
from albert.training.loop import Task

logger = logging.getLogger("albert")

def _assign(model, weights, source) -> None:
    """Loads the backbone (all of it) and the heads when the checkpoint has them."""
    if "cls/predictions/output_bias" in weights:
        assign_model_weights(model, weights, source)
    else:
        assign_model_weights(model.encoder, weights, source)
        logger.warning("%s has no MLM/SOP heads: they start from random initialisation", source)


@dataclasses.dataclass
class PretrainingTask(Task):
    """Pretraining on create_pretraining_data TFRecords.

    Args:
      config: the model's `AlbertConfig`.
      input_files: training TFRecord files.
      eval_files: held-out TFRecord files (None: no evaluation).
      max_seq_length, max_predictions_per_seq: must match the data.
      seed: seeds the shuffles and dynamic masks.
      init_checkpoint: initial weights (any format `albert.checkpoints` reads).
      init_from_group0: initialise every group from the checkpoint's group_0.
      masked_lm_budget: > 0 draws new masks on the fly at this rate.
    """

    config: AlbertConfig
    input_files: List[str]
    eval_files: Optional[List[str]]
    max_seq_length: int
    max_predictions_per_seq: int
    seed: int = 12345
    shuffle_buffer_size: int = 100
    init_checkpoint: Optional[str] = None
    init_checkpoint_format: str = "auto"
    init_from_group0: bool = False
    masked_lm_budget: float = 0.0
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
        if self.max_seq_length > self.config.max_position_embeddings:
            raise InputError(f"--max_seq_length={self.max_seq_length} exceeds the config's "
                             f"max_position_embeddings={self.config.max_position_embeddings}")
        check_record_files(self.input_files, self.max_seq_length, self.max_predictions_per_seq)
        if self.eval_files:
            check_record_files(self.eval_files, self.max_seq_length, self.max_predictions_per_seq)
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

    def _dynamic_masking(self) -> Optional[DynamicMasking]:
        if self.masked_lm_budget <= 0:
            return None
        return DynamicMasking(
            MaskingConfig(masked_lm_prob=self.masked_lm_budget,
                          max_predictions_per_seq=self.max_predictions_per_seq),
            MaskingVocabulary(vocab_size=self.config.vocab_size, mask_id=ALBERT_SPECIAL_IDS["mask"],
                              cls_id=ALBERT_SPECIAL_IDS["cls"], sep_id=ALBERT_SPECIAL_IDS["sep"]),
            self.seed)

    def train_dataset(self, worker, worker_batch_size):
        return pretraining_dataset(
            self.input_files, self.max_seq_length, self.max_predictions_per_seq, worker_batch_size,
            is_training=True, seed=self.seed, shuffle_buffer_size=self.shuffle_buffer_size,
            dynamic_masking=self._dynamic_masking(), num_shards=worker.count,
            shard_index=worker.index)

    def eval_dataset(self, batch_size):
        if not self.eval_files:
            return None
        return pretraining_dataset(self.eval_files, self.max_seq_length,
                                   self.max_predictions_per_seq, batch_size, is_training=False)

    def loss_normalizers(self, features):
        return pretraining_normalizers(features)

    def losses(self, outputs, features, normalizers):
        return pretraining_losses(outputs, features, normalizers)

    def metric_sums(self, outputs, features):
        return pretraining_metric_sums(outputs, features)
