"""The one name table: our variables <-> original TF1 <-> Hugging Face <-> Model Garden.

Every converter and the parameter counter read this table; none of them spells
a variable name of its own. A row gives, for one variable:

* `original`: its name in the original TF1 checkpoints (SPEC §1.7, §1.8), the
  canonical name used everywhere in this package;
* `ours`: the attribute path of the Keras variable, from the `AlbertEncoder`
  (backbone rows) or the `AlbertPretrainer` (head rows);
* `shape`: its shape in the original layout;
* `hf`, `hf_transpose`: the `transformers` state-dict key
  (`AlbertForPreTraining` naming) and whether the array is transposed
  (PyTorch `nn.Linear` stores `[out, in]`);
* `model_garden`, `model_garden_shape`: the variable name in tf-models-official's
  `AlbertEncoder` and the shape it is reshaped to (its attention kernels are
  3-D: `[H, N, D]`, `[N, D]`, `[N, D, H]`).

A format that cannot hold a variable has `None` in its column (Hugging Face
cannot hold the per-layer copies of the partial sharing strategies; Model
Garden holds no heads).
"""

import dataclasses
import math
import re
from typing import Dict, List, Optional, Tuple

from albert.config import AlbertConfig
from albert.modeling.sharing import SubBlock, sharing_plan

# Template columns: original name, our attribute path, shape (symbols),
# HF key, HF transpose, Model Garden name, Model Garden shape (symbols).
# In block rows, {scope} / {layer_norm} are the sub-block's original scopes,
# {hf} is the HF prefix of its (group, inner group), {mg} is "transformer".
_EMBEDDING_ROWS = (
    ("bert/embeddings/word_embeddings", "embeddings.word_embeddings.embeddings", "V,E",
     "albert.embeddings.word_embeddings.weight", False, "word_embeddings/embeddings", None),
    ("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings.embeddings", "T,E",
     "albert.embeddings.token_type_embeddings.weight", False, "type_embeddings/embeddings", None),
    ("bert/embeddings/position_embeddings", "embeddings.position_embeddings", "P,E",
     "albert.embeddings.position_embeddings.weight", False, "position_embedding/embeddings", None),
    ("bert/embeddings/LayerNorm/beta", "embeddings.layer_norm.beta", "E",
     "albert.embeddings.LayerNorm.bias", False, "embeddings/layer_norm/beta", None),
    ("bert/embeddings/LayerNorm/gamma", "embeddings.layer_norm.gamma", "E",
     "albert.embeddings.LayerNorm.weight", False, "embeddings/layer_norm/gamma", None),
)
_PROJECTION_ROWS = (
    ("bert/encoder/embedding_hidden_mapping_in/kernel", "embedding_projection.kernel", "E,H",
     "albert.encoder.embedding_hidden_mapping_in.weight", True, "embedding_projection/kernel", None),
    ("bert/encoder/embedding_hidden_mapping_in/bias", "embedding_projection.bias", "H",
     "albert.encoder.embedding_hidden_mapping_in.bias", False, "embedding_projection/bias", None),
)
_ATTENTION_ROWS = (
    ("{scope}/self/query/kernel", "query.kernel", "H,H",
     "{hf}.attention.query.weight", True, "{mg}/self_attention/query/kernel", "H,N,D"),
    ("{scope}/self/query/bias", "query.bias", "H",
     "{hf}.attention.query.bias", False, "{mg}/self_attention/query/bias", "N,D"),
    ("{scope}/self/key/kernel", "key.kernel", "H,H",
     "{hf}.attention.key.weight", True, "{mg}/self_attention/key/kernel", "H,N,D"),
    ("{scope}/self/key/bias", "key.bias", "H",
     "{hf}.attention.key.bias", False, "{mg}/self_attention/key/bias", "N,D"),
    ("{scope}/self/value/kernel", "value.kernel", "H,H",
     "{hf}.attention.value.weight", True, "{mg}/self_attention/value/kernel", "H,N,D"),
    ("{scope}/self/value/bias", "value.bias", "H",
     "{hf}.attention.value.bias", False, "{mg}/self_attention/value/bias", "N,D"),
    ("{scope}/output/dense/kernel", "output_dense.kernel", "H,H",
     "{hf}.attention.dense.weight", True, "{mg}/self_attention/attention_output/kernel", "N,D,H"),
    ("{scope}/output/dense/bias", "output_dense.bias", "H",
     "{hf}.attention.dense.bias", False, "{mg}/self_attention/attention_output/bias", None),
    ("{layer_norm}/beta", "layer_norm.beta", "H",
     "{hf}.attention.LayerNorm.bias", False, "{mg}/self_attention_layer_norm/beta", None),
    ("{layer_norm}/gamma", "layer_norm.gamma", "H",
     "{hf}.attention.LayerNorm.weight", False, "{mg}/self_attention_layer_norm/gamma", None),
)
_FFN_ROWS = (
    ("{scope}/intermediate/dense/kernel", "intermediate.kernel", "H,I",
     "{hf}.ffn.weight", True, "{mg}/intermediate/kernel", None),
    ("{scope}/intermediate/dense/bias", "intermediate.bias", "I",
     "{hf}.ffn.bias", False, "{mg}/intermediate/bias", None),
    ("{scope}/intermediate/output/dense/kernel", "output_dense.kernel", "I,H",
     "{hf}.ffn_output.weight", True, "{mg}/output/kernel", None),
    ("{scope}/intermediate/output/dense/bias", "output_dense.bias", "H",
     "{hf}.ffn_output.bias", False, "{mg}/output/bias", None),
    ("{layer_norm}/beta", "layer_norm.beta", "H",
     "{hf}.full_layer_layer_norm.bias", False, "{mg}/output_layer_norm/beta", None),
    ("{layer_norm}/gamma", "layer_norm.gamma", "H",
     "{hf}.full_layer_layer_norm.weight", False, "{mg}/output_layer_norm/gamma", None),
)
_POOLER_ROWS = (
    ("bert/pooler/dense/kernel", "pooler.kernel", "H,H",
     "albert.pooler.weight", True, "pooler_transform/kernel", None),
    ("bert/pooler/dense/bias", "pooler.bias", "H",
     "albert.pooler.bias", False, "pooler_transform/bias", None),
)
# Head rows: `ours` paths are relative to the AlbertPretrainer.
_HEAD_ROWS = (
    ("cls/predictions/transform/dense/kernel", "masked_lm.dense.kernel", "H,E",
     "predictions.dense.weight", True, None, None),
    ("cls/predictions/transform/dense/bias", "masked_lm.dense.bias", "E",
     "predictions.dense.bias", False, None, None),
    ("cls/predictions/transform/LayerNorm/beta", "masked_lm.layer_norm.beta", "E",
     "predictions.LayerNorm.bias", False, None, None),
    ("cls/predictions/transform/LayerNorm/gamma", "masked_lm.layer_norm.gamma", "E",
     "predictions.LayerNorm.weight", False, None, None),
    ("cls/predictions/output_bias", "masked_lm.output_bias", "V",
     "predictions.bias", False, None, None),
    # Stored [2, H] in the original (not a dense kernel), which is already
    # PyTorch's [out, in]: no transpose.
    ("cls/seq_relationship/output_weights", "sentence_order.output_weights", "2,H",
     "sop_classifier.classifier.weight", False, None, None),
    ("cls/seq_relationship/output_bias", "sentence_order.output_bias", "2",
     "sop_classifier.classifier.bias", False, None, None),
)

