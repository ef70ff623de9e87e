"""Training checkpoints in the original's layout, written atomically.

`model.ckpt-N` holds exactly what the original's training checkpoints hold:
every model variable under its original TF1 name, the optimizer slots
`<name>/adam_m` and `<name>/adam_v`, and `global_step` — so the original
code's `init_from_checkpoint`, `transformers` 4.x's TF1 loader and
`convert_checkpoint.py` read it. The rest of the training state (the
mixed-precision loss scale, the model's fallback seed generator) goes to
`training_state-N.json` beside it. The position in the input stream needs
no file: it is `global_step` times the global batch (`albert.records.streams`).

A checkpoint appears under its final names only once complete (written
under a temporary name, data file renamed first, index last), and is listed
in the `checkpoint` state file, which is replaced last. Every file
operation goes through `albert.io`, so output directories on GCS work.
"""

import errno
import logging
import re
from typing import Dict, Iterable, List, Optional

import numpy as np
import tensorflow as tf

from albert import interrupts, io
from albert.checkpoints.naming import GLOBAL_STEP, OPTIMIZER_SLOTS, slot_name
from albert.checkpoints.tf1 import checkpoint_files, open_reader, save_tensors
from albert.checkpoints.weights import model_variables
from albert.checkpoints.damage import reading
from albert.errors import CheckpointDamagedError, CheckpointMismatchError, DiskFullError

logger = logging.getLogger("albert")

PREFIX = "model.ckpt"
BEST = f"{PREFIX}-best"
STATE_FILE = "checkpoint"
_STEP = re.compile(r"model\.ckpt-(\d+)$")


def _unwrap(optimizer):
    return getattr(optimizer, "inner_optimizer", optimizer)


def checkpoint_variables(model, optimizer) -> Dict[str, object]:
    """The variables `model.ckpt-N` holds, by their original names."""
    names: Dict[str, object] = {}
    inner = _unwrap(optimizer)
    for name, variable in model_variables(model).items():
        names[name] = variable
        if variable.trainable and inner.built:
            for slot, value in zip(OPTIMIZER_SLOTS, inner.slots(variable)):
                names[slot_name(name, slot)] = value
    names[GLOBAL_STEP] = optimizer.iterations
    return names


def extra_state_variables(model, optimizer) -> Dict[str, List[object]]:
    """Training state outside the original's checkpoint content, by owner and position.

    Keras names such variables with process-wide counters, so they are
    identified by their order, which is fixed by the model and optimizer.
    """
    known = {id(v) for v in checkpoint_variables(model, optimizer).values()}
    return {
        "model": [v for v in model.variables if id(v) not in known],
        "optimizer": [v for v in optimizer.variables if id(v) not in known],
    }


def _is_disk_full(error: Exception) -> bool:
    """ENOSPC, from Python (OSError) or from TensorFlow's file writers (ResourceExhaustedError
    whose message carries the system's words)."""
    return (getattr(error, "errno", None) == errno.ENOSPC
            or "No space left on device" in str(getattr(error, "message", None) or error))


def _value(variable) -> np.ndarray:
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable)


