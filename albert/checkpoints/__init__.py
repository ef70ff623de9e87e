"""Checkpoint interop: original TF1, Hugging Face, Model Garden and Keras formats.

`read_checkpoint` turns any supported checkpoint into canonical weights
(original TF1 names and layouts) checked against a config;
`write_checkpoint` writes canonical weights in any format. Names come from one
table (`albert.checkpoints.naming`).
"""

import logging
import os
from typing import List, Optional, Tuple

from albert.atomic_files import atomic_output_dir
from albert.checkpoints.weights import (Weights, as_float32, assign_model_weights,
                                        check_weights, has_heads, model_variables, model_weights)
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError

logger = logging.getLogger("albert")

FORMATS = ("tf1", "hf", "keras", "model_garden")


def detect_format(path: str) -> str:
    """The format of a checkpoint path: keras, hf, model_garden (object-based) or tf1."""
    from albert.checkpoints.hf import HF_WEIGHTS
    from albert.checkpoints.keras_format import KERAS_FILE
    from albert.checkpoints.tf1 import resolve_checkpoint_prefix

    if path.endswith(".keras") or os.path.isfile(os.path.join(path, KERAS_FILE)):
        return "keras"
    if path.endswith(".safetensors") or os.path.isfile(os.path.join(path, HF_WEIGHTS)):
        return "hf"
    import tensorflow as tf

    prefix = resolve_checkpoint_prefix(path)
    try:
        names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as error:
        raise InputError(f"Cannot read checkpoint {prefix}: {error}") from None
    return "model_garden" if "_CHECKPOINTABLE_OBJECT_GRAPH" in names else "tf1"


def output_files(output_format: str) -> List[str]:
    """Files `write_checkpoint` creates in the output directory."""
    from albert.checkpoints.hf import HF_CONFIG, HF_WEIGHTS
    from albert.checkpoints.keras_format import KERAS_FILE
    from albert.checkpoints.model_garden import MODEL_GARDEN_CHECKPOINT
    from albert.checkpoints.tf1 import TF1_CHECKPOINT

    config_file = ["albert_config.json"]
    return {
        "tf1": [f"{TF1_CHECKPOINT}.index", f"{TF1_CHECKPOINT}.data-00000-of-00001"] + config_file,
        "hf": [HF_CONFIG, HF_WEIGHTS],
        "keras": [KERAS_FILE] + config_file,
        "model_garden": [f"{MODEL_GARDEN_CHECKPOINT}.index",
                         f"{MODEL_GARDEN_CHECKPOINT}.data-00000-of-00001"] + config_file,
    }[output_format]


def _check_format(name: str) -> None:
    if name not in FORMATS:
        raise InputError(f"Unknown checkpoint format {name!r}; expected one of {', '.join(FORMATS)}")


def read_checkpoint(path: str, input_format: str, config: Optional[AlbertConfig] = None,
                    heads: str = "optional") -> Tuple[Weights, AlbertConfig]:
    """Reads a checkpoint of any format into canonical weights that fit `config`.

    `config` may be omitted for `hf` and `keras` inputs, which carry their own.
    `input_format="auto"` detects the format. Raises CheckpointMismatchError
    if the weights do not fit.
    """
    if input_format == "auto":
        input_format = detect_format(path)
    _check_format(input_format)
    if input_format == "tf1":
        from albert.checkpoints.tf1 import read_tf1
        weights, path = read_tf1(path)
    elif input_format == "model_garden":
        from albert.checkpoints.model_garden import read_model_garden
        if config is None:
            raise ConfigError("Reading a Model Garden checkpoint needs --albert_config_file")
        weights = read_model_garden(path, config)
    elif input_format == "hf":
        from albert.checkpoints.hf import read_hf
        weights, config = read_hf(path, config)
    else:
        from albert.checkpoints.keras_format import read_keras
        weights, stored_config = read_keras(path)
        config = config or stored_config
    if config is None:
        raise ConfigError(f"Reading a {input_format} checkpoint needs --albert_config_file")
    return as_float32(check_weights(weights, config, path, heads=heads)), config


def write_checkpoint(weights: Weights, config: AlbertConfig, output_dir: str,
                     output_format: str, overwrite: bool = False) -> List[str]:
    """Writes canonical weights in `output_format` into `output_dir`, atomically.

    Returns the paths written. Nothing is left behind if writing fails.
    """
    _check_format(output_format)
    weights = check_weights(weights, config, "weights to write")
    names = output_files(output_format)
    existing = [name for name in names if os.path.exists(os.path.join(output_dir, name))]
    if existing and not overwrite:
        raise InputError(f"{output_dir} already holds {', '.join(existing)}; remove them or "
                         "choose another output directory")
    with atomic_output_dir(output_dir, overwrite=overwrite) as scratch:
        if output_format == "tf1":
            from albert.checkpoints.tf1 import TF1_CHECKPOINT, write_tf1
            write_tf1(weights, os.path.join(scratch, TF1_CHECKPOINT))
        elif output_format == "hf":
            from albert.checkpoints.hf import write_hf
            write_hf(weights, config, scratch)
        elif output_format == "keras":
            from albert.checkpoints.keras_format import KERAS_FILE, write_keras
            write_keras(weights, config, os.path.join(scratch, KERAS_FILE))
        else:
            from albert.checkpoints.model_garden import MODEL_GARDEN_CHECKPOINT, write_model_garden
            write_model_garden(weights, config, os.path.join(scratch, MODEL_GARDEN_CHECKPOINT))
        if output_format != "hf":
            config.to_json_file(os.path.join(scratch, "albert_config.json"))
        written = sorted(os.listdir(scratch))
    return [os.path.join(output_dir, name) for name in written]


def load_into_model(model, path: str, input_format: str = "auto") -> None:
    """Initialises one of our models from a checkpoint of any format, all or nothing."""
    from albert.checkpoints.weights import model_parts

    encoder, pretrainer = model_parts(model)
    weights, _ = read_checkpoint(path, input_format, encoder.albert_config,
                                 heads="required" if pretrainer is not None else "ignore")
    assign_model_weights(model, weights, source=path)


__all__ = [
    "FORMATS",
    "Weights",
    "assign_model_weights",
    "check_weights",
    "detect_format",
    "has_heads",
    "load_into_model",
    "model_variables",
    "model_weights",
    "output_files",
    "read_checkpoint",
    "write_checkpoint",
]
