"""Dense projections kept by the shared-block loop's forward pass and handed back to its backward.

The loop over the shared block (`albert.modeling.block_loop`) runs its forward pass without a
gradient tape, so it keeps nothing by itself. Under `recording(kept)`, every projection a block
makes through `project` appends its output to `kept`. The backward pass then runs the block a
second time under `replaying(kept)`, on a tape: each `project` hands back the kept output instead
of multiplying again, and differentiates as the dense layer it stands for (the input's gradient
is `g W^T`, the kernel's `x^T g`, the bias's the sum of `g`). So the second pass repeats only the
elementwise work between the products (layer norms, softmax, GELU, dropout masks) and the small
attention products; the large matrix products run once forward, as in autodiff.

Replayed with `kernel_sums` (a `KernelSums`), a kernel's gradient does not go back through the
tape: it is added into the kernel's sum over the applications as it is formed, in row blocks of
at most `KERNEL_GRADIENT_PIECE_BYTES`, each block formed only after the previous addition. So
the backward pass holds the sums and one block, where autodiff's sums held the sums and a whole
kernel's gradient (256 MiB for ALBERT-xxlarge's feed-forward kernels), sometimes two.

Outside both contexts, `project(dense, x)` is `dense(x)`. The state is per thread, as a
`MirroredStrategy` traces each replica in a thread of its own.
"""

import contextlib
import threading

import math

import keras

_state = threading.local()

# The largest block of a kernel's gradient formed at once when it is added into a sum.
KERNEL_GRADIENT_PIECE_BYTES = 64 * 2 ** 20


@contextlib.contextmanager
def _mode(mode: str, tensors: list, kernel_sums=None):
    previous = getattr(_state, "active", None)
    _state.active = (mode, tensors, kernel_sums)
    try:
        yield tensors
    finally:
        _state.active = previous


def recording(kept: list):
    """Within: every `project` appends its output to `kept`."""
    return _mode("record", kept)


def replaying(kept: list, kernel_sums=None):
    """Within: the i-th `project` returns `kept[i]`, differentiable as its dense layer; with
    `kernel_sums`, its kernel's gradient is added into `kernel_sums` instead of reaching the
    tape (which then finds none for that kernel)."""
    return _mode("replay", list(kept), kernel_sums)


