"""tf-models-official (Model Garden) `AlbertEncoder` object-based checkpoints.

Model Garden is built on tf_keras (Keras 2), so its layers are never mixed
into our Keras 3 models: weights are converted by name instead. Its encoder
shares one transformer block across all layers, so only all-shared ALBERT
(G = 1, K = 1) can move to it; it holds no pretraining heads. Its
`type_vocab_size` defaults to 16: we always pass the config's value (2 for
ALBERT), or conversion would break.

Checkpoints are written as `tf.train.Checkpoint(encoder=AlbertEncoder)`, the
layout Model Garden's own TF1 converter and its fine-tuning tasks use.
"""

import dataclasses
import logging
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert import io
from albert.checkpoints.naming import weight_names
from albert.checkpoints.format import CheckpointFormat
from albert.checkpoints.tf1 import OBJECT_GRAPH_KEY, checkpoint_files, is_object_based, open_reader
from albert.checkpoints.weights import Weights
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError

logger = logging.getLogger("albert")

MODEL_GARDEN_CHECKPOINT = "encoder.ckpt"


def check_model_garden_can_represent(config: AlbertConfig) -> None:
    if (config.sharing_strategy != "groups" or config.num_hidden_groups != 1
            or config.inner_group_num != 1):
        raise ConfigError(
            "Model Garden's AlbertEncoder shares one block across all layers; it can only hold "
            "all-shared models (num_hidden_groups = 1, inner_group_num = 1, sharing_strategy = "
            f"groups), not {config.describe()}")


def build_model_garden_encoder(config: AlbertConfig):
    """A tf-models-official `AlbertEncoder` with this config's shapes (dict outputs)."""
    # Inside: tf-models-official takes seconds to load and only this format needs it.
    import tf_keras
    from official.modeling import tf_utils
    from official.nlp.modeling import networks

    check_model_garden_can_represent(config)
    return networks.AlbertEncoder(
        vocab_size=config.vocab_size,
        embedding_width=config.embedding_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        intermediate_size=config.intermediate_size,
        activation=tf_utils.get_activation(config.activation),
        dropout_rate=config.hidden_dropout_prob,
        attention_dropout_rate=config.attention_probs_dropout_prob,
        initializer=tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range),
        dict_outputs=True)


def _variables_by_name(encoder) -> Dict[str, object]:
    return {variable.name.split(":")[0]: variable for variable in encoder.weights}


def assign_to_model_garden(encoder, weights: Weights, config: AlbertConfig) -> None:
    """Copies canonical backbone weights into a Model Garden encoder."""
    variables = _variables_by_name(encoder)
    for row in weight_names(config, include_heads=False):
        value = weights[row.original]
        if row.model_garden_shape is not None:
            value = value.reshape(row.model_garden_shape)
        variables[row.model_garden].assign(value)


def model_garden_weights(encoder, config: AlbertConfig) -> Weights:
    """Canonical weights of a Model Garden encoder."""
    variables = _variables_by_name(encoder)
    return {row.original: variables[row.model_garden].numpy().reshape(row.shape)
            for row in weight_names(config, include_heads=False)}


def write_model_garden(weights: Weights, config: AlbertConfig, prefix: str,
                       head: Optional[str] = None) -> None:
    check_model_garden_can_represent(config)
    if head is not None:
        logger.warning("Model Garden's AlbertEncoder holds no heads; the %s head is not "
                       "written to %s", head, prefix)
    encoder = build_model_garden_encoder(config)
    assign_to_model_garden(encoder, weights, config)
    tf.train.Checkpoint(encoder=encoder).write(prefix)


def read_model_garden(path: str, config: AlbertConfig) -> Weights:
    """Reads a `tf.train.Checkpoint(encoder=AlbertEncoder)` by variable name.

    The checkpoint's object graph records each variable's Keras name, so no
    model needs to be built and every stored variable can be checked.
    """
    check_model_garden_can_represent(config)
    reader, prefix = open_reader(path)
    if OBJECT_GRAPH_KEY not in reader.get_variable_to_shape_map():
        raise InputError(f"{prefix} is a name-based checkpoint, not an object-based Model Garden "
                         "one; use --input_format=tf1")
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
    stored = {}
    for node in graph.nodes:
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE" and attribute.checkpoint_key.startswith("encoder/"):
                stored[attribute.full_name] = attribute.checkpoint_key
    if not stored:
        raise InputError(f"{prefix} has no 'encoder' object; Model Garden checkpoints are written "
                         "as tf.train.Checkpoint(encoder=...)")

    by_model_garden = {row.model_garden: row for row in weight_names(config, include_heads=False)}
    weights = {}
    for name, key in stored.items():
        value = reader.get_tensor(key)
        row = by_model_garden.get(name)
        if row is None:
            weights[f"<model_garden>{name}"] = value
        elif tuple(value.shape) != (row.model_garden_shape or row.shape):
            weights[row.original] = value  # kept as stored: reported as mis-shaped
        else:
            weights[row.original] = np.reshape(value, row.shape)
    return weights


def _read(path: str, config):
    if config is None:
        raise ConfigError("Reading a Model Garden checkpoint needs --albert_config_file")
    return read_model_garden(path, config), None, path


def model_garden_source_config(config: AlbertConfig) -> AlbertConfig:
    """The all-shared config whose names a Model Garden checkpoint holds (for group-0 reads)."""
    return dataclasses.replace(config, num_hidden_groups=1, inner_group_num=1,
                               sharing_strategy="groups")


FORMAT = CheckpointFormat(
    name="model_garden",
    description=("tf-models-official: tf.train.Checkpoint(encoder=AlbertEncoder) "
                 "(encoder only; all-shared models only)"),
    output_files=checkpoint_files(MODEL_GARDEN_CHECKPOINT),
    writes_albert_config=True,
    detect=lambda path: is_object_based(path) is True,
    read=_read,
    write=lambda weights, config, output_dir, head: write_model_garden(
        weights, config, io.join(output_dir, MODEL_GARDEN_CHECKPOINT), head),
    can_represent=check_model_garden_can_represent,
)
