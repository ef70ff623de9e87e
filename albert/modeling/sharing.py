"""Which parameters each transformer layer uses: groups, inner groups, sharing.

A `SharingPlan` lists the distinct attention and FFN sub-blocks a config
creates, the original variable scopes that name them, and, for every block
application, which sub-blocks it runs. The encoder builds its layers from the
plan and the checkpoint name table derives its names from it, so routing and
naming cannot drift apart.

Routing follows the original (SPEC §1.4): layer `l` uses group
`int(l / L * G)` and runs all `K` inner groups of it, so the encoder applies
`L * K` blocks. The paper's partial strategies (SPEC §1.6) share one sub-block
and give each layer `l` its own copy of the other, named `ffn_{l+1}` or
`attention_{l+1}` under `group_0/inner_group_0`.
"""

import dataclasses
import logging
from typing import Optional, Tuple

from albert.config import AlbertConfig

logger = logging.getLogger("albert")

TRANSFORMER_SCOPE = "bert/encoder/transformer"


@dataclasses.dataclass(frozen=True)
class SubBlock:
    """One distinct attention or FFN sub-block and its original names.

    Attributes:
      scope: variable scope of the sub-block's dense layers, e.g.
        `bert/encoder/transformer/group_0/inner_group_0/attention_1`.
      layer_norm: variable scope of the LayerNorm that closes the sub-block.
      group: original group index.
      inner: original inner-group index.
      copy: layer index `l` of a per-layer copy (partial strategies), else None.
    """

    scope: str
    layer_norm: str
    group: int
    inner: int
    copy: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class SharingPlan:
    attention: Tuple[SubBlock, ...]
    ffn: Tuple[SubBlock, ...]
    # One (attention index, ffn index) pair per block application, in order;
    # L * K entries.
    schedule: Tuple[Tuple[int, int], ...]


def _block_prefix(group: int, inner: int) -> str:
    return f"{TRANSFORMER_SCOPE}/group_{group}/inner_group_{inner}"


def _attention_block(group, inner, copy=None) -> SubBlock:
    prefix = _block_prefix(group, inner)
    if copy is None:
        return SubBlock(f"{prefix}/attention_1", f"{prefix}/LayerNorm", group, inner)
    scope = f"{prefix}/attention_{copy + 1}"
    return SubBlock(scope, f"{scope}/LayerNorm", group, inner, copy)


def _ffn_block(group, inner, copy=None) -> SubBlock:
    prefix = _block_prefix(group, inner)
    if copy is None:
        return SubBlock(f"{prefix}/ffn_1", f"{prefix}/LayerNorm_1", group, inner)
    scope = f"{prefix}/ffn_{copy + 1}"
    return SubBlock(scope, f"{scope}/LayerNorm", group, inner, copy)


def used_groups(config: AlbertConfig) -> Tuple[int, ...]:
    """Group indices the original actually creates, ascending."""
    return tuple(sorted({config.group_index(l) for l in range(config.num_hidden_layers)}))


def routing_differs_from_integer_rule(config: AlbertConfig) -> bool:
    """True when `int(l / L * G)` differs from `floor(l * G / L)` for some layer."""
    L, G = config.num_hidden_layers, config.num_hidden_groups
    return any(config.group_index(l) != l * G // L for l in range(L))


def sharing_plan(config: AlbertConfig) -> SharingPlan:
    L, K = config.num_hidden_layers, config.inner_group_num
    if config.sharing_strategy == "shared_attention":
        return SharingPlan(
            attention=(_attention_block(0, 0),),
            ffn=tuple(_ffn_block(0, 0, copy=l) for l in range(L)),
            schedule=tuple((0, l) for l in range(L)),
        )
    if config.sharing_strategy == "shared_ffn":
        return SharingPlan(
            attention=tuple(_attention_block(0, 0, copy=l) for l in range(L)),
            ffn=(_ffn_block(0, 0),),
            schedule=tuple((l, 0) for l in range(L)),
        )

    groups = used_groups(config)
    if routing_differs_from_integer_rule(config):
        logger.warning(
            "num_hidden_layers=%d, num_hidden_groups=%d: the original routing int(l / L * G) "
            "differs from floor(l * G / L) for some layers; following the original "
            "(groups used: %s).", L, config.num_hidden_groups, list(groups))
    position = {group: i for i, group in enumerate(groups)}
    attention = tuple(_attention_block(g, k) for g in groups for k in range(K))
    ffn = tuple(_ffn_block(g, k) for g in groups for k in range(K))
    schedule = []
    for layer in range(L):
        first = position[config.group_index(layer)] * K
        schedule.extend((first + k, first + k) for k in range(K))
    return SharingPlan(attention, ffn, tuple(schedule))
