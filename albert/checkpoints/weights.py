"""Canonical weights: `{original TF1 name: numpy array in the original layout}`.

Every format reader produces this dict and every writer consumes it;
`check_weights` is the single place that decides whether a checkpoint fits a
config. It never loads part of a model silently: missing, unexpected and
mis-shaped variables are all reported together in one error.
"""

import logging
from typing import Dict, Iterable, List

import keras
import numpy as np

from albert.checkpoints.naming import (PRETRAINING_HEAD, fine_tuning_head_names, is_training_state,
                                      weight_names)
from albert.config import AlbertConfig
from albert.errors import CheckpointMismatchError

logger = logging.getLogger("albert")

Weights = Dict[str, np.ndarray]
_LISTED = 8  # names shown per category in an error message


def _listing(title: str, items: List[str]) -> str:
    shown = items[:_LISTED]
    more = f"\n    ... and {len(items) - _LISTED} more" if len(items) > _LISTED else ""
    return f"  {title} ({len(items)}):\n" + "\n".join(f"    {item}" for item in shown) + more


def drop_non_model_variables(names: Iterable[str]) -> List[str]:
    """Names of a TF1 checkpoint left after removing training state and task heads.

    Optimizer slots (`adam_m`, `adam_v`) and `global_step` are never part of a
    model; fine-tuning heads (GLUE, RACE, SQuAD) are not part of a pretraining
    model and are logged as skipped.
    """
    names = [name for name in names if not is_training_state(name)]
    task_head_names = fine_tuning_head_names()
    task_heads = sorted(name for name in names if name in task_head_names)
    if task_heads:
        logger.info("Skipping %d fine-tuning head variables: %s", len(task_heads),
                    ", ".join(task_heads))
    return [name for name in names if name not in task_head_names]


def check_weights(weights: Weights, config: AlbertConfig, source: str,
                  heads: str = "optional") -> Weights:
    """Verifies that `weights` fit `config` exactly and returns them in table order.

    Args:
      weights: canonical dict from a reader.
      config: the model configuration the weights must fit.
      source: checkpoint path, for the error message.
      heads: "required" (a pretraining model needs MLM and SOP heads),
        "optional" (all head variables or none) or "ignore" (drop any heads).

    Raises:
      CheckpointMismatchError listing every missing, unexpected and mis-shaped
      variable.
    """
    table = weight_names(config, include_heads=True)
    head_names = [row.original for row in table if row.part == PRETRAINING_HEAD]
    present_heads = [name for name in head_names if name in weights]
    keep_heads = heads == "required" or (heads == "optional" and present_heads)
    expected = [row for row in table if row.part == "backbone" or keep_heads]
    expected_names = {row.original for row in expected}

    missing = [row.original for row in expected if row.original not in weights]
    unexpected = sorted(name for name in weights
                        if name not in expected_names and not (heads == "ignore" and name in head_names))
    misshaped = [
        f"{row.original}: checkpoint {list(np.shape(weights[row.original]))}, "
        f"config {list(row.shape)}"
        for row in expected
        if row.original in weights and tuple(np.shape(weights[row.original])) != row.shape
    ]
    if missing or unexpected or misshaped:
        parts = [f"Checkpoint {source} does not fit the config ({config.describe()}):"]
        if missing:
            parts.append(_listing("missing", missing))
        if unexpected:
            parts.append(_listing("unexpected", unexpected))
        if misshaped:
            parts.append(_listing("mis-shaped", misshaped))
        if heads == "optional" and missing and set(missing) <= set(head_names):
            parts.append("  (the checkpoint has only some of the MLM/SOP head variables)")
        raise CheckpointMismatchError("\n".join(parts))
    return {row.original: np.asarray(weights[row.original]) for row in expected}


def has_heads(weights: Weights) -> bool:
    return "cls/predictions/output_bias" in weights


# ------------------------------------------------------------ our Keras models
def _resolve(root, path: str):
    node = root
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def model_parts(model):
    """(encoder, pretrainer or None) for an AlbertEncoder or AlbertPretrainer."""
    from albert.modeling import AlbertEncoder, AlbertPretrainer

    if isinstance(model, AlbertPretrainer):
        return model.encoder, model
    if isinstance(model, AlbertEncoder):
        return model, None
    raise TypeError(f"Expected an AlbertEncoder or AlbertPretrainer, got {type(model).__name__}")


def model_variables(model) -> Dict[str, object]:
    """`{original name: Keras variable}` for an AlbertEncoder or AlbertPretrainer."""
    encoder, pretrainer = model_parts(model)
    rows = weight_names(encoder.albert_config, include_heads=pretrainer is not None)
    return {row.original: _resolve(pretrainer if row.is_head else encoder, row.ours)
            for row in rows}


def model_weights(model) -> Weights:
    """The canonical weights of one of our models (numpy copies)."""
    return {name: np.array(keras.ops.convert_to_numpy(variable))
            for name, variable in model_variables(model).items()}


def assign_model_weights(model, weights: Weights, source: str = "weights") -> None:
    """Loads canonical weights into one of our models, all or nothing.

    An encoder takes the backbone (heads in `weights` are ignored); a
    pretrainer needs the heads too.
    """
    encoder, pretrainer = model_parts(model)
    checked = check_weights(weights, encoder.albert_config, source,
                            heads="required" if pretrainer is not None else "ignore")
    for name, variable in model_variables(model).items():
        variable.assign(checked[name].astype(variable.dtype))


def as_float32(weights: Weights) -> Weights:
    return {name: np.asarray(value, dtype=np.float32) for name, value in weights.items()}
