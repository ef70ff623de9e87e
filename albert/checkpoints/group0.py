"""`--init_from_group0`: start every group (and per-layer copy) from a checkpoint's group 0.

Used to warm-start a model with more groups, or with the paper's partial
sharing strategies, from a shallower or all-shared checkpoint (the paper's
warm-started depth experiments). A variable missing from the checkpoint by
exact name is looked up under the original's rewrites, tried cumulatively in
this order: `/group_N/` -> `/group_0/`, `/ffn_N/` -> `/ffn_1/`,
`/attention_N/` -> `/attention_1/`; two more rewrites map the LayerNorms of
per-layer copies (`ffn_N/LayerNorm`, `attention_N/LayerNorm`) to the
all-shared `LayerNorm_1` / `LayerNorm`.

FIX: the original partitioned the matches into one map per group by substring
tests; because every block lives under `attention_1` / `ffn_1`, entries
collided and some groups' weights were silently left uninitialised while
being reported as loaded. Here every model variable gets a source or the
load fails, and the log says how many came through a rewrite.

Works for checkpoints of every registered format: they are first read into
canonical (original) names.
"""

import logging
import re
from typing import Dict, List

import numpy as np

from albert.checkpoints import detect_format, read_weights
from albert.checkpoints.model_garden import model_garden_source_config
from albert.checkpoints.naming import PRETRAINING_HEAD, weight_names
from albert.config import AlbertConfig
from albert.errors import CheckpointMismatchError

logger = logging.getLogger("albert")

_GROUP0_REWRITES = (
    (re.compile(r"/group_\d+/"), "/group_0/"),
    (re.compile(r"/ffn_\d+/"), "/ffn_1/"),
    (re.compile(r"/attention_\d+/"), "/attention_1/"),
    (re.compile(r"/ffn_1/LayerNorm/"), "/LayerNorm_1/"),
    (re.compile(r"/attention_1/LayerNorm/"), "/LayerNorm/"),
)


def group0_candidates(name: str) -> List[str]:
    """Names to try, in order, for a variable missing from the checkpoint."""
    candidates, current = [], name
    for pattern, replacement in _GROUP0_REWRITES:
        rewritten = pattern.sub(replacement, current)
        if rewritten != current:
            candidates.append(rewritten)
            current = rewritten
    return candidates


def _source_config(config: AlbertConfig, input_format: str) -> AlbertConfig:
    if input_format == "model_garden":
        return model_garden_source_config(config)
    return config


def group0_weights(config: AlbertConfig, path: str, input_format: str = "auto") -> Dict[str, np.ndarray]:
    """{model variable: value} for `config`, every group started from the checkpoint's group 0.

    The pretraining heads are included when the checkpoint has all of them.
    """
    name = detect_format(path) if input_format == "auto" else input_format
    weights, _, source = read_weights(path, name, _source_config(config, name))
    sources, missing, misshaped = {}, [], []
    for row in weight_names(config, include_heads=True):
        found = row.original if row.original in weights else next(
            (c for c in group0_candidates(row.original) if c in weights), None)
        if found is None:
            if not row.is_head:
                missing.append(row.original)
            continue
        if tuple(np.shape(weights[found])) != row.shape:
            misshaped.append(f"{row.original} <- {found}: {list(np.shape(weights[found]))}, "
                             f"expected {list(row.shape)}")
        sources[row.original] = found
    if missing or misshaped:
        raise CheckpointMismatchError(
            f"--init_from_group0: {source} cannot initialise the model ({config.describe()}): "
            + (f"no source for {', '.join(missing[:8])}" if missing else "")
            + (f" mis-shaped: {'; '.join(misshaped[:8])}" if misshaped else ""))
    head_rows = [row.original for row in weight_names(config) if row.part == PRETRAINING_HEAD]
    if not all(name in sources for name in head_rows):
        for name in head_rows:
            sources.pop(name, None)
    rewritten = sum(1 for name, found in sources.items() if name != found)
    logger.info("init_from_group0: %d variables from %s (%d through group_0 rewrites)",
                len(sources), source, rewritten)
    return {name: np.asarray(weights[found], dtype=np.float32) for name, found in sources.items()}
