"""Keras 3 ALBERT layers and models (backend-agnostic: `keras.ops` only)."""

from albert.modeling.attention import AlbertAttention, attention_bias_from_mask
from albert.modeling.classifier import AlbertClassifier, AlbertClassifierHead
from albert.modeling.embeddings import AlbertEmbeddings
from albert.modeling.encoder import AlbertEncoder
from albert.modeling.feed_forward import AlbertFeedForward
from albert.modeling.heads import AlbertMaskedLMHead, AlbertSentenceOrderHead
from albert.modeling.losses import (pretraining_losses, pretraining_metric_sums,
                                   pretraining_normalizers)
from albert.modeling.multiple_choice import AlbertMultipleChoice
from albert.modeling.pretrainer import AlbertPretrainer
from albert.modeling.sharing import SharingPlan, sharing_plan
from albert.modeling.squad import AlbertSquadV1, AlbertSquadV2, SquadV1Head, SquadV2Head
from albert.modeling.token_classifier import AlbertTokenClassifier

__all__ = [
    "AlbertAttention",
    "AlbertClassifier",
    "AlbertClassifierHead",
    "AlbertEmbeddings",
    "AlbertEncoder",
    "AlbertFeedForward",
    "AlbertMaskedLMHead",
    "AlbertMultipleChoice",
    "AlbertPretrainer",
    "AlbertSentenceOrderHead",
    "AlbertSquadV1",
    "AlbertSquadV2",
    "AlbertTokenClassifier",
    "SharingPlan",
    "SquadV1Head",
    "SquadV2Head",
    "attention_bias_from_mask",
    "pretraining_losses",
    "pretraining_metric_sums",
    "pretraining_normalizers",
    "sharing_plan",
]
