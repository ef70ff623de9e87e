"""The original's name-based TF1 checkpoints (released tarballs, TF-Hub modules, training runs)."""

import os
from typing import Tuple

import numpy as np
import tensorflow as tf

from albert.checkpoints.weights import Weights, drop_non_model_variables
from albert.errors import CheckpointMismatchError, InputError

# File name of a written checkpoint: the released tarballs' layout.
TF1_CHECKPOINT = "model.ckpt-best"
_HUB_PREFIX = "module/"


def resolve_checkpoint_prefix(path: str) -> str:
    """Turns what users pass as a checkpoint into a TF checkpoint prefix.

    Accepts the prefix itself (`.../model.ckpt-best`), any of its files
    (`model.ckpt-best.index` — the original loaded nothing when given this),
    or a directory: a training `output_dir` (its `checkpoint` state file), a
    released tarball (`model.ckpt-best`) or a TF-Hub module (`variables/variables`).
    """
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        for candidate in (TF1_CHECKPOINT, os.path.join("variables", "variables")):
            prefix = os.path.join(path, candidate)
            if os.path.exists(prefix + ".index"):
                return prefix
        indexes = sorted(name for name in os.listdir(path) if name.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0][: -len(".index")])
        raise InputError(f"No checkpoint found in directory {path}")
    for suffix in (".index", ".meta"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if ".data-" in os.path.basename(path):
        path = path[: path.rindex(".data-")]
    if not os.path.exists(path + ".index"):
        raise InputError(f"No checkpoint at {path} (expected {path}.index)")
    return path


def read_tf1(path: str) -> Tuple[Weights, str]:
    """Reads an original TF1 checkpoint into canonical weights.

    The TF-Hub `module/` prefix is stripped; optimizer slots, `global_step`
    and fine-tuning heads are skipped. Returns (weights, resolved prefix).
    """
    prefix = resolve_checkpoint_prefix(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise InputError(f"Cannot read checkpoint {prefix}: {error}") from None
    shapes = reader.get_variable_to_shape_map()
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes:
        raise CheckpointMismatchError(
            f"{prefix} is an object-based TF2 checkpoint, not an original name-based one; "
            "if it holds a Model Garden AlbertEncoder use --input_format=model_garden")
    stored = {name[len(_HUB_PREFIX):] if name.startswith(_HUB_PREFIX) else name: name
              for name in shapes}
    return ({name: reader.get_tensor(stored[name]) for name in drop_non_model_variables(stored)},
            prefix)


def write_tf1(weights: Weights, prefix: str, global_step: int = 0) -> None:
    """Writes canonical weights under their original names (V2 checkpoint format).

    The files load with the original code's `tf.train.init_from_checkpoint`,
    with `tf.compat.v1.train.Saver`, and with `transformers` 4.x's TF1 reader.
    `global_step` is written as the released checkpoints do.
    """
    names = list(weights) + ["global_step"]
    tensors = [tf.constant(np.asarray(weights[name])) for name in weights]
    tensors.append(tf.constant(global_step, dtype=tf.int64))
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=tensors)
