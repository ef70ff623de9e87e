"""Lines TensorFlow's C++ runtime writes straight to file descriptor 2, kept out of the output.

Python's logging cannot filter them: they bypass it. `filtered_stderr`
captures the descriptor around a call and replays every line that is not
noise, in order, once the call returns.
"""

import contextlib
import glob
import os
import re
import sys
import tempfile

# What the TFLite converter's C++ side says on every conversion: notes on
# options it ignores for this kind of model ("W0000 ... Ignored output_format."),
# that an optional MLIR pass is off, and absl's note that it logs before being
# initialised. None is about the user's model; its real warnings pass.
TFLITE_CONVERTER_NOISE = re.compile(
    r"^[IW]0000 .*(Ignored output_format|Ignored drop_control_dependency|"
    r"MLIR V1 optimization pass is not enabled)|"
    r"All log messages before absl::InitializeLog")

# What tf2onnx's graph optimisation (Grappler) says on every conversion: that
# it found no GPU and starts a session. Its real warnings pass.
ONNX_CONVERTER_NOISE = re.compile(
    r"^I0000 .*(Number of eligible GPUs|Starting new session)|"
    r"All log messages before absl::InitializeLog")


# What TensorFlow's first device enumeration says on a machine without an
# NVIDIA GPU: the CUDA driver stub found no driver ("E ... cuda_platform.cc]
# failed call to cuInit: ... UNKNOWN ERROR (303)", at error level, so
# TF_CPP_MIN_LOG_LEVEL=2 lets it through) or no CUDA runtime. On such a machine
# it only says there is no GPU; where there is one it is the only sign of a
# broken driver, so `probe_tensorflow_devices` keeps it there.
NO_GPU_PROBE_NOISE = re.compile(
    r"failed call to cuInit|Could not find cuda drivers|cudart_stub")


def nvidia_gpu_present() -> bool:
    """Whether the machine shows an NVIDIA GPU: the driver's device nodes (Linux, or WSL's /dev/dxg).

    Read from the file system, so it is known before TensorFlow asks the CUDA
    driver (and without loading it).
    """
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/dxg")


def probe_tensorflow_devices(noise=None) -> None:
    """Enumerates TensorFlow's devices now, under `filtered_stderr`, when TensorFlow is
    loaded and there is noise to keep out: `noise`, and on a machine without an NVIDIA GPU
    the CUDA probe's "no GPU here" lines (`NO_GPU_PROBE_NOISE`). Every other line passes.

    TensorFlow probes CUDA once per process, at its first device enumeration,
    so what this call keeps out stays out. Enumerating physical devices does
    not start the runtime: devices and multi-worker strategies can still be
    configured afterwards.
    """
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is None:
        return
    patterns = [noise.pattern] if noise is not None else []
    if not nvidia_gpu_present():
        patterns.append(NO_GPU_PROBE_NOISE.pattern)
    if not patterns:
        return   # nothing to keep out: TensorFlow probes at its first use, as it would
    with filtered_stderr(re.compile("|".join(f"(?:{p})" for p in patterns))):
        tensorflow.config.list_physical_devices()


@contextlib.contextmanager
def filtered_stderr(noise):
    """Captures file descriptor 2 (C++ logs) and replays every line that is not noise."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines(True)
                    if not noise.search(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