# Variables of the original's fine-tuning heads (SPEC §1.7). A converter of
# pretraining checkpoints reports and skips them rather than failing.
TASK_HEAD_PATTERN = re.compile(
    r"^(output_weights|output_bias|cls/squad/.*|start_logits/.*|end_logits/.*|answer_class/.*)$")
# Training state that is never part of the model (SPEC §1.7), and the extra
# training state our own checkpoints keep (random-generator and loss-scale
# variables, under training_state/).
TRAINING_STATE_PATTERN = re.compile(r"(^global_step$|/adam_[mv]$|^training_state/)")


@dataclasses.dataclass(frozen=True)
class WeightName:
    original: str
    ours: str
    shape: Tuple[int, ...]
    part: str  # "backbone" or "heads"
    hf: Optional[str] = None
    hf_transpose: bool = False
    model_garden: Optional[str] = None
    model_garden_shape: Optional[Tuple[int, ...]] = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _dimensions(config: AlbertConfig) -> Dict[str, int]:
    return {
        "V": config.vocab_size,
        "E": config.embedding_size,
        "H": config.hidden_size,
        "I": config.intermediate_size,
        "P": config.max_position_embeddings,
        "T": config.type_vocab_size,
        "N": config.num_attention_heads,
        "D": config.attention_head_size,
        "2": 2,
    }


def _shape(symbols: Optional[str], dims: Dict[str, int]) -> Optional[Tuple[int, ...]]:
    if symbols is None:
        return None
    return tuple(dims[symbol] for symbol in symbols.split(","))


def _rows(templates, part, dims, ours_prefix="", fields=None, hf_available=True):
    fields = fields or {}
    rows = []
    for original, ours, shape, hf, hf_transpose, model_garden, mg_shape in templates:
        rows.append(WeightName(
            original=original.format(**fields),
            ours=ours_prefix + ours,
            shape=_shape(shape, dims),
            part=part,
            hf=hf.format(**fields) if hf is not None and hf_available else None,
            hf_transpose=hf_transpose,
            model_garden=model_garden.format(**fields) if model_garden is not None else None,
            model_garden_shape=_shape(mg_shape, dims),
        ))
    return rows


def _block_fields(block: SubBlock) -> dict:
    return {
        "scope": block.scope,
        "layer_norm": block.layer_norm,
        "hf": f"albert.encoder.albert_layer_groups.{block.group}.albert_layers.{block.inner}",
        "mg": "transformer",
    }


def weight_names(config: AlbertConfig, include_heads: bool = True,
                 include_pooler: bool = True) -> List[WeightName]:
    """All variables of the model `config` describes, in the original's order."""
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
    if include_heads:
        rows += _rows(_HEAD_ROWS, "heads", dims)
    return rows


def count_parameters(config: AlbertConfig, include_heads: bool = False,
                     include_pooler: bool = True) -> int:
    """Exact parameter count from the table's shapes; allocates nothing."""
    return sum(row.size for row in weight_names(config, include_heads, include_pooler))


def hf_projection_rows(config: AlbertConfig) -> List[WeightName]:
    """The E -> H projection rows even when E == H (HF always has the layer)."""
    return _rows(_PROJECTION_ROWS, "backbone", _dimensions(config))
