"""The checkpoint formats: one `CheckpointFormat` object per format module, one registry.

Every list of formats — the `--input_format` / `--output_format` flags,
auto-detection, dispatch, the README table (checked by a test) — comes from
`FORMATS`. Adding a format is one module exporting `FORMAT` and one line in
`_MODULES`.
"""

import functools
import importlib
from typing import Dict, List

from albert.checkpoints.format import CheckpointFormat
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError

# Registry order is detection order: file-suffix formats first, then the two
# kinds of TF checkpoint.
_MODULES = ("keras_format", "keras_hub_preset", "hf", "savedmodel", "model_garden", "tf1")


@functools.lru_cache(maxsize=None)
def formats() -> Dict[str, CheckpointFormat]:
    """{name: format}, loaded on first use (the format modules import TensorFlow)."""
    loaded = {}
    for module in _MODULES:
        fmt = importlib.import_module(f"albert.checkpoints.{module}").FORMAT
        loaded[fmt.name] = fmt
    return loaded


def format_names() -> List[str]:
    """Format names for flags and messages (the README's table lists the same, a test checks)."""
    return list(formats())


def get_format(name: str) -> CheckpointFormat:
    try:
        return formats()[name]
    except KeyError:
        raise InputError(f"Unknown checkpoint format {name!r}; expected one of "
                         f"{', '.join(format_names())}") from None


def detect_format(path: str) -> str:
    """The name of the format of the checkpoint at `path`."""
    for fmt in formats().values():
        if fmt.detect(path):
            return fmt.name
    raise InputError(f"No checkpoint found at {path} (looked for a .keras file, a KerasHub "
                     "preset, a Hugging Face model.safetensors, and a TensorFlow checkpoint "
                     "prefix or directory)")


def check_can_represent(fmt: CheckpointFormat, config: AlbertConfig) -> None:
    try:
        fmt.can_represent(config)
    except ConfigError as error:
        raise ConfigError(f"{fmt.name} format: {error}") from None
