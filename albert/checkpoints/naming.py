"""The one name table: our variables <-> original TF1 <-> Hugging Face <-> Model Garden <-> KerasHub.

Every converter, the training checkpoints and the parameter counter read this
table; none of them spells a variable name of its own. A row gives, for one
variable:

* `original`: its name in the original TF1 checkpoints — the canonical name
  used everywhere in this package;
* `ours`: the attribute path of the Keras variable, from the `AlbertEncoder`
  (backbone rows) or from the model that owns the head (head rows: the
  `AlbertPretrainer`, or a fine-tuning task model);
* `shape`: its shape in the original layout;
* `hf`, `hf_transpose`: the `transformers` state-dict key and whether the
  array is transposed (PyTorch `nn.Linear` stores `[out, in]`);
* `model_garden`, `model_garden_shape`: the variable name in tf-models-official's
  `AlbertEncoder` and the shape it is reshaped to (its attention kernels are
  3-D: `[H, N, D]`, `[N, D]`, `[N, D, H]`);
* `keras_hub`, `keras_hub_shape`, `keras_hub_transpose`: the variable path in
  KerasHub's `AlbertBackbone` / `AlbertTextClassifier` / `AlbertMaskedLM`, the
  shape it is reshaped to and whether it is transposed (its classifier kernel
  is `[H, C]`, the original's `output_weights` `[C, H]`).

A format that cannot hold a variable has `None` in its column (Hugging Face
cannot hold the per-layer copies of the partial sharing strategies nor the
SQuAD v2 head; Model Garden's encoder holds no heads; KerasHub holds neither
those copies nor the sentence-order, RACE and SQuAD heads).

Heads are tables of rows in `HEADS`, keyed by name: the pretraining heads
(masked LM + sentence order) and the original's fine-tuning heads (GLUE
classifier, RACE multiple choice, SQuAD v1.1 and v2.0). A new head is a new
entry here, not new converter code. The original creates the fine-tuning
heads at the root scope (`output_weights`, `output_bias`) or under
`cls/squad`, `start_logits`, `end_logits`, `answer_class`.
"""

import dataclasses
import math
from typing import Dict, List, Optional, Tuple

from albert.config import AlbertConfig
from albert.modeling.sharing import SubBlock, sharing_plan

TRANSFORMER_SCOPE = "bert/encoder/transformer"


@dataclasses.dataclass(frozen=True)
class _Template:
    """One row with symbolic shapes and `{placeholders}` for block rows."""

    original: str
    ours: str
    shape: str
    hf: Optional[str] = None
    hf_transpose: bool = False
    model_garden: Optional[str] = None
    model_garden_shape: Optional[str] = None
    keras_hub: Optional[str] = None
    keras_hub_shape: Optional[str] = None
    keras_hub_transpose: bool = False


T = _Template

