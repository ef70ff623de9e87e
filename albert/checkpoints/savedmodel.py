"""Our TF-Hub-style encoder SavedModel (`python -m albert.export`) as a checkpoint format.

The SavedModel (`albert.savedmodel.encoder`) holds the weights under the
original's names (`albert_weights` and `albert_weight_names()`) and its config
as an asset, so it can start a fine-tuning run (`--init_checkpoint`,
`--albert_hub_module_handle`) or be converted like any checkpoint. Written SavedModels hold the encoder, and the
pretraining heads when the weights have them (the `mlm` sub-object).
"""

from typing import Optional, Tuple

import tensorflow as tf

from albert import io
from albert.checkpoints.format import CheckpointFormat
from albert.checkpoints.naming import PRETRAINING_HEAD
from albert.checkpoints.weights import Weights, assign_model_weights, has_heads, model_variables
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError
from albert.modeling import AlbertEncoder, AlbertPretrainer
from albert.savedmodel.encoder import (CONFIG_ASSET, WEIGHT_NAMES_FUNCTION, WEIGHTS_ATTRIBUTE,
                                       EncoderExport, save)

SAVED_MODEL_FILE = "saved_model.pb"


def _config_asset(path: str) -> str:
    return io.join(path, "assets", CONFIG_ASSET)


def detect_savedmodel(path: str) -> bool:
    return io.isfile(io.join(path, SAVED_MODEL_FILE)) and io.isfile(_config_asset(path))


def read_savedmodel(path: str, config: Optional[AlbertConfig] = None
                    ) -> Tuple[Weights, AlbertConfig, str]:
    if not detect_savedmodel(path):
        raise InputError(f"{path} is not an encoder SavedModel written by python -m albert.export")
    loaded = tf.saved_model.load(path)
    if not hasattr(loaded, WEIGHT_NAMES_FUNCTION):
        raise InputError(f"{path} is a SavedModel without ALBERT weight names (not written by "
                         "python -m albert.export)")
    names = [name.decode("utf-8") for name in getattr(loaded, WEIGHT_NAMES_FUNCTION)().numpy()]
    weights = {name: variable.numpy()
               for name, variable in zip(names, getattr(loaded, WEIGHTS_ATTRIBUTE))}
    carried = AlbertConfig.from_json_file(_config_asset(path), allow_unknown_keys=True)
    return weights, config or carried, path


def build_encoder_model(config: AlbertConfig, weights: Weights):
    """`AlbertPretrainer` when `weights` hold the pretraining heads (for `mlm`), else
    `AlbertEncoder`, loaded with `weights`."""
    model = AlbertPretrainer(config) if has_heads(weights) else AlbertEncoder(config)
    assign_model_weights(model, weights, "the checkpoint to export")
    return model


def write_savedmodel(weights: Weights, config: AlbertConfig, output_dir: str,
                     head: Optional[str] = None) -> None:
    if head not in (None, PRETRAINING_HEAD):
        raise ConfigError(f"the encoder SavedModel holds the encoder and the pretraining heads, "
                          f"not the {head} head")
    model = build_encoder_model(config, weights)
    with io.local_scratch_dir() as assets:
        root = EncoderExport(model, model_variables(model), assets, config.to_json_string())
        save(root, output_dir, signatures={"serving_default": root.serve})


FORMAT = CheckpointFormat(
    name="savedmodel",
    description=("the TF-Hub-style encoder SavedModel of python -m albert.export (encoder, and "
                 "the pretraining heads when present)"),
    output_files=(SAVED_MODEL_FILE, "variables", "assets", "fingerprint.pb"),
    writes_albert_config=False,
    detect=detect_savedmodel,
    read=read_savedmodel,
    write=write_savedmodel,
)
