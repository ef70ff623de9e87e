"""Strategy and loop defaults by device: TPUs found without flags, never a silent host fallback."""

import types

import pytest
import tensorflow as tf

from albert.errors import InputError
from albert.training import distribute


def _strategy_on(*devices):
    """Stands for a strategy whose replicas are `devices` (no such hardware here)."""
    return types.SimpleNamespace(extended=types.SimpleNamespace(worker_devices=devices),
                                 num_replicas_in_sync=len(devices))


def test_loop_defaults_by_device():
    cpu = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert distribute.loop_settings(cpu, None, 1000, None) == (1, False)
    gpus = _strategy_on("/job:localhost/replica:0/task:0/device:GPU:0",
                        "/job:localhost/replica:0/task:0/device:GPU:1")
    assert distribute.loop_settings(gpus, None, 1000, None) == (distribute.GPU_STEPS_PER_LOOP, True)
    # Explicit flags win.
    assert distribute.loop_settings(gpus, 7, 1000, False) == (7, False)
    assert distribute.loop_settings(cpu, 3, 1000, True) == (3, True)


@pytest.mark.parametrize("variable", distribute.TPU_VM_ENVIRONMENT)
def test_a_tpu_vm_is_found_without_flags(monkeypatch, variable):
    for name in (*distribute.TPU_VM_ENVIRONMENT, "TPU_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(distribute, "TPU_VM_DEVICE_FILES", ())
    assert distribute.attached_tpu() is None
    monkeypatch.setenv(variable, "v4-8")
    assert distribute.attached_tpu() == "local"
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert distribute.attached_tpu() == "my-tpu"


def test_auto_never_falls_back_to_the_host_when_a_tpu_is_attached_but_unreachable(monkeypatch):
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v4-8")
    with pytest.raises(InputError, match="Cannot connect to TPU local") as raised:
        distribute.create_strategy("auto")
    assert "\n" not in str(raised.value)
