"""Training checkpoints in the original's layout, written atomically, with the input position.

`model.ckpt-N` holds, under the original TF1 names, every model variable,
its optimizer slots `<name>/adam_m` and `<name>/adam_v`, and `global_step` —
exactly what the original's training wrote, so the original code,
`transformers` 4.x and `convert_checkpoint.py` read it. The rest of the
training state (dropout random-generator states, loss-scale state) is stored
under `training_state/...`, which readers of model weights skip.

The position in the input stream is saved per worker as a tf.data iterator
checkpoint `input_state-N-worker<i>`, written before the model checkpoint:
a checkpoint listed in the `checkpoint` file is complete for every worker.

Files appear under their final names only once complete (written under a
temporary name, then renamed); the `checkpoint` state file is replaced last.
File operations use tf.io.gfile, so output directories on GCS work.
"""

import logging
import os
import re
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert.checkpoints.weights import model_variables
from albert.errors import CheckpointMismatchError

logger = logging.getLogger("albert")

PREFIX = "model.ckpt"
BEST = f"{PREFIX}-best"
_DATA_SUFFIX = ".data-00000-of-00001"
_STEP = re.compile(r"model\.ckpt-(\d+)$")


def _checkpoint_files(prefix: str) -> List[str]:
    return [prefix + ".index", prefix + _DATA_SUFFIX]


def _write_atomically(write, prefix: str) -> None:
    """Runs `write(temporary_prefix)` then renames its files to `prefix`'s names."""
    directory, name = os.path.split(prefix)
    temporary = os.path.join(directory, f".tmp-{name}-{os.getpid()}")
    write(temporary)
    # Data first, index last: a checkpoint is only visible once complete.
    for source, target in zip(reversed(_checkpoint_files(temporary)),
                              reversed(_checkpoint_files(prefix))):
        tf.io.gfile.rename(source, target, overwrite=True)


def _unwrap(optimizer):
    return getattr(optimizer, "inner_optimizer", optimizer)


def training_variables(model, optimizer) -> Dict[str, object]:
    """Every variable a training checkpoint holds, by checkpoint name."""
    names: Dict[str, object] = {}
    canonical = model_variables(model)
    inner = _unwrap(optimizer)
    for name, variable in canonical.items():
        names[name] = variable
        if variable.trainable and inner.built:
            m, v = inner.slots(variable)
            names[f"{name}/adam_m"] = m
            names[f"{name}/adam_v"] = v
    names["global_step"] = optimizer.iterations
    # Other state (dropout seed generators, loss scale) is named by its
    # position: Keras names such variables with process-wide counters.
    known = {id(v) for v in names.values()}
    extra_model = [v for v in model.variables if id(v) not in known]
    extra_optimizer = [v for v in optimizer.variables
                       if id(v) not in known and v is not optimizer.iterations]
    for index, variable in enumerate(extra_model):
        names[f"training_state/model/{index}"] = variable
    for index, variable in enumerate(extra_optimizer):
        names[f"training_state/optimizer/{index}"] = variable
    return names


