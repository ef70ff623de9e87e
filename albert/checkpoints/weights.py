"""Canonical weights: `{original TF1 name: numpy array in the original layout}`.

Every format reader produces this dict and every writer consumes it;
`check_weights` is the single place that decides whether a checkpoint fits a
config and a head. It never loads part of a model silently: missing,
unexpected and mis-shaped variables are all reported together in one error.

Heads come from the name table (`naming.HEADS`). A checkpoint may carry any
of them; the variables of a head other than the one asked for are set aside
(logged), so a fine-tuned checkpoint initialises a pretraining run's
encoder and a pretraining checkpoint initialises a classifier's.
"""

import logging
from typing import Dict, Iterable, List, Optional, Tuple

import keras
import numpy as np

from albert.checkpoints.naming import (HEADS, MASKED_LM_HEAD, PRETRAINING_HEAD, all_head_names,
                                      hf_projection_rows,
                                       backbone_names, head_names, is_training_state)
from albert.config import AlbertConfig
from albert.errors import CheckpointMismatchError
from albert.modeling import AlbertEncoder

logger = logging.getLogger("albert")

Weights = Dict[str, np.ndarray]
_LISTED = 8  # names shown per category in an error message


def identity_projection(config: AlbertConfig, column: str) -> Dict[str, np.ndarray]:
    """{name in `column`: value} of the E -> H projection that formats with an always-present
    projection (HF, KerasHub) hold when E == H: the identity and a zero bias."""
    kernel, bias = hf_projection_rows(config)
    return {getattr(kernel, column): np.eye(config.hidden_size, dtype=np.float32),
            getattr(bias, column): np.zeros(config.hidden_size, dtype=np.float32)}


def pop_identity_projection(stored: dict, config: AlbertConfig, column: str, source: str) -> None:
    """Removes that projection from `stored` (names in `column`); refuses any other projection,
    which the original ALBERT (and this model) cannot hold when E == H."""
    kernel_row, bias_row = hf_projection_rows(config)
    kernel = stored.pop(getattr(kernel_row, column), None)
    bias = stored.pop(getattr(bias_row, column), None)
    if kernel is not None and not (np.array_equal(kernel, np.eye(config.hidden_size))
                                   and not np.any(bias)):
        raise CheckpointMismatchError(
            f"{source}: embedding_size == hidden_size but the embedding projection "
            f"({getattr(kernel_row, column)}) is not the identity; the original ALBERT (and "
            "this model) has no projection when E == H")


def _listing(title: str, items: List[str]) -> str:
    shown = items[:_LISTED]
    more = f"\n    ... and {len(items) - _LISTED} more" if len(items) > _LISTED else ""
    return f"  {title} ({len(items)}):\n" + "\n".join(f"    {item}" for item in shown) + more


def drop_non_model_variables(names: Iterable[str]) -> List[str]:
    """Names of a checkpoint without training state (optimizer slots, `global_step`)."""
    return [name for name in names if not is_training_state(name)]


# Heads that never read the pooled output and that Hugging Face saves without a pooler.
POOLER_FREE_HEADS = ("token_classifier",)


def find_head(weights: Weights, prefer: Optional[str] = None) -> Tuple[Optional[str], dict]:
    """(head name, its task sizes) of the head whose variables `weights` hold, or (None, {}).

    The GLUE classifier and RACE's multiple-choice head have the same
    variables; `prefer` picks between heads that fit equally.
    """
    candidates = [name for name, table in HEADS.items()
                  if all(row.original in weights for row in table.rows)]
    if not candidates:
        return None, {}
    head = prefer if prefer in candidates else candidates[0]
    dims = {}
    if "C" in HEADS[head].dimensions:
        dims["C"] = int(np.shape(weights["output_weights"])[0])
    return head, dims


