"""`AlbertConfig`: the original `albert_config.json`, read, validated and written.

The JSON format is the original's: every key of the file is copied onto the
config, unknown keys included (e.g. `net_structure_type`, `layers_to_keep`), and
written back sorted with a 2-space indent. Missing keys take the original
constructor defaults, which describe the xxlarge architecture.

Keys the model does not use but the released files carry
(`net_structure_type`, `gap_size`, `num_memory_blocks`, `layers_to_keep`)
are kept as they are. Any other key is almost always a typo
(`num_hiden_layers` would silently leave the default 12 layers), so it is
rejected with the nearest known key named; `allow_unknown_keys=True` (the
scripts' `--allow_unknown_config_keys`) keeps such keys for configs written
by other tools.

One key is ours: `sharing_strategy` selects the paper's Table 4 cross-layer
sharing strategies (docs/architecture.md). Absent, it means `"groups"`: the
original `num_hidden_groups` / `inner_group_num` semantics, where all-shared
is `G = 1` and not-shared is `G = L`. `"shared_attention"` and `"shared_ffn"`
share one sub-block across all layers and give every layer its own copy of
the other.
"""

import dataclasses
import difflib
import json
import math
from typing import Any, Optional

from albert import io
from albert.errors import ConfigError

# Keys of the released albert_config.json files that the model ignores.
ORIGINAL_EXTRA_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep")

SHARING_STRATEGIES = ("groups", "shared_attention", "shared_ffn")

# Activation names the original accepts (case-insensitive), mapped to the
# canonical name used inside the model. "gelu" is the tanh approximation in the
# original; Hugging Face calls that form "gelu_new", so both map to it.
_ACTIVATION_ALIASES = {
    "": "linear",
    "linear": "linear",
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu",
    "tanh": "tanh",
}


def canonical_activation(name: Optional[str]) -> str:
    """Returns the canonical activation name for a config's `hidden_act`."""
    if name is None:
        return "linear"
    if not isinstance(name, str):
        raise ConfigError(f"hidden_act must be a string, got {name!r}")
    try:
        return _ACTIVATION_ALIASES[name.lower()]
    except KeyError:
        known = ", ".join(repr(k) for k in _ACTIVATION_ALIASES if k)
        raise ConfigError(
            f"Unsupported activation hidden_act={name!r}; expected one of {known}"
        ) from None


_INT_KEYS = (
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "max_position_embeddings",
    "type_vocab_size",
)
_PROBABILITY_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


