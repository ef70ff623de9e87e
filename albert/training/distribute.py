"""The tf.distribute strategy a run uses, from flags (`--strategy`, `--tpu`), and the
loop settings that suit its devices.

`auto` picks a TPU when `--tpu` is given or one is attached to this machine
(a TPU VM: found by `TPUClusterResolver("local")`), several workers when
TF_CONFIG lists them, all local GPUs when there are several, one GPU, or the
CPU. A TPU that is named or attached but cannot be reached ends the run with
one error line: it never falls back to training on the host CPU. No
home-made distribution: every scale-out is a `tf.distribute` strategy.

Loop defaults (`loop_settings`): on TPUs, `--iterations_per_loop` steps per
host call; on GPUs 100 (a host round trip per step costs a GPU about as much
as a small model's step); on CPUs 1 (nothing to gain, and the progress bar
moves every step). XLA is on by default on GPUs and TPUs and off on CPUs,
where it was measured slower (docs/accelerators.md).
"""

import dataclasses
import json
import logging
import os
from typing import Optional

import tensorflow as tf
from absl import flags

from albert.errors import InputError

logger = logging.getLogger("albert")

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")


def _cluster_workers() -> int:
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    except json.JSONDecodeError:
        raise InputError("TF_CONFIG is not valid JSON") from None
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def define_flags() -> None:
    """The distribution flags every training script shares."""
    flags.DEFINE_enum("strategy", "auto", STRATEGIES,
                      "tf.distribute strategy. auto picks the first that applies: tpu when --tpu, "
                      "--tpu_name or --use_tpu is given, or, with none of them, when this "
                      "machine has a TPU attached (a TPU VM: /dev/accel0 or its TPU_* "
                      "environment variables; or $TPU_NAME is set); multi_worker when TF_CONFIG "
                      "lists several workers; mirrored over all GPUs when there are several; "
                      "else one_device (the GPU, or the CPU).")
    flags.DEFINE_string("tpu", None, "TPU name or address (same as --tpu_name).")
    flags.DEFINE_integer("cpu_devices", 1,
                         "Split the CPU into this many logical devices, e.g. to run --strategy="
                         "mirrored without GPUs (testing distributed training).")


GPU_STEPS_PER_LOOP = 100
# Signs of a TPU VM: the TPU runtime's device files and the variables its image sets.
TPU_VM_DEVICE_FILES = ("/dev/accel0",)   # (v5e and later: the environment variables)
TPU_VM_ENVIRONMENT = ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_ID", "TPU_SKIP_MDS_QUERY")


def attached_tpu() -> Optional[str]:
    """The TPU this machine has without `--tpu`: "local" on a TPU VM, $TPU_NAME, or None."""
    if os.environ.get("TPU_NAME"):
        return os.environ["TPU_NAME"]
    if (any(os.path.exists(path) for path in TPU_VM_DEVICE_FILES)
            or any(os.environ.get(name) for name in TPU_VM_ENVIRONMENT)):
        return "local"
    return None


def _tpu_strategy(tpu: Optional[str]):
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise InputError(f"Cannot connect to TPU {tpu or '(auto)'}: {reason}") from None
    return tf.distribute.TPUStrategy(resolver)


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into `num_devices` logical devices (distribution without accelerators)."""
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError as error:
        raise InputError(f"--cpu_devices must be set before TensorFlow starts: {error}") from None


def create_strategy(name: str = "auto", tpu: Optional[str] = None, cpu_devices: int = 1):
    """The strategy `--strategy` names; `cpu_devices > 1` mirrors over that many CPU devices."""
    if name not in STRATEGIES:
        raise InputError(f"--strategy must be one of {', '.join(STRATEGIES)}")
    if cpu_devices < 1:
        raise InputError(f"--cpu_devices must be at least 1, got {cpu_devices}")
    if cpu_devices > 1:
        split_cpu(cpu_devices)
    gpus = tf.config.list_physical_devices("GPU")
    if name == "auto":
        tpu = tpu or attached_tpu()
        if tpu:
            name = "tpu"
        elif _cluster_workers() > 1:
            name = "multi_worker"
        elif len(gpus) > 1:
            name = "mirrored"
        else:
            name = "one_device"
    if name == "tpu":
        strategy = _tpu_strategy(tpu)
    elif name == "multi_worker":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif name == "mirrored":
        devices = None if gpus else [device.name for device in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices)
    else:
        strategy = tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    logger.info("Distribution strategy: %s with %d replica(s)", type(strategy).__name__,
                strategy.num_replicas_in_sync)
    return strategy


def is_tpu(strategy) -> bool:
    return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def uses_gpus(strategy) -> bool:
    """True when the strategy's replicas are GPUs."""
    devices = getattr(strategy.extended, "worker_devices", ())
    return any("GPU" in device.upper() for device in devices)


def loop_settings(strategy, steps_per_loop: Optional[int], iterations_per_loop: int,
                  jit_compile: Optional[bool]):
    """(steps per host call, XLA on?) from the flags, defaults by device (module docstring)."""
    if steps_per_loop is None:
        steps_per_loop = (iterations_per_loop if is_tpu(strategy) else
                          GPU_STEPS_PER_LOOP if uses_gpus(strategy) else 1)
    if jit_compile is None:
        jit_compile = is_tpu(strategy) or uses_gpus(strategy)
    return steps_per_loop, jit_compile


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """Where this process sits in the cluster."""

    index: int              # 0 is the chief: it writes checkpoints and logs
    count: int
    local_replicas: int

    @property
    def is_chief(self) -> bool:
        return self.index == 0


def worker_info(strategy) -> WorkerInfo:
    resolver = getattr(strategy, "cluster_resolver", None)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and resolver is not None:
        count = max(_cluster_workers(), 1)
        index = resolver.task_id if resolver.task_type == "worker" else 0
        if resolver.task_type == "worker" and "chief" in (resolver.cluster_spec().as_dict() or {}):
            index += 1
        return WorkerInfo(index, count, strategy.num_replicas_in_sync // count)
    return WorkerInfo(0, 1, strategy.num_replicas_in_sync)
