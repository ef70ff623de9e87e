"""ALBERT (Lan et al., ICLR 2020) for TensorFlow 2 / Keras 3.

Importing the package registers its Keras layers and models, so `.keras`
files written by it load with `keras.saving.load_model` after `import albert`.
"""

import os

# TensorFlow's C++ start-up INFO/WARNING lines (CUDA probing, oneDNN, CPU
# features) bury the scripts' own output; users can still set their own level.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert.config import AlbertConfig
from albert.errors import AlbertError, CheckpointMismatchError, ConfigError, InputError
from albert.modeling import AlbertEncoder, AlbertPretrainer

__version__ = "0.1.0"

__all__ = [
    "AlbertConfig",
    "AlbertEncoder",
    "AlbertError",
    "AlbertPretrainer",
    "CheckpointMismatchError",
    "ConfigError",
    "InputError",
]
