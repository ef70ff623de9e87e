"""Which parameters each transformer layer uses: groups, inner groups, sharing strategies.

A `SharingPlan` lists the distinct attention and FFN sub-blocks a config
creates and, for every block application, which sub-blocks it runs. The
encoder builds its layers from the plan; the checkpoint name table
(`albert.checkpoints.naming`) derives the original variable names of the same
sub-blocks from it, so routing and naming cannot drift apart. This module
holds no names.

Routing follows the original: layer `l` uses group `group_of_layer(l, L, G)`
and runs all `K` inner groups of it, so the encoder applies `L * K` blocks.
The paper's partial strategies share one sub-block across all layers and give
each layer its own copy of the other.
"""

import dataclasses
import logging
from typing import Optional, Tuple

from albert.config import AlbertConfig

logger = logging.getLogger("albert")

ROUTING_RULES = ("original", "huggingface")


def group_of_layer(layer: int, num_layers: int, num_groups: int, rule: str = "original") -> int:
    """The parameter group layer `layer` uses — the one routing function of the package.

    "original": `int(layer / L * G)`, evaluated in double precision in this
    order, as the original does. For a few (L, G) it differs from
    `floor(layer * G / L)` (L = G = 22: layer 15 uses group 14, so `group_15`
    never exists); it is kept so variable names match the original's
    checkpoints. "huggingface": `int(layer / (L / G))`, what `transformers`
    computes (it differs again, e.g. L = 18, G = 14, layer 9 -> 6), used to
    decide whether a model can be exported there.
    """
    if rule == "original":
        return int(layer / num_layers * num_groups)
    if rule == "huggingface":
        return int(layer / (num_layers / num_groups))
    raise ValueError(f"Unknown routing rule {rule!r}; expected one of {ROUTING_RULES}")


def layer_groups(config: AlbertConfig, rule: str = "original") -> Tuple[int, ...]:
    """The group of every layer of `config`, in layer order."""
    return tuple(group_of_layer(layer, config.num_hidden_layers, config.num_hidden_groups, rule)
                 for layer in range(config.num_hidden_layers))


def used_groups(config: AlbertConfig) -> Tuple[int, ...]:
    """Group indices the original actually creates, ascending."""
    return tuple(sorted(set(layer_groups(config))))


def routing_differs_from_integer_rule(config: AlbertConfig) -> bool:
    """True when the original routing differs from `floor(l * G / L)` for some layer."""
    L, G = config.num_hidden_layers, config.num_hidden_groups
    return any(group != layer * G // L for layer, group in enumerate(layer_groups(config)))


@dataclasses.dataclass(frozen=True)
class SubBlock:
    """One distinct attention or FFN sub-block.

    Attributes:
      kind: "attention" or "ffn".
      group: original group index.
      inner: original inner-group index.
      copy: layer index `l` of a per-layer copy (partial strategies), else None.
    """

    kind: str
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


def sharing_plan(config: AlbertConfig) -> SharingPlan:
    L, K = config.num_hidden_layers, config.inner_group_num
    if config.sharing_strategy == "shared_attention":
        return SharingPlan(
            attention=(SubBlock("attention", 0, 0),),
            ffn=tuple(SubBlock("ffn", 0, 0, copy=layer) for layer in range(L)),
            schedule=tuple((0, layer) for layer in range(L)),
        )
    if config.sharing_strategy == "shared_ffn":
        return SharingPlan(
            attention=tuple(SubBlock("attention", 0, 0, copy=layer) for layer in range(L)),
            ffn=(SubBlock("ffn", 0, 0),),
            schedule=tuple((layer, 0) for layer in range(L)),
        )

    groups = used_groups(config)
    if routing_differs_from_integer_rule(config):
        logger.warning(
            "num_hidden_layers=%d, num_hidden_groups=%d: the original routing int(l / L * G) "
            "differs from floor(l * G / L) for some layers; following the original "
            "(groups used: %s).", L, config.num_hidden_groups, list(groups))
    position = {group: i for i, group in enumerate(groups)}
    attention = tuple(SubBlock("attention", g, k) for g in groups for k in range(K))
    ffn = tuple(SubBlock("ffn", g, k) for g in groups for k in range(K))
    schedule = []
    for group in layer_groups(config):
        first = position[group] * K
        schedule.extend((first + k, first + k) for k in range(K))
    return SharingPlan(attention, ffn, tuple(schedule))
