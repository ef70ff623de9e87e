"""`CheckpointFormat`: what a checkpoint format module exports (see `registry`)."""

import dataclasses
from typing import Callable, Optional, Tuple

from albert.config import AlbertConfig


@dataclasses.dataclass(frozen=True)
class CheckpointFormat:
    """How one checkpoint format is recognised, read and written.

    Attributes:
      name: the flag value (`--input_format=<name>`).
      description: one line for help texts and docs.
      output_files: files `write` creates in its output directory.
      writes_albert_config: whether an `albert_config.json` is written beside them.
      detect: `path -> bool`, whether `path` holds a checkpoint of this format.
      read: `(path, config or None) -> (weights, config or None, source)`:
        canonical weights (original names; not yet checked against a config),
        the config the checkpoint carries (if any) and the resolved path.
      write: `(weights, config, output_dir, head) -> None`; weights are checked and
        hold the backbone and the head `head` (a key of `naming.HEADS`, or None).
      can_represent: `config -> None`, raises ConfigError if the format
        cannot hold this model.
      writes_tokenizer: whether `write` also takes `spm_model_file=` and stores
        the SentencePiece model with the weights.
    """

    name: str
    description: str
    output_files: Tuple[str, ...]
    writes_albert_config: bool
    detect: Callable[[str], bool]
    read: Callable[[str, Optional[AlbertConfig]], tuple]
    write: Callable[[dict, AlbertConfig, str, Optional[str]], None]
    can_represent: Callable[[AlbertConfig], None] = lambda config: None
    writes_tokenizer: bool = False