def check_weights(weights: Weights, config: AlbertConfig, source: str,
                  heads: str = "optional", head: Optional[str] = PRETRAINING_HEAD,
                  head_dims: Optional[dict] = None) -> Weights:
    """Verifies that `weights` fit `config` (and `head`) exactly; returns them in table order.

    Args:
      weights: canonical dict from a reader.
      config: the model configuration the weights must fit.
      source: checkpoint path, for the error message.
      heads: for `head`: "required", "optional" (all of its variables or none)
        or "ignore" (set aside).
      head: the head of interest (a key of `naming.HEADS`), or None.
      head_dims: its task sizes, e.g. {"C": 3}; read from the weights if omitted.

    Raises:
      CheckpointMismatchError listing every missing, unexpected and mis-shaped
      variable.
    """
    if head == PRETRAINING_HEAD and heads == "optional" and find_head(weights)[0] == MASKED_LM_HEAD:
        # The masked LM alone (a KerasHub AlbertMaskedLM): the pretraining head's first half.
        head = MASKED_LM_HEAD
    if head is not None and head_dims is None:
        found, dims = find_head(weights, prefer=head)
        head_dims = dims if found == head else {"C": 1} if "C" in HEADS[head].dimensions else {}
    table = backbone_names(config)
    head_table = head_names(config, head, **(head_dims or {})) if head is not None else []
    present = [row.original for row in head_table if row.original in weights]
    keep_head = heads == "required" or (heads == "optional" and present)
    expected = table + (head_table if keep_head else [])
    expected_names = {row.original for row in expected}
    other_heads = all_head_names() - expected_names

    set_aside = sorted(name for name in weights if name in other_heads)
    if set_aside:
        logger.info("Setting aside %d head variables not used here: %s", len(set_aside),
                    ", ".join(set_aside[:8]) + (" ..." if len(set_aside) > 8 else ""))
    pooler = [row for row in table if row.ours.startswith("pooler.")]
    if keep_head and head in POOLER_FREE_HEADS and not any(r.original in weights for r in pooler):
        # Hugging Face builds its token-classification model without the pooler, which the
        # head never reads: it starts at zeros, said here.
        logger.info("%s has no pooler (a Hugging Face %s): it starts at zeros; the %s head "
                    "does not read it", source, HEADS[head].hf_architecture, head)
        weights = dict(weights, **{row.original: np.zeros(row.shape, np.float32)
                                   for row in pooler})
    missing = [row.original for row in expected if row.original not in weights]
    unexpected = sorted(name for name in weights
                        if name not in expected_names and name not in other_heads)
    misshaped = [
        f"{row.original}: checkpoint {list(np.shape(weights[row.original]))}, "
        f"config {list(row.shape)}"
        for row in expected
        if row.original in weights and tuple(np.shape(weights[row.original])) != row.shape
    ]
    if missing or unexpected or misshaped:
        parts = [f"Checkpoint {source} does not fit the config ({config.describe()}"
                 + (f", head {head} {head_dims or ''}".rstrip() if keep_head else "") + "):"]
        if missing:
            parts.append(_listing("missing", missing))
        if unexpected:
            parts.append(_listing("unexpected", unexpected))
        if misshaped:
            parts.append(_listing("mis-shaped", misshaped))
        if heads == "optional" and missing and set(missing) <= {r.original for r in head_table}:
            label = "MLM/SOP" if head == PRETRAINING_HEAD else head
            parts.append(f"  (the checkpoint has only some of the {label} head variables)")
        raise CheckpointMismatchError("\n".join(parts))
    return {row.original: np.asarray(weights[row.original]) for row in expected}


def has_heads(weights: Weights) -> bool:
    """Whether `weights` hold the pretraining (MLM + SOP) heads."""
    return "cls/predictions/output_bias" in weights


# ------------------------------------------------------------ our Keras models
def _resolve(root, path: str):
    node = root
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def model_parts(model):
    """(encoder, owner of the head or None, head name or None, head sizes) of one of our models.

    Models with a head have an `encoder` attribute, a `head_name` (a key of
    `naming.HEADS`) and `head_dimensions()`.
    """
    if isinstance(model, AlbertEncoder):
        return model, None, None, {}
    if isinstance(getattr(model, "encoder", None), AlbertEncoder) and hasattr(model, "head_name"):
        return model.encoder, model, model.head_name, model.head_dimensions()
    raise TypeError(f"Expected one of the package's ALBERT models, got {type(model).__name__}")


def model_variables(model) -> Dict[str, object]:
    """`{original name: Keras variable}` for one of our models."""
    encoder, owner, head, dims = model_parts(model)
    config = encoder.albert_config
    variables = {row.original: _resolve(encoder, row.ours) for row in backbone_names(config)}
    if head is not None:
        variables.update({row.original: _resolve(owner, row.ours)
                          for row in head_names(config, head, **dims)})
    return variables


def model_weights(model) -> Weights:
    """The canonical weights of one of our models (numpy copies)."""
    return {name: np.array(keras.ops.convert_to_numpy(variable))
            for name, variable in model_variables(model).items()}


def assign_model_weights(model, weights: Weights, source: str = "weights") -> None:
    """Loads canonical weights into one of our models, all or nothing.

    An encoder takes the backbone (heads in `weights` are set aside); a
    model with a head needs that head's variables too.
    """
    encoder, owner, head, dims = model_parts(model)
    checked = check_weights(weights, encoder.albert_config, source,
                            heads="required" if head is not None else "ignore",
                            head=head, head_dims=dims)
    for name, variable in model_variables(model).items():
        variable.assign(checked[name].astype(variable.dtype))


def as_float32(weights: Weights) -> Weights:
    return {name: np.asarray(value, dtype=np.float32) for name, value in weights.items()}
