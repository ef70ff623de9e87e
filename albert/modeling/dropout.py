"""Dropout whose masks are a pure function of per-example seeds.

A framework's dropout draws its masks from a generator whose state advances
with every call on every device, so the masks an example gets depend on how
the batch was split across replicas and workers. Here every example carries
a 32-bit seed (the training loop derives it from the example's position in
the run's input stream, i.e. from the step and the example's place in the
global batch). Each dropout site derives its own key from that seed and a
site number, and each element's keep/drop decision is an integer hash of the
key and the element's index within the example. So the same example gets the
same masks on one device, on several replicas and on several workers, and
training with dropout on is identical for every topology.

The hash is `lowbias32` (a 32-bit integer finaliser with good avalanche)
evaluated in int32 with wrapping multiplication, which TensorFlow (with and
without XLA), PyTorch, JAX and NumPy all compute identically. It costs a
few integer operations per element, far less than the matrix products
around it.
"""

import keras
from keras import ops

_MULTIPLIER_1 = 0x7FEB352D
_MULTIPLIER_2 = 0x846CA68B - (1 << 32)   # as int32
_GOLDEN = 0x9E3779B9 - (1 << 32)         # as int32
_KEEP_BITS = 24


def _shift_right(x, bits):
    """Logical right shift of int32 values (the backends shift arithmetically)."""
    return ops.bitwise_and(ops.right_shift(x, bits), (1 << (32 - bits)) - 1)


def mix32(x):
    """The lowbias32 integer hash of an int32 tensor (wrapping arithmetic)."""
    x = ops.bitwise_xor(x, _shift_right(x, 16))
    x = ops.multiply(x, ops.cast(_MULTIPLIER_1, "int32"))
    x = ops.bitwise_xor(x, _shift_right(x, 15))
    x = ops.multiply(x, ops.cast(_MULTIPLIER_2, "int32"))
    return ops.bitwise_xor(x, _shift_right(x, 16))


def derive_seeds(seeds, salt: int):
    """Per-example seeds for a sub-site number `salt` (an int), [B] int32 -> [B] int32."""
    return mix32(ops.add(ops.cast(seeds, "int32"), ops.cast(mix32(ops.cast(salt + 1, "int32")),
                                                            "int32")))


DROPOUT_SEEDS = "dropout_seeds"
# The fine-tuning heads' dropout site: the encoder's sites are numbered from 0 upwards.
HEAD_DROPOUT_SITE = 2**30
_MAX_SEED = 2**31 - 1


def call_seeds(inputs: dict, batch_size, seed_generator):
    """The per-example seeds of a training call: the input's `dropout_seeds`, or drawn.

    The training loop always supplies them; a direct `model(x, training=True)`
    gets seeds from the model's own generator.
    """
    seeds = inputs.get(DROPOUT_SEEDS)
    if seeds is None:
        seeds = keras.random.randint((batch_size,), 0, _MAX_SEED, dtype="int32",
                                     seed=seed_generator)
    return ops.cast(seeds, "int32")


def dropout_keep_mask(shape, seeds, rate: float):
    """Boolean keep mask of `shape` ([B, ...]); row b is a function of seeds[b] only."""
    per_example = shape[1:]
    size = 1
    for dimension in per_example:
        size = size * dimension
    element = ops.reshape(ops.arange(size, dtype="int32"), per_example)
    element = ops.multiply(element, ops.cast(_GOLDEN, "int32"))
    key = ops.reshape(ops.cast(seeds, "int32"), [-1] + [1] * len(per_example))
    bits = mix32(ops.add(mix32(key), element))
    threshold = int(round(rate * (1 << _KEEP_BITS)))
    return ops.greater_equal(_shift_right(bits, 32 - _KEEP_BITS), threshold)


@keras.saving.register_keras_serializable(package="albert")
class SeededDropout(keras.layers.Layer):
    """Inverted dropout driven by per-example seeds (see the module docstring).

    In training, `x * keep / (1 - rate)` with `keep` from
    `dropout_keep_mask(shape, seeds, rate)`; in inference, or with rate 0,
    the identity.

    Args:
      rate: fraction of elements dropped.

    Example:
        dropout = SeededDropout(0.1)
        y = dropout(x, seeds=derive_seeds(example_seeds, 3), training=True)
    """

    def __init__(self, rate: float, **kwargs):
        super().__init__(**kwargs)
        self.rate = float(rate)

    def call(self, inputs, seeds=None, training=False):
        if not training or self.rate == 0:
            return inputs
        if seeds is None:
            raise ValueError("SeededDropout needs per-example seeds in training")
        keep = dropout_keep_mask(ops.shape(inputs), seeds, self.rate)
        scale = 1.0 / (1.0 - self.rate)
        return ops.where(keep, inputs * ops.cast(scale, inputs.dtype), ops.zeros_like(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate)
        return config
