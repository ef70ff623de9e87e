"""Native Keras 3 `.keras` files of our models (load with `keras.saving.load_model` after `import albert`)."""

from typing import Tuple

import keras

from albert import io
from albert.checkpoints.format import CheckpointFormat
from albert.checkpoints.weights import Weights, assign_model_weights, has_heads, model_weights
from albert.config import AlbertConfig
from albert.errors import InputError

KERAS_FILE = "model.keras"


def build_model(config: AlbertConfig, with_heads: bool):
    from albert.modeling import AlbertEncoder, AlbertPretrainer

    return AlbertPretrainer(config) if with_heads else AlbertEncoder(config)


def write_keras(weights: Weights, config: AlbertConfig, path: str) -> None:
    model = build_model(config, with_heads=has_heads(weights))
    assign_model_weights(model, weights)
    model.save(path)


def read_keras(path: str) -> Tuple[Weights, AlbertConfig]:
    from albert.modeling import AlbertEncoder, AlbertPretrainer

    if io.isdir(path):
        path = io.join(path, KERAS_FILE)
    if not io.exists(path):
        raise InputError(f"No .keras file at {path}")
    try:
        model = keras.saving.load_model(path)
    except Exception as error:  # Keras raises many types for unreadable files
        raise InputError(f"Cannot load {path} as a Keras model: {error}") from None
    if not isinstance(model, (AlbertEncoder, AlbertPretrainer)):
        raise InputError(f"{path} holds a {type(model).__name__}, not an AlbertEncoder or "
                         "AlbertPretrainer")
    config = model.albert_config if isinstance(model, AlbertEncoder) else model.encoder.albert_config
    return model_weights(model), config


def _read(path: str, config):
    weights, stored_config = read_keras(path)
    return weights, stored_config, path


FORMAT = CheckpointFormat(
    name="keras",
    description="a native Keras 3 .keras file of AlbertEncoder / AlbertPretrainer",
    output_files=(KERAS_FILE,),
    writes_albert_config=True,
    detect=lambda path: path.endswith(".keras") or io.isfile(io.join(path, KERAS_FILE)),
    read=_read,
    write=lambda weights, config, output_dir: write_keras(weights, config,
                                                          io.join(output_dir, KERAS_FILE)),
)
