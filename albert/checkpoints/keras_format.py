"""Native Keras 3 `.keras` files of our models (load with `keras.saving.load_model` after `import albert`)."""

import os
import zipfile
from typing import Tuple

import keras

from albert import io
from albert.checkpoints.format import CheckpointFormat
from albert.checkpoints.weights import (Weights, assign_model_weights, find_head, model_parts,
                                        model_weights)
from albert.config import AlbertConfig
from albert.errors import CheckpointDamagedError, ConfigError, InputError
from albert.modeling import (AlbertClassifier, AlbertEncoder, AlbertMultipleChoice,
                             AlbertPretrainer, AlbertSquadV1, AlbertSquadV2,
                             AlbertTokenClassifier)

KERAS_FILE = "model.keras"


def build_model(config: AlbertConfig, head=None, head_dims=None):
    """Our Keras model for `config` with the head `head` (a key of naming.HEADS, or None)."""
    if head is None:
        return AlbertEncoder(config)
    if head == "pretraining":
        return AlbertPretrainer(config)
    if head == "classifier":
        return AlbertClassifier(config, num_labels=head_dims["C"])
    if head == "token_classifier":
        return AlbertTokenClassifier(config, num_labels=head_dims["C"])
    if head == "multiple_choice":
        return AlbertMultipleChoice(config)
    if head == "squad_v1":
        return AlbertSquadV1(config)
    if head == "squad_v2":
        return AlbertSquadV2(config)
    raise ConfigError(f"No Keras model of this package holds the {head} head yet")


def write_keras(weights: Weights, config: AlbertConfig, path: str, head=None) -> None:
    _, dims = find_head(weights, prefer=head) if head else (None, {})
    model = build_model(config, head, dims)
    assign_model_weights(model, weights)
    model.save(path)


def read_keras(path: str) -> Tuple[Weights, AlbertConfig]:
    if io.isdir(path):
        path = io.join(path, KERAS_FILE)
    if not io.exists(path):
        raise InputError(f"No .keras file at {path}")
    if os.path.isfile(path) and not zipfile.is_zipfile(path):  # a local file (gs:// is not)
        # Keras says "File not found" of a .keras file that is there but cut short.
        raise CheckpointDamagedError(f"{path} cannot be read: it is not a complete .keras zip "
                                     "file (damaged or cut short?)")
    try:
        model = keras.saving.load_model(path)
    except Exception as error:  # Keras raises many types for unreadable files
        raise InputError(f"Cannot load {path} as a Keras model: {error}") from None
    try:
        encoder, _, _, _ = model_parts(model)
    except TypeError:
        raise InputError(f"{path} holds a {type(model).__name__}, not one of this package's "
                         "ALBERT models") from None
    return model_weights(model), encoder.albert_config


def _read(path: str, config):
    weights, stored_config = read_keras(path)
    return weights, stored_config, path


FORMAT = CheckpointFormat(
    name="keras",
    description="a native Keras 3 .keras file of AlbertEncoder / AlbertPretrainer / AlbertClassifier / "
                 "AlbertMultipleChoice / AlbertSquadV1 / AlbertSquadV2",
    output_files=(KERAS_FILE,),
    writes_albert_config=True,
    detect=lambda path: path.endswith(".keras") or io.isfile(io.join(path, KERAS_FILE)),
    read=_read,
    write=lambda weights, config, output_dir, head: write_keras(
        weights, config, io.join(output_dir, KERAS_FILE), head),
)
