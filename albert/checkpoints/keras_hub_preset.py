"""KerasHub presets: directories that `keras_hub` loads with `from_preset`.

Writing builds real keras_hub objects (`AlbertBackbone`, and `AlbertTextClassifier`
or `AlbertMaskedLM` for a head; `AlbertTokenizer` from `--spm_model_file`), fills
their variables from the name table's `keras_hub` column and saves them with
keras_hub's own `save_to_preset`. Reading loads a preset with keras_hub
(`from_preset`) and takes its variables back through the same column; the
config comes from the preset's `config.json`.

What KerasHub's ALBERT can hold, and what is refused (ConfigError) or said:

* always the tanh GELU (our `hidden_act="gelu"`); other activations are refused;
* `num_hidden_layers % num_hidden_groups == 0`, layers routed to groups in
  consecutive runs (the original's rule for such configs); no per-layer copies
  (the partial sharing strategies are refused);
* one dropout rate: the hidden one is written (a warning when the attention
  dropout differs); on reading both take the preset's;
* always an embedding projection: the identity is written when E == H, and on
  reading an E == H preset with another projection is refused;
* heads: the GLUE classifier (`AlbertTextClassifier`) and the masked LM
  (`AlbertMaskedLM`, whose LayerNorm epsilon is 1e-5 where ours is 1e-12:
  docs/checkpoints.md gives the measured difference). The sentence-order head
  has no place there and is left out with a warning; RACE and SQuAD heads are
  refused (`--head=none` writes the encoder alone).

keras_hub is an optional dependency (`pip install -e ".[keras_hub]"`),
imported only here and only when the format is used.
"""

import json
import logging
import os
import re
from typing import List, Optional, Tuple

import numpy as np

from albert import io
from albert.checkpoints.format import CheckpointFormat
from albert.checkpoints.naming import (HEADS, MASKED_LM_HEAD, PRETRAINING_HEAD, WeightName,
                                       backbone_names, head_names)
from albert.checkpoints.weights import (Weights, find_head, identity_projection,
                                       pop_identity_projection)
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError

logger = logging.getLogger("albert")

CONFIG_FILE = "config.json"
TASK_CONFIG_FILE = "task.json"
TOKENIZER_VOCABULARY = "assets/tokenizer/vocabulary.spm"
# Every top-level name `save_to_preset` may write (checked before anything is written).
OUTPUT_FILES = (CONFIG_FILE, "metadata.json", "model.weights.h5", TASK_CONFIG_FILE,
                "task.weights.h5", "preprocessor.json", "tokenizer.json", "assets")
_BACKBONE_NAME = "keras_hub>AlbertBackbone"
_TASK_PREPROCESSORS = {"AlbertTextClassifier": "AlbertTextClassifierPreprocessor",
                       "AlbertMaskedLM": "AlbertMaskedLMPreprocessor"}
# The classifier's dropout on the pooled output: the original's fixed 0.1.
_CLASSIFIER_DROPOUT = 0.1


def import_keras_hub():
    """The keras_hub module, or one InputError line saying what to install."""
    try:
        import keras_hub  # optional: only this format needs it
    except ImportError:
        raise InputError('The keras_hub format needs the keras-hub package: '
                         'pip install -e ".[keras_hub]"') from None
    return keras_hub


# ------------------------------------------------------------------ configs
def check_keras_hub_can_represent(config: AlbertConfig) -> None:
    """Raises ConfigError when KerasHub's AlbertBackbone would compute another model."""
    if config.sharing_strategy != "groups":
        raise ConfigError(f"KerasHub's AlbertBackbone has no per-layer sub-block copies; "
                          f"sharing_strategy={config.sharing_strategy!r} cannot be written to it")
    if config.num_hidden_layers % config.num_hidden_groups:
        raise ConfigError(f"KerasHub's AlbertBackbone needs num_hidden_layers "
                          f"({config.num_hidden_layers}) divisible by num_hidden_groups "
                          f"({config.num_hidden_groups})")
    if config.hidden_act != "gelu":
        raise ConfigError(f"KerasHub's AlbertBackbone always uses the tanh GELU; this model uses "
                          f"hidden_act={config.hidden_act!r}")


def backbone_arguments(config: AlbertConfig) -> dict:
    """`AlbertBackbone(**...)` for `config`."""
    return {
        "vocabulary_size": config.vocab_size,
        "num_layers": config.num_hidden_layers,
        "num_heads": config.num_attention_heads,
        "embedding_dim": config.embedding_size,
        "hidden_dim": config.hidden_size,
        "intermediate_dim": config.intermediate_size,
        "num_groups": config.num_hidden_groups,
        "num_inner_repetitions": config.inner_group_num,
        "dropout": config.hidden_dropout_prob,
        "max_sequence_length": config.max_position_embeddings,
        "num_segments": config.type_vocab_size,
    }