# Block rows: {scope} / {layer_norm} are the sub-block's original scopes,
# {hf} the HF prefix of its (group, inner group), {mg} Model Garden's block.
_EMBEDDING_ROWS = (
    T("bert/embeddings/word_embeddings", "embeddings.word_embeddings.embeddings", "V,E",
      "albert.embeddings.word_embeddings.weight", False, "word_embeddings/embeddings",
      keras_hub="token_embedding/embeddings"),
    T("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings.embeddings", "T,E",
      "albert.embeddings.token_type_embeddings.weight", False, "type_embeddings/embeddings",
      keras_hub="segment_embedding/embeddings"),
    T("bert/embeddings/position_embeddings", "embeddings.position_embeddings", "P,E",
      "albert.embeddings.position_embeddings.weight", False, "position_embedding/embeddings",
      keras_hub="position_embedding/embeddings"),
    T("bert/embeddings/LayerNorm/beta", "embeddings.layer_norm.beta", "E",
      "albert.embeddings.LayerNorm.bias", False, "embeddings/layer_norm/beta",
      keras_hub="embeddings_layer_norm/beta"),
    T("bert/embeddings/LayerNorm/gamma", "embeddings.layer_norm.gamma", "E",
      "albert.embeddings.LayerNorm.weight", False, "embeddings/layer_norm/gamma",
      keras_hub="embeddings_layer_norm/gamma"),
)
_PROJECTION_ROWS = (
    T("bert/encoder/embedding_hidden_mapping_in/kernel", "embedding_projection.kernel", "E,H",
      "albert.encoder.embedding_hidden_mapping_in.weight", True, "embedding_projection/kernel",
      keras_hub="embedding_projection/kernel"),
    T("bert/encoder/embedding_hidden_mapping_in/bias", "embedding_projection.bias", "H",
      "albert.encoder.embedding_hidden_mapping_in.bias", False, "embedding_projection/bias",
      keras_hub="embedding_projection/bias"),
)
_ATTENTION_ROWS = (
    T("{scope}/self/query/kernel", "query.kernel", "H,H",
      "{hf}.attention.query.weight", True, "{mg}/self_attention/query/kernel", "H,N,D",
      keras_hub="{kh}/self_attention_layer/query/kernel", keras_hub_shape="H,N,D"),
    T("{scope}/self/query/bias", "query.bias", "H",
      "{hf}.attention.query.bias", False, "{mg}/self_attention/query/bias", "N,D",
      keras_hub="{kh}/self_attention_layer/query/bias", keras_hub_shape="N,D"),
    T("{scope}/self/key/kernel", "key.kernel", "H,H",
      "{hf}.attention.key.weight", True, "{mg}/self_attention/key/kernel", "H,N,D",
      keras_hub="{kh}/self_attention_layer/key/kernel", keras_hub_shape="H,N,D"),
    T("{scope}/self/key/bias", "key.bias", "H",
      "{hf}.attention.key.bias", False, "{mg}/self_attention/key/bias", "N,D",
      keras_hub="{kh}/self_attention_layer/key/bias", keras_hub_shape="N,D"),
    T("{scope}/self/value/kernel", "value.kernel", "H,H",
      "{hf}.attention.value.weight", True, "{mg}/self_attention/value/kernel", "H,N,D",
      keras_hub="{kh}/self_attention_layer/value/kernel", keras_hub_shape="H,N,D"),
    T("{scope}/self/value/bias", "value.bias", "H",
      "{hf}.attention.value.bias", False, "{mg}/self_attention/value/bias", "N,D",
      keras_hub="{kh}/self_attention_layer/value/bias", keras_hub_shape="N,D"),
    T("{scope}/output/dense/kernel", "output_dense.kernel", "H,H",
      "{hf}.attention.dense.weight", True, "{mg}/self_attention/attention_output/kernel", "N,D,H",
      keras_hub="{kh}/self_attention_layer/attention_output/kernel", keras_hub_shape="N,D,H"),
    T("{scope}/output/dense/bias", "output_dense.bias", "H",
      "{hf}.attention.dense.bias", False, "{mg}/self_attention/attention_output/bias",
      keras_hub="{kh}/self_attention_layer/attention_output/bias"),
    T("{layer_norm}/beta", "layer_norm.beta", "H",
      "{hf}.attention.LayerNorm.bias", False, "{mg}/self_attention_layer_norm/beta",
      keras_hub="{kh}/self_attention_layer_norm/beta"),
    T("{layer_norm}/gamma", "layer_norm.gamma", "H",
      "{hf}.attention.LayerNorm.weight", False, "{mg}/self_attention_layer_norm/gamma",
      keras_hub="{kh}/self_attention_layer_norm/gamma"),
)
_FFN_ROWS = (
    T("{scope}/intermediate/dense/kernel", "intermediate.kernel", "H,I",
      "{hf}.ffn.weight", True, "{mg}/intermediate/kernel",
      keras_hub="{kh}/feedforward_intermediate_dense/kernel"),
    T("{scope}/intermediate/dense/bias", "intermediate.bias", "I",
      "{hf}.ffn.bias", False, "{mg}/intermediate/bias",
      keras_hub="{kh}/feedforward_intermediate_dense/bias"),
    T("{scope}/intermediate/output/dense/kernel", "output_dense.kernel", "I,H",
      "{hf}.ffn_output.weight", True, "{mg}/output/kernel",
      keras_hub="{kh}/feedforward_output_dense/kernel"),
    T("{scope}/intermediate/output/dense/bias", "output_dense.bias", "H",
      "{hf}.ffn_output.bias", False, "{mg}/output/bias",
      keras_hub="{kh}/feedforward_output_dense/bias"),
    T("{layer_norm}/beta", "layer_norm.beta", "H",
      "{hf}.full_layer_layer_norm.bias", False, "{mg}/output_layer_norm/beta",
      keras_hub="{kh}/feedforward_layer_norm/beta"),
    T("{layer_norm}/gamma", "layer_norm.gamma", "H",
      "{hf}.full_layer_layer_norm.weight", False, "{mg}/output_layer_norm/gamma",
      keras_hub="{kh}/feedforward_layer_norm/gamma"),
)
_POOLER_ROWS = (
    T("bert/pooler/dense/kernel", "pooler.kernel", "H,H", "albert.pooler.weight", True,
      "pooler_transform/kernel",
      keras_hub="pooled_dense/kernel"),
    T("bert/pooler/dense/bias", "pooler.bias", "H", "albert.pooler.bias", False,
      "pooler_transform/bias",
      keras_hub="pooled_dense/bias"),
)


