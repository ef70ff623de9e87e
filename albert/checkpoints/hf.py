"""Hugging Face `transformers` ALBERT: a directory with `config.json` + `model.safetensors`.

Written files load with `AlbertForPreTraining.from_pretrained` (or
`AlbertModel.from_pretrained` when there are no heads). No torch is needed:
safetensors are read and written with numpy.

Differences handled here: HF always has `embedding_hidden_mapping_in`
(identity when E == H); it routes layers to groups with `int(l / (L / G))`,
which differs from the original for some (L, G); it cannot hold the per-layer
copies of the partial sharing strategies; its "gelu" is the exact erf form
while ALBERT's is the tanh form HF calls "gelu_new".
"""

import json
import logging
from typing import Optional, Tuple

import numpy as np
import safetensors.numpy

from albert import io
from albert.checkpoints.naming import HEADS, backbone_names, head_names, hf_head_rows
from albert.checkpoints.format import CheckpointFormat
from albert.checkpoints.weights import (Weights, find_head, identity_projection,
                                       pop_identity_projection)
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError
from albert.modeling.sharing import layer_groups, used_groups

logger = logging.getLogger("albert")

HF_CONFIG = "config.json"
HF_WEIGHTS = "model.safetensors"
_BASE_PREFIX = "albert."
# Tied copies that HF may store; the originals are the word table and predictions.bias.
_TIED_KEYS = ("predictions.decoder.weight", "predictions.decoder.bias")
# HF activation names -> ours. HF "gelu" is exact (erf); ALBERT uses tanh.
_HF_ACTIVATIONS = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
                   "gelu": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}
_OUR_TO_HF_ACTIVATION = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh", "linear": "linear"}


def check_hf_can_represent(config: AlbertConfig) -> None:
    """Raises ConfigError when a `transformers` ALBERT would compute a different model."""
    if config.sharing_strategy != "groups":
        raise ConfigError(
            f"Hugging Face ALBERT has no per-layer sub-block copies; sharing_strategy="
            f"{config.sharing_strategy!r} cannot be exported to it")
    L, G = config.num_hidden_layers, config.num_hidden_groups
    if (layer_groups(config, rule="huggingface") != layer_groups(config)
            or used_groups(config) != tuple(range(G))):
        raise ConfigError(
            f"Hugging Face ALBERT routes layers to groups as int(l / (L / G)), which differs from "
            f"the original's int(l / L * G) for num_hidden_layers={L}, num_hidden_groups={G}; "
            "the exported model would compute something else")


def hf_architecture(head: Optional[str]) -> str:
    """The `transformers` class that holds the encoder and `head`."""
    if head is None:
        return "AlbertModel"
    architecture = HEADS[head].hf_architecture
    if architecture is None:
        raise ConfigError(f"Hugging Face has no model with the {head} head")
    return architecture


def hf_config_dict(config: AlbertConfig, with_heads, num_labels: Optional[int] = None) -> dict:
    """HF `config.json` values; `with_heads`: a head name, True (pretraining) or False/None."""
    head = "pretraining" if with_heads is True else (with_heads or None)
    values = {
        "architectures": [hf_architecture(head)],
        "model_type": "albert",
        "vocab_size": config.vocab_size,
        "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_hidden_groups": config.num_hidden_groups,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "inner_group_num": config.inner_group_num,
        "hidden_act": _OUR_TO_HF_ACTIVATION[config.activation],
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": 1e-12,
        # HF's SOP head applies this dropout in training; the original has none.
        "classifier_dropout_prob": 0.1,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 3,
        "tie_word_embeddings": True,
    }
    if num_labels is not None:
        values["num_labels"] = num_labels
        if head == "classifier" and num_labels == 1:
            values["problem_type"] = "regression"   # STS-B: mean squared error, as the original
    return values


def albert_config_from_hf(values: dict, source: str) -> AlbertConfig:
    """Builds an `AlbertConfig` from an HF `config.json` dict."""
    if values.get("model_type") not in (None, "albert"):
        raise ConfigError(f"{source}: model_type is {values.get('model_type')!r}, not 'albert'")
    if values.get("layer_norm_eps", 1e-12) != 1e-12:
        raise ConfigError(f"{source}: layer_norm_eps {values['layer_norm_eps']} differs from "
                          "ALBERT's 1e-12")
    activation = values.get("hidden_act", "gelu_new")
    if activation not in _HF_ACTIVATIONS:
        raise ConfigError(f"{source}: unsupported hidden_act {activation!r}")
    if activation == "gelu":
        logger.warning("%s uses HF 'gelu' (exact erf); ALBERT's gelu is the tanh approximation "
                       "(HF 'gelu_new'), which this model uses: outputs differ slightly", source)
    keys = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
            "num_hidden_groups", "num_attention_heads", "intermediate_size", "inner_group_num",
            "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
            "type_vocab_size", "initializer_range")
    fields = {key: values[key] for key in keys if key in values}
    return AlbertConfig(hidden_act=_HF_ACTIVATIONS[activation], **fields)


