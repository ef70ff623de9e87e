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
evaluated with wrapping 32-bit multiplication, which TensorFlow (with and
without XLA), PyTorch, JAX and NumPy all compute identically. It costs a
few integer operations per element, far less than the matrix products
around it.

On the TensorFlow backend the per-element arithmetic runs in uint32, the
other backends use int32; the bits, and so the masks, are the same. Why:
TensorFlow's GPU kernels for int32 arithmetic keep their tensors in host
memory (int32 is TensorFlow's "shape" type), so an int32 hash of a
`[batch, heads, seq, seq]` attention mask would cross PCIe several times
per layer when a GPU runs without XLA; uint32 has device-memory GPU
kernels for every operation used here. Per-example seeds (`[batch]`) stay
int32.
"""

import keras
from keras import ops

_MULTIPLIER_1 = 0x7FEB352D
_MULTIPLIER_2 = 0x846CA68B
_GOLDEN = 0x9E3779B9
_KEEP_BITS = 24


def _constant(value: int, dtype: str):
    """A 32-bit pattern as a scalar of `dtype` ("int32": the two's-complement value)."""
    if dtype == "int32" and value >= 1 << 31:
        value -= 1 << 32
    return ops.cast(value, dtype)


def _shift_right(x, bits):
    """Logical right shift of 32-bit values (the backends shift int32 arithmetically)."""
    dtype = keras.backend.standardize_dtype(x.dtype)
    return ops.bitwise_and(ops.right_shift(x, _constant(bits, dtype)),
                           _constant((1 << (32 - bits)) - 1, dtype))


def mix32(x):
    """The lowbias32 integer hash of an int32 or uint32 tensor (wrapping arithmetic)."""
    dtype = keras.backend.standardize_dtype(x.dtype)
    x = ops.bitwise_xor(x, _shift_right(x, 16))
    x = ops.multiply(x, _constant(_MULTIPLIER_1, dtype))
    x = ops.bitwise_xor(x, _shift_right(x, 15))
    x = ops.multiply(x, _constant(_MULTIPLIER_2, dtype))
    return ops.bitwise_xor(x, _shift_right(x, 16))


def _mask_dtype() -> str:
    """The dtype of the per-element hash (uint32 on TensorFlow: see the module docstring)."""
    return "uint32" if keras.backend.backend() == "tensorflow" else "int32"


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


def _element_terms(per_example, dtype):
    """Ramps, one per axis, whose broadcast sum is each element's flat index times the
    golden-ratio constant, modulo 2^32.

    Summing per-axis ramps instead of multiplying a ramp of every element keeps
    the program small: with static shapes, TensorFlow folds a ramp of every
    element into a literal constant of the whole per-example shape (e.g.
    [512, 768] per dropout site and layer application: 47 MB of constants in
    ALBERT-base's compiled step, 130 MB in large's), while these fold into one
    ramp per axis. The bits are the same: in wrapping arithmetic
    (sum_a i_a * stride_a) * G = sum_a i_a * (stride_a * G).
    """
    # int64 range: TensorFlow's int32 range on a GPU writes its output to host memory.
    range_dtype = "int64" if dtype == "uint32" else "int32"
    rank = len(per_example)
    terms, stride = [], 1
    for axis in reversed(range(rank)):
        factor = ops.multiply(ops.cast(stride, dtype), _constant(_GOLDEN, dtype))
        ramp = ops.multiply(ops.cast(ops.arange(per_example[axis], dtype=range_dtype), dtype),
                            factor)
        terms.append(ops.reshape(ramp, [1] * (axis + 1) + [-1] + [1] * (rank - axis - 1)))
        stride = stride * per_example[axis]
    return terms


def dropout_keep_mask(shape, seeds, rate: float):
    """Boolean keep mask of `shape` ([B, ...]); row b is a function of seeds[b] only.

    Element i (flat index within the example) of row b is kept when the top 24
    bits of mix32(mix32(seeds[b]) + i * 0x9E3779B9) reach rate * 2^24.
    """
    per_example = list(shape[1:])
    dtype = _mask_dtype()
    bits = mix32(ops.cast(ops.reshape(ops.cast(seeds, "int32"), [-1] + [1] * len(per_example)),
                          dtype))
    for term in _element_terms(per_example, dtype):
        # The backend's own broadcasting add, not `ops.add`: Keras's TensorFlow
        # `add` turns x + y into a bias-add along x's last axis whenever y has one
        # axis longer than 1 whose length equals x's last (or second) axis,
        # wherever that axis of y is: [1, 1, 32] + [1, 32, 1] came out [1, 1, 32].
        bits = bits + term
    bits = mix32(bits)
    threshold = int(round(rate * (1 << _KEEP_BITS)))
    return ops.greater_equal(_shift_right(bits, 32 - _KEEP_BITS), _constant(threshold, dtype))


def _dropout(inputs, keep, rate: float):
    scale = ops.cast(1.0 / (1.0 - rate), inputs.dtype)
    return ops.where(keep, inputs * scale, ops.zeros_like(inputs))


def _dropout_recomputing_the_mask(inputs, seeds, rate: float):
    """`_dropout` whose backward pass computes the keep mask again instead of keeping it.

    The mask is a hash of the seeds, a few integer operations per element; kept
    from the forward to the backward pass it is one byte per element, and on
    the attention probabilities ([batch, heads, seq, seq] per layer
    application) that is gigabytes per step (ALBERT-base, 64 x 512: 2.4 x 10^9
    elements). The optimisation barrier ties the recomputation to the
    incoming gradient, so XLA can neither move it into the forward pass nor
    merge it with the forward mask (either would keep a mask alive again).
    The gradient is autodiff's for `_dropout`: where(keep, upstream * scale, 0).
    """
    # TensorFlow backend only: this module also serves the JAX and PyTorch backends.
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla

    shape = ops.shape(inputs)

    @tf.custom_gradient
    def dropout(values):
        def gradient(upstream):
            upstream, later_seeds = xla.optimization_barrier(upstream, seeds)
            return _dropout(upstream, dropout_keep_mask(shape, later_seeds, rate), rate)

        return _dropout(values, dropout_keep_mask(shape, seeds, rate), rate), gradient

    return dropout(inputs)


def _dropout_then_matmul_recomputing(inputs, other, seeds, rate: float):
    """`matmul(dropout(inputs), other)` whose backward pass recomputes `dropout(inputs)`.

    Autodiff keeps the dropped product's left operand for the gradient of
    `other`. On the attention probabilities that is a second [batch, heads,
    seq, seq] tensor beside the probabilities themselves (which the softmax's
    gradient keeps anyway): 2 bytes per element in bfloat16, 4.5 GiB per step
    for ALBERT-base at 64 x 512. Here only `inputs` is kept, and the backward
    pass rebuilds the mask and the dropped values from it (behind an
    optimisation barrier, as in `_dropout_recomputing_the_mask`). The gradients
    are autodiff's: d inputs = dropout'(upstream @ other^T),
    d other = dropout(inputs)^T @ upstream.
    """
    # TensorFlow backend only, as in `_dropout_recomputing_the_mask`.
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla

    shape = ops.shape(inputs)

    @tf.custom_gradient
    def product(values, right):
        def gradient(upstream):
            upstream, later_values, later_seeds = xla.optimization_barrier(upstream, values, seeds)
            keep = dropout_keep_mask(shape, later_seeds, rate)
            gradient_of_values = _dropout(tf.matmul(upstream, right, transpose_b=True), keep, rate)
            gradient_of_right = tf.matmul(_dropout(later_values, keep, rate), upstream,
                                          transpose_a=True)
            return gradient_of_values, gradient_of_right

        return tf.matmul(_dropout(values, dropout_keep_mask(shape, seeds, rate), rate), right), \
            gradient

    return product(inputs, other)


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
        # No weights; and `then_matmul` in training never calls the layer itself.
        self.built = True

    def call(self, inputs, seeds=None, training=False):
        if not training or self.rate == 0:
            return inputs
        if seeds is None:
            raise ValueError("SeededDropout needs per-example seeds in training")
        if keras.backend.backend() == "tensorflow":
            return _dropout_recomputing_the_mask(inputs, seeds, self.rate)
        return _dropout(inputs, dropout_keep_mask(ops.shape(inputs), seeds, self.rate), self.rate)

    def then_matmul(self, inputs, other, seeds=None, training=False):
        """`ops.matmul(self(inputs, seeds, training), other)`, the same values, but on
        TensorFlow in training the dropped `inputs` are not kept for the backward pass
        (see `_dropout_then_matmul_recomputing`). Attention uses it for the dropped
        probabilities times the values."""
        if not training or self.rate == 0 or keras.backend.backend() != "tensorflow":
            return ops.matmul(self(inputs, seeds=seeds, training=training), other)
        if seeds is None:
            raise ValueError("SeededDropout needs per-example seeds in training")
        return _dropout_then_matmul_recomputing(inputs, other, seeds, self.rate)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate)
        return config