@dataclasses.dataclass(frozen=True)
class AlbertConfig:
    """Model configuration, one field per key of the original JSON file.

    Construct with keyword arguments, `from_dict` or `from_json_file`; derive
    variants with `dataclasses.replace` (which re-validates). Unknown JSON keys
    live in `extra` and are written back unchanged.

    Example:
        config = AlbertConfig.from_json_file("configs/albert_base_v2.json")
        deeper = dataclasses.replace(config, num_hidden_layers=24)
    """

    vocab_size: Optional[int] = None
    embedding_size: int = 128
    hidden_size: int = 4096
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    inner_group_num: int = 1
    down_scale_factor: int = 1
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    sharing_strategy: str = "groups"
    extra: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self._validate()

    # ----------------------------------------------------------------- JSON
    @classmethod
    def field_names(cls) -> tuple:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "extra")

    @classmethod
    def from_dict(cls, values: dict, allow_unknown_keys: bool = False) -> "AlbertConfig":
        if not isinstance(values, dict):
            raise ConfigError(f"An ALBERT config must be a JSON object, got {type(values).__name__}")
        names = cls.field_names()
        known = {k: v for k, v in values.items() if k in names}
        extra = {k: v for k, v in values.items() if k not in names}
        unknown = sorted(k for k in extra if k not in ORIGINAL_EXTRA_KEYS)
        if unknown and not allow_unknown_keys:
            raise ConfigError(_unknown_keys_message(unknown, names + ORIGINAL_EXTRA_KEYS))
        return cls(**known, extra=extra)

    @classmethod
    def from_json_string(cls, text: str, source: str = "<string>",
                         allow_unknown_keys: bool = False) -> "AlbertConfig":
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{source} is not valid JSON: {error}") from None
        try:
            return cls.from_dict(values, allow_unknown_keys=allow_unknown_keys)
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None

    @classmethod
    def from_json_file(cls, path: str, allow_unknown_keys: bool = False) -> "AlbertConfig":
        try:
            text = io.read_text(path)
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"Cannot read ALBERT config {path}: {_reason(error)}") from None
        return cls.from_json_string(text, source=path, allow_unknown_keys=allow_unknown_keys)

    def to_dict(self) -> dict:
        values = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("extra", "sharing_strategy")
        }
        # Our one added key is written only when it changes the model, so the
        # released configs round-trip unchanged.
        if self.sharing_strategy != "groups":
            values["sharing_strategy"] = self.sharing_strategy
        values.update(self.extra)
        return values

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str) -> None:
        """Writes the config atomically (gs:// and other TensorFlow file systems work)."""
        io.write_text_atomically(path, self.to_json_string())

    # ------------------------------------------------------------- derived
    @property
    def attention_head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def net_structure_type(self) -> int:
        # QUIRK: the original crashes when this key is missing; we default to 0.
        return self.extra.get("net_structure_type", 0)

    @property
    def activation(self) -> str:
        """Canonical activation name ("gelu" is the tanh approximation)."""
        return canonical_activation(self.hidden_act)

    # ----------------------------------------------------------- validation
    def _validate(self) -> None:
        if self.vocab_size is None:
            raise ConfigError("vocab_size is required")
        for key in ("vocab_size",) + _INT_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{key} must be a positive integer, got {value!r}")
        for key in _PROBABILITY_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"{key} must be a probability in [0, 1), got {value!r}")
        if (isinstance(self.initializer_range, bool)
                or not isinstance(self.initializer_range, (int, float))
                or not math.isfinite(self.initializer_range) or self.initializer_range <= 0):
            raise ConfigError(f"initializer_range must be a positive number, got {self.initializer_range!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) is not a multiple of "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(
                f"num_hidden_groups ({self.num_hidden_groups}) cannot exceed "
                f"num_hidden_layers ({self.num_hidden_layers})"
            )
        canonical_activation(self.hidden_act)
        if self.sharing_strategy not in SHARING_STRATEGIES:
            raise ConfigError(
                f"sharing_strategy must be one of {', '.join(SHARING_STRATEGIES)}; "
                f"got {self.sharing_strategy!r}"
            )
        if self.sharing_strategy != "groups" and (
            self.num_hidden_groups != 1 or self.inner_group_num != 1
        ):
            raise ConfigError(
                f"sharing_strategy={self.sharing_strategy!r} requires num_hidden_groups = 1 "
                f"and inner_group_num = 1 (got {self.num_hidden_groups} and {self.inner_group_num})"
            )
        if not isinstance(self.extra, dict):
            raise ConfigError("extra must be a dict of additional JSON keys")

    def describe(self) -> str:
        """One-line summary used in logs and error messages."""
        return (
            f"V={self.vocab_size} E={self.embedding_size} H={self.hidden_size} "
            f"L={self.num_hidden_layers} G={self.num_hidden_groups} K={self.inner_group_num} "
            f"N={self.num_attention_heads} I={self.intermediate_size} "
            f"P={self.max_position_embeddings} T={self.type_vocab_size} "
            f"sharing={self.sharing_strategy}"
        )


def _reason(error: Exception) -> str:
    return getattr(error, "strerror", None) or str(error)


def _unknown_keys_message(unknown, known) -> str:
    parts = []
    for key in unknown:
        nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        parts.append(f"{key!r}" + (f" (did you mean {nearest[0]!r}?)" if nearest else ""))
    return (f"unknown config key{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
            "fix the spelling, or pass --allow_unknown_config_keys to keep keys written by "
            "other tools")


def load_config(path_or_config: Any) -> AlbertConfig:
    """Accepts an `AlbertConfig`, a dict or a path to a JSON file."""
    if isinstance(path_or_config, AlbertConfig):
        return path_or_config
    if isinstance(path_or_config, dict):
        return AlbertConfig.from_dict(path_or_config)
    return AlbertConfig.from_json_file(path_or_config)