def write_hf(weights: Weights, config: AlbertConfig, output_dir: str,
             head: Optional[str] = None) -> None:
    check_hf_can_represent(config)
    architecture = hf_architecture(head)
    _, dims = find_head(weights, prefer=head) if head else (None, {})
    rows = backbone_names(config) + (head_names(config, head, **dims) if head else [])
    tensors = {}
    for row in rows:
        value = weights[row.original]
        tensors[row.hf] = np.ascontiguousarray(value.T if row.hf_transpose else value)
    if config.embedding_size == config.hidden_size:
        tensors.update(identity_projection(config, "hf"))
    io.write_bytes_atomically(io.join(output_dir, HF_WEIGHTS),
                              safetensors.numpy.save(tensors, metadata={"format": "pt"}))
    values = hf_config_dict(config, head, num_labels=dims.get("C"))
    values["architectures"] = [architecture]
    io.write_json_atomically(io.join(output_dir, HF_CONFIG), values)


def _hf_directory_files(path: str) -> Tuple[str, str]:
    if io.isdir(path):
        return io.join(path, HF_WEIGHTS), io.join(path, HF_CONFIG)
    return path, io.join(io.dirname(path), HF_CONFIG)


def detect_hf(path: str) -> bool:
    return path.endswith(".safetensors") or io.isfile(io.join(path, HF_WEIGHTS))


def read_hf(path: str, config: Optional[AlbertConfig] = None) -> Tuple[Weights, AlbertConfig]:
    """Reads an HF ALBERT directory (or its `model.safetensors`) into canonical weights.

    `config` defaults to the one derived from the directory's `config.json`.
    Accepts `AlbertModel` keys (no `albert.` prefix) and `AlbertForPreTraining`
    keys; ignores the tied decoder copies.
    """
    weights_file, config_file = _hf_directory_files(path)
    if not io.exists(weights_file):
        raise InputError(f"No {HF_WEIGHTS} at {path} (only safetensors weights are supported)")
    if config is None:
        if not io.exists(config_file):
            raise InputError(f"No {HF_CONFIG} beside {weights_file}; pass --albert_config_file")
        try:
            values = json.loads(io.read_text(config_file))
        except json.JSONDecodeError as error:
            raise ConfigError(f"{config_file} is not valid JSON: {error}") from None
        config = albert_config_from_hf(values, config_file)
    check_hf_can_represent(config)
    try:
        state = safetensors.numpy.load(io.read_bytes(weights_file))
    except Exception as error:  # safetensors raises its own error types
        raise InputError(f"Cannot read {weights_file}: {error}") from None
    head_prefixes = tuple({row.hf.split(".")[0] + "." for row in hf_head_rows(config)})
    if not any(key.startswith(_BASE_PREFIX) for key in state):
        state = {(key if key.startswith(head_prefixes) else _BASE_PREFIX + key): value
                 for key, value in state.items()}
    for key in _TIED_KEYS:
        state.pop(key, None)

    if config.embedding_size == config.hidden_size:
        pop_identity_projection(state, config, "hf", weights_file)

    by_hf = {row.hf: row for row in backbone_names(config) + hf_head_rows(config)}
    weights = {}
    for key, value in state.items():
        row = by_hf.get(key)
        if row is None:
            weights[f"<hf>{key}"] = value  # reported as unexpected by check_weights
        else:
            weights[row.original] = value.T if row.hf_transpose else value
    return weights, config


FORMAT = CheckpointFormat(
    name="hf",
    description=("Hugging Face transformers: config.json + model.safetensors "
                 "(AlbertModel, AlbertForPreTraining, AlbertForSequenceClassification, "
                 "AlbertForMultipleChoice or AlbertForQuestionAnswering, by the head)"),
    output_files=(HF_CONFIG, HF_WEIGHTS),
    writes_albert_config=False,
    detect=detect_hf,
    read=lambda path, config: (*read_hf(path, config), path),
    write=write_hf,
    can_represent=check_hf_can_represent,
)
