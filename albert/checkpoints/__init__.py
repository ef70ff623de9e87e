"""Checkpoint interop: original TF1, Hugging Face, Model Garden, Keras and KerasHub formats.

`read_checkpoint` turns a checkpoint of any registered format into canonical
weights (original TF1 names and layouts) checked against a config;
`write_checkpoint` writes canonical weights in any format. Names come from one
table (`albert.checkpoints.naming`), formats from one registry
(`albert.checkpoints.registry`).
"""

import logging
from typing import List, Optional, Tuple

from albert import io
from albert.checkpoints.damage import reading
from albert.checkpoints.naming import PRETRAINING_HEAD
from albert.checkpoints.registry import (check_can_represent, detect_format, format_names, formats,
                                         get_format)
from albert.checkpoints.weights import (Weights, as_float32, assign_model_weights, check_weights,
                                        find_head, has_heads, model_parts, model_variables,
                                        model_weights)
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError

logger = logging.getLogger("albert")

ALBERT_CONFIG_FILE = "albert_config.json"


def read_weights(path: str, input_format: str = "auto",
                 config: Optional[AlbertConfig] = None) -> Tuple[Weights, Optional[AlbertConfig], str]:
    """Canonical weights of any checkpoint, unchecked: (weights, carried config, source).

    `config` is needed only by formats that carry none (Model Garden).
    """
    name = detect_format(path) if input_format == "auto" else input_format
    fmt = get_format(name)
    with reading(path, f"The {name} checkpoint"):
        return fmt.read(path, config)


def carried_config(path: str, input_format: str = "auto") -> Optional[AlbertConfig]:
    """The config a checkpoint carries (hf, keras, keras_hub, our exports), or None."""
    return read_weights(path, input_format)[1]


def read_checkpoint(path: str, input_format: str, config: Optional[AlbertConfig] = None,
                    heads: str = "optional", head: Optional[str] = PRETRAINING_HEAD,
                    head_dims: Optional[dict] = None) -> Tuple[Weights, AlbertConfig]:
    """Reads a checkpoint of any format into canonical weights that fit `config`.

    `config` may be omitted for `hf` and `keras` inputs, which carry their own.
    `input_format="auto"` detects the format. `heads` says whether `head`
    (a key of `naming.HEADS`; sizes `head_dims`, read from the checkpoint when
    omitted) must be there ("required"), may be ("optional") or is set aside
    ("ignore"). Raises CheckpointMismatchError if the weights do not fit.
    """
    weights, carried, source = read_weights(path, input_format, config)
    config = config or carried
    if config is None:
        raise ConfigError(f"Reading {path} needs --albert_config_file")
    return as_float32(check_weights(weights, config, source, heads=heads, head=head,
                                    head_dims=head_dims)), config


def output_files(output_format: str) -> List[str]:
    """Files `write_checkpoint` creates in the output directory."""
    fmt = get_format(output_format)
    return list(fmt.output_files) + ([ALBERT_CONFIG_FILE] if fmt.writes_albert_config else [])


def write_checkpoint(weights: Weights, config: AlbertConfig, output_dir: str,
                     output_format: str, overwrite: bool = False,
                     head: Optional[str] = None,
                     spm_model_file: Optional[str] = None) -> List[str]:
    """Writes canonical weights in `output_format` into `output_dir`, atomically.

    The head written is `head`, or the one the weights hold (`find_head`).
    `spm_model_file` is stored with the weights by formats that hold a
    tokenizer (keras_hub). Returns the paths written. Nothing is left behind
    if writing fails, and existing files are never replaced unless `overwrite`.
    """
    fmt = get_format(output_format)
    if spm_model_file and not fmt.writes_tokenizer:
        raise InputError(f"The {output_format} format holds no tokenizer; --spm_model_file is "
                         "written with the weights only by "
                         + ", ".join(f.name for f in formats().values() if f.writes_tokenizer))
    check_can_represent(fmt, config)
    head, head_dims = find_head(weights, prefer=head)
    weights = check_weights(weights, config, "weights to write", heads="required" if head else
                            "ignore", head=head, head_dims=head_dims)
    existing = [name for name in output_files(output_format)
                if io.exists(io.join(output_dir, name))]
    if existing and not overwrite:
        raise InputError(f"{output_dir} already holds {', '.join(existing)}; remove them or "
                         "choose another output directory")
    with io.atomic_output_dir(output_dir, overwrite=overwrite) as scratch:
        if spm_model_file:
            fmt.write(weights, config, scratch, head, spm_model_file=spm_model_file)
        else:
            fmt.write(weights, config, scratch, head)
        if fmt.writes_albert_config:
            config.to_json_file(io.join(scratch, ALBERT_CONFIG_FILE))
        written = io.listdir(scratch)
    return [io.join(output_dir, name) for name in written]


def load_into_model(model, path: str, input_format: str = "auto") -> None:
    """Initialises one of our models from a checkpoint of any format, all or nothing."""
    encoder, _, head, dims = model_parts(model)
    weights, _ = read_checkpoint(path, input_format, encoder.albert_config,
                                 heads="required" if head is not None else "ignore",
                                 head=head, head_dims=dims)
    assign_model_weights(model, weights, source=path)


__all__ = [
    "ALBERT_CONFIG_FILE",
    "Weights",
    "assign_model_weights",
    "carried_config",
    "check_weights",
    "detect_format",
    "find_head",
    "format_names",
    "formats",
    "has_heads",
    "load_into_model",
    "model_variables",
    "model_weights",
    "output_files",
    "read_checkpoint",
    "read_weights",
    "write_checkpoint",
]