@dataclasses.dataclass(frozen=True)
class HeadTable:
    """The variables of one head, and the Hugging Face architecture that holds it.

    `ours` paths are relative to the model owning the head; `dimensions`
    names task-given sizes (e.g. "C", the number of labels).
    """

    name: str
    rows: Tuple[_Template, ...]
    hf_architecture: Optional[str]
    dimensions: Tuple[str, ...] = ()
    # The keras_hub task model that holds the head (its rows without a
    # `keras_hub` name are left out of it), or None.
    keras_hub_task: Optional[str] = None


# Output weights of the original's heads are stored [out, H] (not dense
# kernels), which is already PyTorch's [out, in]: no transpose.
_CLASSIFIER_ROWS = (
    T("output_weights", "head.output_weights", "C,H", "classifier.weight",
      keras_hub="logits/kernel", keras_hub_transpose=True),
    T("output_bias", "head.output_bias", "C", "classifier.bias",
      keras_hub="logits/bias"),
)

HEADS: Dict[str, HeadTable] = {table.name: table for table in (
    HeadTable("pretraining", (
        T("cls/predictions/transform/dense/kernel", "masked_lm.dense.kernel", "H,E",
          "predictions.dense.weight", True,
      keras_hub="mlm_head/intermediate_dense/kernel"),
        T("cls/predictions/transform/dense/bias", "masked_lm.dense.bias", "E",
          "predictions.dense.bias",
      keras_hub="mlm_head/intermediate_dense/bias"),
        T("cls/predictions/transform/LayerNorm/beta", "masked_lm.layer_norm.beta", "E",
          "predictions.LayerNorm.bias",
      keras_hub="mlm_head/intermediate_layer_norm/beta"),
        T("cls/predictions/transform/LayerNorm/gamma", "masked_lm.layer_norm.gamma", "E",
          "predictions.LayerNorm.weight",
      keras_hub="mlm_head/intermediate_layer_norm/gamma"),
        T("cls/predictions/output_bias", "masked_lm.output_bias", "V", "predictions.bias",
      keras_hub="mlm_head/output_bias"),
        T("cls/seq_relationship/output_weights", "sentence_order.output_weights", "2,H",
          "sop_classifier.classifier.weight"),
        T("cls/seq_relationship/output_bias", "sentence_order.output_bias", "2",
          "sop_classifier.classifier.bias"),
    ), "AlbertForPreTraining", keras_hub_task="AlbertMaskedLM"),
    # GLUE: C = number of labels (1 for STS-B regression).
    HeadTable("classifier", _CLASSIFIER_ROWS, "AlbertForSequenceClassification", ("C",),
              keras_hub_task="AlbertTextClassifier"),
    # Word tagging: the GLUE classifier's variables, applied at every position.
    HeadTable("token_classifier", _CLASSIFIER_ROWS, "AlbertForTokenClassification", ("C",)),
    # RACE: the same variables with one output per option.
    HeadTable("multiple_choice", tuple(dataclasses.replace(row, shape=row.shape.replace("C", "1"))
                                       for row in _CLASSIFIER_ROWS), "AlbertForMultipleChoice"),
    HeadTable("squad_v1", (
        T("cls/squad/output_weights", "head.output_weights", "2,H", "qa_outputs.weight"),
        T("cls/squad/output_bias", "head.output_bias", "2", "qa_outputs.bias"),
    ), "AlbertForQuestionAnswering"),
    # XLNet-style start / end-given-start / answerability head: no HF equivalent.
    HeadTable("squad_v2", (
        T("start_logits/dense/kernel", "head.start_dense.kernel", "H,1"),
        T("start_logits/dense/bias", "head.start_dense.bias", "1"),
        T("end_logits/dense_0/kernel", "head.end_dense_0.kernel", "2H,H"),
        T("end_logits/dense_0/bias", "head.end_dense_0.bias", "H"),
        T("end_logits/LayerNorm/beta", "head.end_layer_norm.beta", "H"),
        T("end_logits/LayerNorm/gamma", "head.end_layer_norm.gamma", "H"),
        T("end_logits/dense_1/kernel", "head.end_dense_1.kernel", "H,1"),
        T("end_logits/dense_1/bias", "head.end_dense_1.bias", "1"),
        T("answer_class/dense_0/kernel", "head.answer_dense_0.kernel", "2H,H"),
        T("answer_class/dense_0/bias", "head.answer_dense_0.bias", "H"),
        T("answer_class/dense_1/kernel", "head.answer_dense_1.kernel", "H,1"),
    ), None),
)}
# The masked-LM half of the pretraining head alone: what a KerasHub AlbertMaskedLM holds.
HEADS["masked_lm"] = HeadTable("masked_lm", HEADS["pretraining"].rows[:5], None,
                               keras_hub_task="AlbertMaskedLM")