class TrainingCheckpoints:
    """Saves, finds and restores the checkpoints of one training run."""

    def __init__(self, output_dir: str, keep_checkpoint_max: int = 5, worker_index: int = 0,
                 is_chief: bool = True):
        self.output_dir = output_dir
        self.keep_checkpoint_max = keep_checkpoint_max
        self.worker_index = worker_index
        self.is_chief = is_chief

    def prefix(self, step: int) -> str:
        return os.path.join(self.output_dir, f"{PREFIX}-{step}")

    def _input_prefix(self, step: int, worker: Optional[int] = None) -> str:
        worker = self.worker_index if worker is None else worker
        return os.path.join(self.output_dir, f"input_state-{step}-worker{worker}")

    # ------------------------------------------------------------- finding
    def steps(self) -> List[int]:
        """Steps of the checkpoints listed in the `checkpoint` state file, ascending."""
        state = tf.train.get_checkpoint_state(self.output_dir)
        if state is None:
            return []
        steps = []
        for path in state.all_model_checkpoint_paths:
            match = _STEP.search(path)
            if match and tf.io.gfile.exists(self.prefix(int(match.group(1))) + ".index"):
                steps.append(int(match.group(1)))
        return sorted(set(steps))

    def latest_step(self) -> Optional[int]:
        steps = self.steps()
        return steps[-1] if steps else None

    # -------------------------------------------------------------- saving
    def save_input_state(self, step: int, iterator) -> None:
        if iterator is None:
            return
        checkpoint = tf.train.Checkpoint(iterator=iterator)
        _write_atomically(checkpoint.write, self._input_prefix(step))

    def save(self, step: int, model, optimizer) -> str:
        """Writes model.ckpt-<step> (chief only), updates the state file, prunes old ones."""
        prefix = self.prefix(step)
        if not self.is_chief:
            return prefix
        variables = training_variables(model, optimizer)
        names = list(variables)
        tensors = [tf.constant(np.asarray(variables[name].numpy())) for name in names]
        _write_atomically(lambda path: tf.raw_ops.SaveV2(
            prefix=path, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors),
            prefix)
        previous = [s for s in self.steps() if s != step]
        if self.keep_checkpoint_max <= 0:  # 0 keeps every checkpoint, as TF's Saver does
            kept = previous
        else:
            kept = previous[len(previous) - (self.keep_checkpoint_max - 1):] \
                if self.keep_checkpoint_max > 1 else []
        kept.append(step)
        dropped = [s for s in self.steps() if s not in kept]
        self._write_state(kept)
        for old in dropped:
            self._delete(old)
        return prefix

    def _write_state(self, steps: List[int]) -> None:
        lines = [f'model_checkpoint_path: "{PREFIX}-{steps[-1]}"']
        lines += [f'all_model_checkpoint_paths: "{PREFIX}-{s}"' for s in steps]
        path = os.path.join(self.output_dir, "checkpoint")
        temporary = path + f".tmp-{os.getpid()}"
        with tf.io.gfile.GFile(temporary, "w") as handle:
            handle.write("\n".join(lines) + "\n")
        tf.io.gfile.rename(temporary, path, overwrite=True)

    def _delete(self, step: int) -> None:
        patterns = [self.prefix(step) + ".*",
                    os.path.join(self.output_dir, f"input_state-{step}-worker*")]
        for pattern in patterns:
            for path in tf.io.gfile.glob(pattern):
                tf.io.gfile.remove(path)

    def copy_to_best(self, step: int) -> None:
        """Copies model.ckpt-<step> to model.ckpt-best (the original's name for it)."""
        if not self.is_chief:
            return
        source, target = self.prefix(step), os.path.join(self.output_dir, BEST)
        temporary = os.path.join(self.output_dir, f".tmp-{BEST}-{os.getpid()}")
        for source_file, temporary_file in zip(_checkpoint_files(source), _checkpoint_files(temporary)):
            tf.io.gfile.copy(source_file, temporary_file, overwrite=True)
        for temporary_file, target_file in zip(reversed(_checkpoint_files(temporary)),
                                               reversed(_checkpoint_files(target))):
            tf.io.gfile.rename(temporary_file, target_file, overwrite=True)

    # ----------------------------------------------------------- restoring
    def restore(self, step: int, model, optimizer, iterator=None) -> None:
        """Restores the model, optimizer slots, global step, training state and input position."""
        prefix = self.prefix(step)
        reader = tf.train.load_checkpoint(prefix)
        stored = reader.get_variable_to_shape_map()
        variables = training_variables(model, optimizer)
        missing = [name for name in variables if name not in stored]
        if missing:
            raise CheckpointMismatchError(
                f"{prefix} cannot resume this run: it lacks {len(missing)} variables "
                f"(e.g. {', '.join(missing[:5])}); was it written with another config or "
                "optimizer? Use a new --output_dir, or --init_checkpoint to start from it")
        for name, variable in variables.items():
            value = reader.get_tensor(name)
            if tuple(value.shape) != tuple(variable.shape):
                raise CheckpointMismatchError(
                    f"{prefix}: {name} has shape {list(value.shape)}, the model "
                    f"{list(variable.shape)}; use a new --output_dir")
            variable.assign(value.astype(variable.dtype))
        if iterator is not None:
            input_prefix = self._input_prefix(step)
            if tf.io.gfile.exists(input_prefix + ".index"):
                tf.train.Checkpoint(iterator=iterator).read(input_prefix).assert_consumed()
            else:
                logger.warning("No saved input position for step %d; the input starts afresh", step)