class KernelSums:
    """Kernel gradients summed over the shared block's applications, one block at a time.

    `sums` maps `variable_key(kernel)` to the sum so far; a kernel without one starts its sum
    with its gradient. Each block of a gradient is formed only after the previous addition, as
    TensorFlow's executor otherwise runs whatever is ready (all of an application's kernel
    gradients before adding any of them in), and is added into the sum in place
    (`InplaceAdd` takes over the sum's buffer, which nothing else holds). The sums are the same
    products and additions as autodiff's, in blocks of rows.
    """

    def __init__(self, sums=None):
        self.sums = dict(sums or {})
        self.added = set()  # the keys of the kernels whose gradients were added here
        self._previous = None

    def add(self, kernel, inputs, rows):
        """Add the gradient of `kernel` (`[in, out]`, a variable) in `inputs @ kernel`, given
        the output's gradient `rows` (`[n, out]`) and `inputs` (`[..., in]`)."""
        import tensorflow as tf  # inside, as in `_replayed`

        inputs = tf.reshape(inputs, [-1, kernel.shape[0]])
        key = variable_key(kernel)
        total = self.sums.get(key)
        blocks = [(0, kernel.shape[0])]
        if total is not None:
            row_bytes = kernel.shape[1] * rows.dtype.size
            per_block = max(1, KERNEL_GRADIENT_PIECE_BYTES // row_bytes)
            count = math.ceil(kernel.shape[0] / per_block)
            size = math.ceil(kernel.shape[0] / count)
            blocks = [(start, min(start + size, kernel.shape[0]))
                      for start in range(0, kernel.shape[0], size)]
        for start, stop in blocks:
            with tf.control_dependencies([] if self._previous is None else [self._previous]):
                block = tf.cast(tf.matmul(inputs[:, start:stop], rows, transpose_a=True),
                                kernel.dtype)
            if total is None:
                total = block
            elif (start, stop) == (0, kernel.shape[0]):
                total = total + block
            else:
                total = tf.raw_ops.InplaceAdd(x=total, i=tf.range(start, stop), v=block)
            self._previous = total
        self.sums[key] = total
        self.added.add(key)


def variable_key(variable):
    """A hashable key of a Keras variable or of the TensorFlow variable it holds."""
    return getattr(variable, "_value", variable).ref()


def active() -> bool:
    return getattr(_state, "active", None) is not None


def project(dense, inputs):
    """`dense(inputs)` for a `keras.layers.Dense` without activation, recorded or replayed."""
    current = getattr(_state, "active", None)
    if current is None:
        return dense(inputs)
    mode, tensors, kernel_sums = current
    if mode == "record":
        outputs = dense(inputs)
        tensors.append(outputs)
        return outputs
    if not tensors:
        raise RuntimeError("the replayed block made more projections than the recorded one")
    if kernel_sums is not None:
        return _replayed_into(kernel_sums, dense, inputs, tensors.pop(0))
    return _replayed(dense, inputs, tensors.pop(0))


def _read_weights(dense, dtype):
    """The layer's kernel and its bias (an empty tuple without one), read in `dtype`."""
    import tensorflow as tf  # the loop that replays is TensorFlow's

    def read(variable):
        return tf.identity(tf.cast(keras.ops.convert_to_tensor(variable), dtype))

    return read(dense.kernel), (() if dense.bias is None else (read(dense.bias),))


def _replayed(dense, inputs, outputs):
    import tensorflow as tf  # the loop that replays is TensorFlow's

    # Read here, inside the tape, so that the kernel's and the bias's gradients reach them.
    kernel, bias = _read_weights(dense, outputs.dtype)

    @tf.custom_gradient
    def product(inputs, kernel, *bias):
        def backward(output_gradient):
            return dense_gradients(inputs, kernel, output_gradient)[:2 + len(bias)]

        return tf.identity(outputs), backward

    return product(inputs, kernel, *bias)


def _replayed_into(kernel_sums, dense, inputs, outputs):
    import tensorflow as tf  # inside, as in `_replayed`

    # The kernel is read here and not handed to `product`: its gradient goes to `kernel_sums`.
    kernel, bias = _read_weights(dense, outputs.dtype)

    @tf.custom_gradient
    def product(inputs, *bias):
        def backward(output_gradient):
            rows = tf.reshape(output_gradient, [-1, tf.shape(kernel)[1]])
            kernel_sums.add(dense.kernel, inputs, rows)
            inputs_gradient = tf.reshape(tf.matmul(rows, kernel, transpose_b=True),
                                         tf.shape(inputs))
            return (inputs_gradient, tf.reduce_sum(rows, axis=0))[:1 + len(bias)]

        return tf.identity(outputs), backward

    return product(inputs, *bias)


def dense_gradients(inputs, kernel, output_gradient):
    """The gradients of `inputs @ kernel + bias` (inputs `[..., in]`, kernel `[in, out]`) given
    the output's: `(inputs, kernel, bias)`, the products autodiff forms."""
    import tensorflow as tf  # inside, as in `_replayed`

    rows = tf.reshape(output_gradient, [-1, tf.shape(kernel)[1]])
    inputs_gradient = tf.reshape(tf.matmul(rows, kernel, transpose_b=True), tf.shape(inputs))
    kernel_gradient = tf.matmul(tf.reshape(inputs, [-1, tf.shape(kernel)[0]]), rows,
                                transpose_a=True)
    return inputs_gradient, kernel_gradient, tf.reduce_sum(rows, axis=0)