PRETRAINING_HEAD = "pretraining"
MASKED_LM_HEAD = "masked_lm"


@dataclasses.dataclass(frozen=True)
class WeightName:
    original: str
    ours: str
    shape: Tuple[int, ...]
    part: str  # "backbone" or the name of a head in HEADS
    hf: Optional[str] = None
    hf_transpose: bool = False
    model_garden: Optional[str] = None
    model_garden_shape: Optional[Tuple[int, ...]] = None
    keras_hub: Optional[str] = None
    keras_hub_shape: Optional[Tuple[int, ...]] = None
    keras_hub_transpose: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_head(self) -> bool:
        return self.part != "backbone"


def _dimensions(config: AlbertConfig, extra: Optional[Dict[str, int]] = None) -> Dict[str, int]:
    dims = {
        "V": config.vocab_size,
        "E": config.embedding_size,
        "H": config.hidden_size,
        "2H": 2 * config.hidden_size,
        "I": config.intermediate_size,
        "P": config.max_position_embeddings,
        "T": config.type_vocab_size,
        "N": config.num_attention_heads,
        "D": config.attention_head_size,
        "1": 1,
        "2": 2,
    }
    dims.update(extra or {})
    return dims


def _shape(symbols: Optional[str], dims: Dict[str, int]) -> Optional[Tuple[int, ...]]:
    if symbols is None:
        return None
    return tuple(dims[symbol] for symbol in symbols.split(","))


def _rows(templates, part, dims, ours_prefix="", fields=None, hf_available=True):
    """`hf_available`: whether the Hugging Face and KerasHub names apply (neither can hold the
    per-layer copies of the partial sharing strategies)."""
    fields = fields or {}
    rows = []
    for template in templates:
        hf = template.hf
        keras_hub = template.keras_hub
        rows.append(WeightName(
            original=template.original.format(**fields),
            ours=ours_prefix + template.ours,
            shape=_shape(template.shape, dims),
            part=part,
            hf=hf.format(**fields) if hf is not None and hf_available else None,
            hf_transpose=template.hf_transpose,
            model_garden=(template.model_garden.format(**fields)
                          if template.model_garden is not None else None),
            model_garden_shape=_shape(template.model_garden_shape, dims),
            keras_hub=(keras_hub.format(**fields) if keras_hub is not None and hf_available
                       else None),
            keras_hub_shape=_shape(template.keras_hub_shape, dims),
            keras_hub_transpose=template.keras_hub_transpose,
        ))
    return rows