def albert_config_from_backbone(values: dict) -> AlbertConfig:
    """The `AlbertConfig` of an `AlbertBackbone` config (the `config` of its config.json)."""
    return AlbertConfig(
        vocab_size=values["vocabulary_size"],
        embedding_size=values["embedding_dim"],
        hidden_size=values["hidden_dim"],
        num_hidden_layers=values["num_layers"],
        num_hidden_groups=values.get("num_groups", 1),
        num_attention_heads=values["num_heads"],
        intermediate_size=values["intermediate_dim"],
        inner_group_num=values.get("num_inner_repetitions", 1),
        hidden_act="gelu",
        hidden_dropout_prob=values.get("dropout", 0.0),
        attention_probs_dropout_prob=values.get("dropout", 0.0),
        max_position_embeddings=values.get("max_sequence_length", 512),
        type_vocab_size=values.get("num_segments", 2))


# ------------------------------------------------------------------ the rows
def _rows(config: AlbertConfig, head: Optional[str], dims: dict) -> List[WeightName]:
    """Rows of the backbone and the head that KerasHub holds (others have no keras_hub name)."""
    rows = backbone_names(config) + (head_names(config, head, **dims) if head else [])
    return [row for row in rows if row.keras_hub is not None]


def _to_keras_hub(row: WeightName, value: np.ndarray) -> np.ndarray:
    value = value.T if row.keras_hub_transpose else value
    return value.reshape(row.keras_hub_shape) if row.keras_hub_shape else value


def _from_keras_hub(row: WeightName, value: np.ndarray) -> np.ndarray:
    if row.keras_hub_transpose:
        return value.T
    return value.reshape(row.shape) if row.keras_hub_shape else value


def _task_name(head: Optional[str]) -> Optional[str]:
    if head is None:
        return None
    task = HEADS[head].keras_hub_task
    if task is None:
        raise ConfigError(f"KerasHub has no ALBERT model with the {head} head (--head=none "
                          "writes the encoder alone)")
    return task


# ------------------------------------------------------------------ writing
def write_keras_hub(weights: Weights, config: AlbertConfig, output_dir: str,
                    head: Optional[str] = None, spm_model_file: Optional[str] = None) -> None:
    check_keras_hub_can_represent(config)
    task_name = _task_name(head)
    keras_hub = import_keras_hub()
    if head == PRETRAINING_HEAD:
        logger.warning("KerasHub's AlbertMaskedLM has no sentence-order head: "
                       "cls/seq_relationship/* are left out")
    if config.attention_probs_dropout_prob != config.hidden_dropout_prob:
        logger.warning("KerasHub's ALBERT has one dropout rate: writing hidden_dropout_prob=%s "
                       "(attention_probs_dropout_prob=%s is not kept)",
                       config.hidden_dropout_prob, config.attention_probs_dropout_prob)
    _, dims = find_head(weights, prefer=head) if head else (None, {})

    models = keras_hub.models
    # Fixed names (Keras numbers unnamed layers per process): the same weights give the same
    # preset files.
    backbone = models.AlbertBackbone(**backbone_arguments(config), dtype="float32",
                                     name="albert_backbone")
    tokenizer = (models.AlbertTokenizer(proto=io.read_bytes(spm_model_file),
                                        name="albert_tokenizer") if spm_model_file else None)
    model = backbone
    if task_name is not None:
        preprocessor = None
        if tokenizer is not None:
            preprocessor = getattr(models, _TASK_PREPROCESSORS[task_name])(
                tokenizer=tokenizer, sequence_length=min(512, config.max_position_embeddings),
                name=_snake_case(_TASK_PREPROCESSORS[task_name]))
        extra = {"num_classes": dims["C"], "dropout": _CLASSIFIER_DROPOUT} if "C" in dims else {}
        model = getattr(models, task_name)(backbone=backbone, preprocessor=preprocessor,
                                           name=_snake_case(task_name), **extra)

    variables = {variable.path: variable for variable in model.variables}
    assigned = set()
    for row in _rows(config, head, dims):
        variables[row.keras_hub].assign(_to_keras_hub(row, np.asarray(weights[row.original])))
        assigned.add(row.keras_hub)
    if config.embedding_size == config.hidden_size:
        # KerasHub always projects E -> H; the identity keeps our (projection-free) model.
        for name, value in identity_projection(config, "keras_hub").items():
            variables[name].assign(value)
            assigned.add(name)
    unfilled = sorted(path for path in variables
                      if path not in assigned and "seed_generator" not in path)
    if unfilled:  # the name table lacks a row keras_hub has: a bug here, not a user error
        raise RuntimeError(f"KerasHub variables the name table does not fill: {unfilled}")

    with io.local_scratch_dir("albert-keras-hub-") as scratch:
        model.save_to_preset(scratch)
        if tokenizer is not None and task_name is None:
            tokenizer.save_to_preset(scratch)
        _copy_tree(scratch, output_dir)


