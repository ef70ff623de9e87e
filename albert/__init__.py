"""ALBERT (Lan et al., ICLR 2020) for TensorFlow 2 / Keras 3.

Importing the package registers its Keras layers and models, so `.keras`
files written by it load with `keras.saving.load_model` after `import albert`.
"""

import os

# TensorFlow's C++ start-up INFO/WARNING lines (CUDA probing, oneDNN, CPU
# features) bury the scripts' own output; users can still set their own level.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# TensorFlow turns its oneDNN kernels on by itself only on x86 CPUs with
# AVX-512 VNNI, bfloat16 or AMX. Elsewhere (AVX2 machines, most AMD ones) its
# Eigen kernels run the float32 matrix products at about half oneDNN's speed
# and a training step holds more memory (docs/memory.md, "CPU kernels").
# Results differ from Eigen's by round-off only. It must be set before
# TensorFlow is imported; TF_ENABLE_ONEDNN_OPTS=0 keeps Eigen's kernels.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

from albert.config import AlbertConfig  # noqa: E402
from albert.errors import AlbertError, CheckpointMismatchError, ConfigError, InputError  # noqa: E402

# Worker processes of the data pipeline set ALBERT_LIGHTWEIGHT_IMPORT=1: they
# use only pure-Python modules and must not pay for loading Keras and
# TensorFlow (seconds and hundreds of MB per process).
if os.environ.get("ALBERT_LIGHTWEIGHT_IMPORT") != "1":
    from albert.modeling import AlbertClassifier, AlbertEncoder, AlbertPretrainer  # noqa: E402,F401
    from albert.native_logs import probe_tensorflow_devices  # noqa: E402

    # On a machine without a GPU, TensorFlow's first use of a device (building a
    # model) logs "failed call to cuInit: ... UNKNOWN ERROR (303)" at error level,
    # which reads as a failure. Probing now keeps that line out there, and only
    # there; any other line of the probe still reaches stderr.
    probe_tensorflow_devices()

__version__ = "0.1.0"

__all__ = [
    "AlbertClassifier",
    "AlbertConfig",
    "AlbertEncoder",
    "AlbertError",
    "AlbertPretrainer",
    "CheckpointMismatchError",
    "ConfigError",
    "InputError",
]