def block_scopes(block: SubBlock) -> Tuple[str, str]:
    """(dense-layer scope, closing LayerNorm scope) of a sub-block, as the original names them.

    Shared blocks: `.../group_g/inner_group_k/attention_1` with `LayerNorm`,
    `.../ffn_1` with `LayerNorm_1`. Per-layer copies of the partial
    strategies (not in the original, which never built them) live under
    `group_0/inner_group_0/attention_{l+1}` or `ffn_{l+1}`, each with its own
    `LayerNorm`: layer 0's dense weights then coincide with the all-shared
    names, and the original's group-0 rewrite rules (`ffn_\\d+` -> `ffn_1`)
    initialise every copy from an all-shared checkpoint.
    """
    prefix = f"{TRANSFORMER_SCOPE}/group_{block.group}/inner_group_{block.inner}"
    if block.copy is not None:
        scope = f"{prefix}/{block.kind}_{block.copy + 1}"
        return scope, f"{scope}/LayerNorm"
    if block.kind == "attention":
        return f"{prefix}/attention_1", f"{prefix}/LayerNorm"
    return f"{prefix}/ffn_1", f"{prefix}/LayerNorm_1"


def _block_fields(block: SubBlock) -> dict:
    scope, layer_norm = block_scopes(block)
    return {
        "scope": scope,
        "layer_norm": layer_norm,
        "hf": f"albert.encoder.albert_layer_groups.{block.group}.albert_layers.{block.inner}",
        "mg": "transformer",
        "kh": f"group_{block.group}_inner_layer_{block.inner}",
    }


def backbone_names(config: AlbertConfig, include_pooler: bool = True) -> List[WeightName]:
    """The encoder's variables, in the original's order."""
    dims = _dimensions(config)
    plan = sharing_plan(config)
    rows = _rows(_EMBEDDING_ROWS, "backbone", dims)
    if config.embedding_size != config.hidden_size:
        rows += _rows(_PROJECTION_ROWS, "backbone", dims)
    for index, block in enumerate(plan.attention):
        rows += _rows(_ATTENTION_ROWS, "backbone", dims, f"attention_blocks.{index}.",
                      _block_fields(block), hf_available=block.copy is None)
    for index, block in enumerate(plan.ffn):
        rows += _rows(_FFN_ROWS, "backbone", dims, f"ffn_blocks.{index}.",
                      _block_fields(block), hf_available=block.copy is None)
    if include_pooler:
        rows += _rows(_POOLER_ROWS, "backbone", dims)
    return rows


def head_names(config: AlbertConfig, head: str, **dimensions: int) -> List[WeightName]:
    """The variables of head `head` (a key of HEADS); task sizes as keywords, e.g. C=3."""
    table = HEADS[head]
    missing = [d for d in table.dimensions if d not in dimensions]
    if missing:
        raise ValueError(f"head {head!r} needs the sizes {missing}")
    return _rows(table.rows, head, _dimensions(config, dimensions))


def weight_names(config: AlbertConfig, include_heads: bool = True,
                 include_pooler: bool = True) -> List[WeightName]:
    """The encoder's variables and, with `include_heads`, the pretraining heads'."""
    rows = backbone_names(config, include_pooler)
    if include_heads:
        rows += head_names(config, PRETRAINING_HEAD)
    return rows


def all_head_names() -> frozenset:
    """Original names of every head's variables (names do not depend on sizes)."""
    return frozenset(template.original for table in HEADS.values() for template in table.rows)


def hf_head_rows(config: AlbertConfig) -> List[WeightName]:
    """Rows of every head that Hugging Face can hold, for mapping its keys (sizes: 1)."""
    return [row for name, table in HEADS.items() if table.hf_architecture
            for row in head_names(config, name, **{d: 1 for d in table.dimensions})
            if row.hf is not None]


def count_parameters(config: AlbertConfig, include_heads: bool = False,
                     include_pooler: bool = True) -> int:
    """Exact parameter count from the table's shapes; allocates nothing."""
    return sum(row.size for row in weight_names(config, include_heads, include_pooler))


def hf_projection_rows(config: AlbertConfig) -> List[WeightName]:
    """The E -> H projection rows even when E == H (HF always has the layer)."""
    return _rows(_PROJECTION_ROWS, "backbone", _dimensions(config))


# What the original's training checkpoints hold besides the model: the global
# step and, for every trainable variable, the optimizer slots (both AdamW and
# LAMB name them adam_m / adam_v).
GLOBAL_STEP = "global_step"
OPTIMIZER_SLOTS = ("adam_m", "adam_v")


def slot_name(original: str, slot: str) -> str:
    return f"{original}/{slot}"


def is_training_state(name: str) -> bool:
    """True for `global_step` and optimizer slots, which are never model weights."""
    return name == GLOBAL_STEP or name.rsplit("/", 1)[-1] in OPTIMIZER_SLOTS