def _snake_case(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


def _copy_tree(source: str, target: str) -> None:
    """Copies a local directory's files into `target` (local or remote)."""
    for root, _, names in os.walk(source):
        relative = os.path.relpath(root, source)
        directory = target if relative == "." else io.join(target, relative)
        io.makedirs(directory)
        for name in names:
            io.copy(os.path.join(root, name), io.join(directory, name))


# ------------------------------------------------------------------ reading
def _preset_json(path: str, name: str) -> Optional[dict]:
    file = io.join(path, name)
    if not io.isfile(file):
        return None
    try:
        return json.loads(io.read_text(file))
    except json.JSONDecodeError as error:
        raise InputError(f"{file} is not valid JSON: {error}") from None


def detect_keras_hub(path: str) -> bool:
    if not io.isdir(path):
        return False
    try:
        values = _preset_json(path, CONFIG_FILE)
    except InputError:
        return False
    return bool(values) and str(values.get("registered_name", "")).startswith("keras_hub>")


def preset_tokenizer(path: str) -> Optional[str]:
    """The SentencePiece model a KerasHub preset holds, or None (also for non-presets)."""
    if not path or not detect_keras_hub(path):
        return None
    vocabulary = io.join(path, TOKENIZER_VOCABULARY)
    return vocabulary if io.isfile(vocabulary) else None


def read_keras_hub(path: str, config: Optional[AlbertConfig] = None
                   ) -> Tuple[Weights, AlbertConfig]:
    """Reads a KerasHub ALBERT preset (backbone, text classifier or masked LM)."""
    values = _preset_json(path, CONFIG_FILE)
    if values is None:
        raise InputError(f"No {CONFIG_FILE} in {path}: not a KerasHub preset directory")
    if values.get("registered_name") != _BACKBONE_NAME:
        raise InputError(f"{path} is a KerasHub preset of {values.get('registered_name')!r}, "
                         f"not of {_BACKBONE_NAME!r}")
    config = config or albert_config_from_backbone(values["config"])
    check_keras_hub_can_represent(config)
    task_values = _preset_json(path, TASK_CONFIG_FILE)
    task_name = (task_values or {}).get("registered_name", "").split(">")[-1] or None
    if task_name is not None and task_name not in _TASK_PREPROCESSORS:
        raise InputError(f"{path} holds a KerasHub {task_name}; this package reads "
                         f"AlbertBackbone, {' and '.join(_TASK_PREPROCESSORS)} presets")

    models = import_keras_hub().models
    try:
        if task_name is None:
            model = models.AlbertBackbone.from_preset(path)
        else:
            model = getattr(models, task_name).from_preset(path, preprocessor=None)
    except Exception as error:  # keras_hub and Keras raise many types for broken presets
        raise InputError(f"keras_hub cannot load {path}: {error}") from None
    stored = {variable.path: np.asarray(variable.numpy(), dtype=np.float32)
              for variable in model.variables if "seed_generator" not in variable.path}

    head, dims = None, {}
    if task_name == "AlbertTextClassifier":
        head, dims = "classifier", {"C": int(stored["logits/kernel"].shape[-1])}
    elif task_name == "AlbertMaskedLM":
        head = MASKED_LM_HEAD
    weights = {}
    for row in _rows(config, head, dims):
        value = stored.pop(row.keras_hub, None)
        if value is not None:
            weights[row.original] = _from_keras_hub(row, value)
    if config.embedding_size == config.hidden_size:
        pop_identity_projection(stored, config, "keras_hub", path)
    for name, value in stored.items():
        weights[f"<keras_hub>{name}"] = value  # reported as unexpected by check_weights
    return weights, config


FORMAT = CheckpointFormat(
    name="keras_hub",
    description=("a KerasHub preset directory (config.json + model.weights.h5; AlbertBackbone, "
                 "AlbertTextClassifier or AlbertMaskedLM by the head; with --spm_model_file "
                 "the AlbertTokenizer)"),
    output_files=OUTPUT_FILES,
    writes_albert_config=False,
    detect=detect_keras_hub,
    read=lambda path, config: (*read_keras_hub(path, config), path),
    write=write_keras_hub,
    can_represent=check_keras_hub_can_represent,
    writes_tokenizer=True,
)

# Largest |our masked-LM logit - keras_hub's| the tests allow: its head's LayerNorm
# epsilon is 1e-5, ours 1e-12. Measured on the tests' tiny random models: at most 1.1e-4
# (logits up to 2.6); the gap grows as the head's pre-LayerNorm variance shrinks.
MLM_OUTPUT_TOLERANCE = 1e-3
