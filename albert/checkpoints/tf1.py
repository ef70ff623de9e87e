"""The original's name-based TF1 checkpoints (released tarballs, TF-Hub modules, training runs)."""

from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from albert import io
from albert.checkpoints.format import CheckpointFormat
from albert.checkpoints.weights import Weights, drop_non_model_variables
from albert.checkpoints.damage import first_line
from albert.errors import CheckpointDamagedError, CheckpointMismatchError, InputError

# File name of a written checkpoint: the released tarballs' layout.
TF1_CHECKPOINT = "model.ckpt-best"
DATA_SUFFIX = ".data-00000-of-00001"
_HUB_PREFIX = "module/"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def checkpoint_files(prefix: str) -> Tuple[str, str]:
    """(index file, data file) of a single-shard TF checkpoint."""
    return prefix + ".index", prefix + DATA_SUFFIX


def resolve_checkpoint_prefix(path: str) -> str:
    """Turns what users pass as a checkpoint into a TF checkpoint prefix.

    Accepts the prefix itself (`.../model.ckpt-best`), any of its files
    (`model.ckpt-best.index` — the original loaded nothing when given this),
    or a directory: a training `output_dir` (its `checkpoint` state file), a
    released tarball (`model.ckpt-best`) or a TF-Hub module (`variables/variables`).
    """
    prefix = path
    for suffix in (".index", ".meta"):
        if prefix.endswith(suffix):
            prefix = prefix[: -len(suffix)]
    if ".data-" in io.basename(prefix):
        prefix = prefix[: prefix.rindex(".data-")]
    if io.exists(prefix + ".index"):
        return prefix
    if io.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        for candidate in (TF1_CHECKPOINT, io.join("variables", "variables")):
            prefix = io.join(path, candidate)
            if io.exists(prefix + ".index"):
                return prefix
        indexes = [name for name in io.listdir(path) if name.endswith(".index")]
        if len(indexes) == 1:
            return io.join(path, indexes[0][: -len(".index")])
        raise InputError(f"No checkpoint found in directory {path}")
    raise InputError(f"No checkpoint at {prefix} (expected {prefix}.index)")


def open_reader(path: str):
    """(CheckpointReader, prefix) of the TF checkpoint at `path`."""
    prefix = resolve_checkpoint_prefix(path)
    try:
        # Not tf.train.load_checkpoint: it asks whether the prefix is a
        # directory, which TensorFlow's ram:// file system answers wrongly.
        return tf.compat.v1.train.NewCheckpointReader(prefix), prefix
    except (tf.errors.OpError, ValueError) as error:
        raise CheckpointDamagedError(f"The checkpoint {prefix} cannot be read: it looks damaged "
                                     f"or cut short ({first_line(error)})") from None


def is_object_based(path: str) -> Optional[bool]:
    """True for TF2 object-based checkpoints, False for name-based ones, None if none is there."""
    try:
        reader, _ = open_reader(path)
    except InputError:
        return None
    return OBJECT_GRAPH_KEY in reader.get_variable_to_shape_map()


def read_tf1_tensors(path: str) -> Tuple[Dict[str, np.ndarray], str]:
    """Every tensor of a name-based checkpoint, `module/` prefix stripped; (tensors, prefix)."""
    reader, prefix = open_reader(path)
    shapes = reader.get_variable_to_shape_map()
    if OBJECT_GRAPH_KEY in shapes:
        raise CheckpointMismatchError(
            f"{prefix} is an object-based TF2 checkpoint, not an original name-based one; "
            "if it holds a Model Garden AlbertEncoder use --input_format=model_garden")
    stored = {name[len(_HUB_PREFIX):] if name.startswith(_HUB_PREFIX) else name: name
              for name in shapes}
    return {name: reader.get_tensor(key) for name, key in stored.items()}, prefix


def read_tf1(path: str) -> Tuple[Weights, str]:
    """Reads an original TF1 checkpoint into canonical weights.

    Optimizer slots, `global_step` and fine-tuning heads are skipped.
    Returns (weights, resolved prefix).
    """
    tensors, prefix = read_tf1_tensors(path)
    return {name: tensors[name] for name in drop_non_model_variables(tensors)}, prefix


def save_tensors(prefix: str, tensors: Dict[str, np.ndarray]) -> None:
    """Writes `{name: array}` as a name-based (V2 format) TF checkpoint at `prefix`."""
    names = list(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(np.asarray(tensors[name])) for name in names])


def write_tf1(weights: Weights, prefix: str, global_step: int = 0) -> None:
    """Writes canonical weights under their original names.

    The files load with the original code's `tf.train.init_from_checkpoint`,
    with `tf.compat.v1.train.Saver`, and with `transformers` 4.x's TF1 reader.
    `global_step` is written as the released checkpoints do.
    """
    save_tensors(prefix, dict(weights, global_step=np.int64(global_step)))


def _read(path: str, config):
    weights, prefix = read_tf1(path)
    return weights, None, prefix


FORMAT = CheckpointFormat(
    name="tf1",
    description=("the original's name-based TF checkpoints: a prefix, its .index file, a "
                 "training directory, a released tarball directory or a TF-Hub module"),
    output_files=checkpoint_files(TF1_CHECKPOINT),
    writes_albert_config=True,
    detect=lambda path: is_object_based(path) is False,
    read=_read,
    write=lambda weights, config, output_dir, head: write_tf1(
        weights, io.join(output_dir, TF1_CHECKPOINT)),
)