class TrainingCheckpoints:
    """Saves, finds, restores and prunes the checkpoints of one training run."""

    def __init__(self, output_dir: str, keep_checkpoint_max: int = 5, is_chief: bool = True):
        self.output_dir = output_dir
        self.keep_checkpoint_max = keep_checkpoint_max
        self.is_chief = is_chief
        # Steps whose files did not read back (cut short, corrupted): {step: why}. They stay on
        # disk as they are and are no longer offered to resume or evaluate.
        self.damaged: Dict[int, str] = {}
        # Whether the `checkpoint` state file did not read back; the checkpoints on disk are
        # listed instead, and the file is kept under another name when it is next written.
        self.state_damaged = False

    def prefix(self, step) -> str:
        return io.join(self.output_dir, f"{PREFIX}-{step}")

    def state_path(self, step: int) -> str:
        return io.join(self.output_dir, f"training_state-{step}.json")

    # ------------------------------------------------------------- finding
    def _listed(self) -> List[int]:
        """The steps the `checkpoint` state file lists; where that file cannot be read or lists
        none while checkpoints lie beside it (damaged, cut short, emptied), those checkpoints."""
        path = io.join(self.output_dir, STATE_FILE)
        if not io.exists(path):
            return []
        try:
            text = io.read_text(path)
        except (UnicodeDecodeError, OSError) as error:
            return self._found_beside_damaged_state(path, f"{type(error).__name__}: {error}")
        steps = []
        for line in text.splitlines():
            if line.startswith("all_model_checkpoint_paths:"):
                match = _STEP.search(line.split(":", 1)[1].strip().strip('"'))
                if match:
                    steps.append(int(match.group(1)))
        if not steps and self._on_disk():
            return self._found_beside_damaged_state(path, "it lists no checkpoint")
        return sorted(set(steps))

    def _on_disk(self) -> List[int]:
        """Steps with a model.ckpt-<step>.index in the output directory."""
        steps = (_STEP.search(name[:-len(".index")]) for name in io.listdir(self.output_dir)
                 if name.endswith(".index"))
        return sorted(int(match.group(1)) for match in steps if match)

    def _found_beside_damaged_state(self, path: str, why: str) -> List[int]:
        steps = self._on_disk()
        if not self.state_damaged:
            logger.warning("The checkpoint state file %s is damaged (%s); using the checkpoints "
                           "found beside it: %s. It is renamed, not replaced, when the next "
                           "checkpoint is listed", path, why,
                           ", ".join(f"{PREFIX}-{step}" for step in steps) or "none")
        self.state_damaged = True
        return steps

    def steps(self) -> List[int]:
        """Steps of the complete checkpoints listed in the `checkpoint` state file, ascending
        (those found damaged left out)."""
        return [step for step in self._listed()
                if step not in self.damaged and io.exists(self.prefix(step) + ".index")]

    def mark_damaged(self, step: int, error: Exception) -> None:
        """Sets model.ckpt-<step> aside (on disk, untouched) after it failed to read back."""
        self.damaged[step] = str(error)
        logger.warning("%s; it is left in place and not used", error)

    def no_intact_error(self) -> CheckpointDamagedError:
        """The error when every checkpoint of the run is damaged."""
        names = ", ".join(f"{PREFIX}-{step}" for step in sorted(self.damaged))
        return CheckpointDamagedError(
            f"no checkpoint in {self.output_dir} reads back whole ({names} damaged; they are "
            "left in place): move them elsewhere to train from the start, or restore them "
            "from a copy")

    def latest_step(self) -> Optional[int]:
        steps = self.steps()
        return steps[-1] if steps else None

    # -------------------------------------------------------------- saving
    def save(self, step: int, model, optimizer) -> str:
        """Writes model.ckpt-<step> and its training state (chief only) and lists it."""
        prefix = self.prefix(step)
        if not self.is_chief:
            return prefix
        tensors = {name: _value(variable)
                   for name, variable in checkpoint_variables(model, optimizer).items()}
        # Files, training state and the listing go together: a Ctrl-C in between would leave
        # a complete checkpoint that the next run cannot see.
        try:
            with interrupts.deferred():
                return self._write(step, prefix, tensors, model, optimizer)
        except (tf.errors.OpError, OSError) as error:
            if not _is_disk_full(error):
                raise
            latest = self.latest_step()
            kept = (f"checkpoint {latest} is intact: free space and run the same command to "
                    "resume from it" if latest is not None else
                    "no earlier checkpoint was written: free space and run the same command")
            raise DiskFullError(f"no space left on the device writing checkpoint {step} in "
                                f"{self.output_dir}; {kept}") from None

    def _write(self, step, prefix, tensors, model, optimizer) -> str:
        self._set_damaged_aside(step)
        temporary = io.temporary_name(prefix)
        try:
            save_tensors(temporary, tensors)
            # Data first, index last: a checkpoint is only visible once complete.
            for source, target in zip(reversed(checkpoint_files(temporary)),
                                      reversed(checkpoint_files(prefix))):
                io.rename(source, target)
        finally:
            for leftover in checkpoint_files(temporary):
                io.remove_if_exists(leftover)
        extra = extra_state_variables(model, optimizer)
        io.write_json_atomically(self.state_path(step), {
            owner: [_value(v).tolist() for v in variables] for owner, variables in extra.items()})
        self._write_state(sorted(set(self._listed()) | {step}))
        return prefix

    def _set_damaged_aside(self, step: int) -> None:
        """A damaged checkpoint at the step about to be written (the run resumed from an
        earlier one and came back to it) is renamed, not replaced: its bytes are the user's."""
        if step not in self.damaged:
            return
        prefix = self.prefix(step)
        for path in (*checkpoint_files(prefix), self.state_path(step)):
            if io.exists(path):
                aside = path.replace(f"{PREFIX}-{step}", f"{PREFIX}-{step}.damaged").replace(
                    f"training_state-{step}", f"training_state-{step}.damaged")
                io.rename(path, aside)
                logger.warning("Renamed the damaged %s to %s", path, aside)
        del self.damaged[step]

    def prune(self, protected: Iterable[int] = ()) -> List[int]:
        """Deletes all but the newest `keep_checkpoint_max` checkpoints (0 keeps all).

        Checkpoints in `protected` (e.g. not evaluated yet) are never deleted.
        Returns the deleted steps.
        """
        if not self.is_chief or self.keep_checkpoint_max <= 0:
            return []
        steps = self._listed()
        keep = set(steps[-self.keep_checkpoint_max:]) | set(protected)
        dropped = [step for step in steps if step not in keep]
        if dropped:
            with interrupts.deferred():  # no half-deleted checkpoint left behind
                self._write_state([step for step in steps if step in keep])
                for step in dropped:
                    for path in (list(checkpoint_files(self.prefix(step)))
                                 + [self.state_path(step)]):
                        io.remove_if_exists(path)
        return dropped

    def _write_state(self, steps: List[int]) -> None:
        lines = [f'model_checkpoint_path: "{PREFIX}-{steps[-1]}"'] if steps else []
        lines += [f'all_model_checkpoint_paths: "{PREFIX}-{s}"' for s in steps]
        path = io.join(self.output_dir, STATE_FILE)
        if self.state_damaged and io.exists(path):
            aside = next(f"{path}.damaged{suffix}" for suffix in ("", *map(str, range(1, 1000)))
                         if not io.exists(f"{path}.damaged{suffix}"))
            io.rename(path, aside)
            logger.warning("Renamed the damaged %s to %s", path, aside)
        self.state_damaged = False
        io.write_text_atomically(path, "\n".join(lines) + "\n")

    # ---------------------------------------------------------------- best
    def _copy_marker(self) -> str:
        return io.join(self.output_dir, f".{BEST}.copying")

    def copy_to_best(self, step: int) -> None:
        """Copies model.ckpt-<step> to model.ckpt-best (the original's name for it).

        A marker file exists while the copy is under way: a copy interrupted
        between its two renames (new data, old index) is recognised by it.
        """
        if not self.is_chief:
            return
        best = io.join(self.output_dir, BEST)
        temporary = io.temporary_name(best)
        io.write_text_atomically(self._copy_marker(), f"{step}\n")
        try:
            for source, target in zip(checkpoint_files(self.prefix(step)),
                                      checkpoint_files(temporary)):
                io.copy(source, target)
            for source, target in zip(reversed(checkpoint_files(temporary)),
                                      reversed(checkpoint_files(best))):
                io.rename(source, target)
            io.remove(self._copy_marker())
        finally:
            for leftover in checkpoint_files(temporary):
                io.remove_if_exists(leftover)

    def best_is_copy_of(self, step: int) -> bool:
        """Whether model.ckpt-best is a finished copy of model.ckpt-<step>.

        The index holds a checksum of every tensor, so equal index files mean
        equal checkpoints once no copy is under way.
        """
        best_index, best_data = checkpoint_files(io.join(self.output_dir, BEST))
        index, _ = checkpoint_files(self.prefix(step))
        if io.exists(self._copy_marker()) or not (io.exists(best_index) and io.exists(best_data)):
            return False
        return io.read_bytes(best_index) == io.read_bytes(index)

    # ----------------------------------------------------------- restoring
    def check_restorable(self, step: int, model, optimizer) -> None:
        """Raises CheckpointMismatchError unless model.ckpt-<step> fits this model and optimizer
        (CheckpointDamagedError if its index cannot be read)."""
        reader, prefix = open_reader(self.prefix(step))
        stored = reader.get_variable_to_shape_map()
        variables = checkpoint_variables(model, optimizer)
        missing = [name for name in variables if name not in stored]
        misshaped = [f"{name}: checkpoint {stored[name]}, model {list(variable.shape)}"
                     for name, variable in variables.items()
                     if name in stored and list(stored[name]) != list(variable.shape)]
        if missing or misshaped:
            details = (f"lacks {len(missing)} variables (e.g. {', '.join(missing[:3])})"
                       if missing else f"has other shapes ({'; '.join(misshaped[:3])})")
            raise CheckpointMismatchError(
                f"{prefix} cannot resume this run: it {details}; was it written with another "
                "config or optimizer? Use a new --output_dir, or --init_checkpoint to start "
                "from it")

    def restore(self, step: int, model, optimizer) -> None:
        """Restores the model, optimizer slots, global step and the other training state."""
        self.check_restorable(step, model, optimizer)
        reader, prefix = open_reader(self.prefix(step))
        # Every tensor is read back and checksummed: a cut or corrupted data file fails here,
        # perhaps after some variables were assigned (the caller then restores an older one).
        with reading(prefix, "The checkpoint"):
            for name, variable in checkpoint_variables(model, optimizer).items():
                variable.assign(reader.get_tensor(name).astype(variable.dtype))
        path = self.state_path(step)
        if not io.exists(path):
            logger.warning("No %s: the loss scale and seed-generator state start afresh", path)
            return
        stored = io.read_json(path)
        for owner, variables in extra_state_variables(model, optimizer).items():
            values = stored.get(owner, [])
            if len(values) != len(variables):
                raise CheckpointMismatchError(
                    f"{path} holds {len(values)} {owner} state values, this run has "
                    f"{len(variables)}; was it written with another --mixed_precision?")
            for variable, value in zip(variables, values):
                variable.assign(np.asarray(value, dtype=_value(variable).dtype))
