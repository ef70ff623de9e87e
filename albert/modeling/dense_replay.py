"""Dense projections kept by the shared-block loop's forward pass and handed back to its backward.

The loop over the shared block (`albert.modeling.block_loop`) runs its forward pass without a
gradient tape, so it keeps nothing by itself. Under `recording(kept)`, every projection a block
makes through `project` appends its output to `kept`. The backward pass then runs the block a
second time under `replaying(kept)`, on a tape: each `project` hands back the kept output instead
of multiplying again, and differentiates as the dense layer it stands for (the input's gradient
is `g W^T`, the kernel's `x^T g`, the bias's the sum of `g`). So the second pass repeats only the
elementwise work between the products (layer norms, softmax, GELU, dropout masks) and the small
attention products; the large matrix products run once forward, as in autodiff.

Outside both contexts, `project(dense, x)` is `dense(x)`. The state is per thread, as a
`MirroredStrategy` traces each replica in a thread of its own.
"""

import contextlib
import threading

import keras

_state = threading.local()


@contextlib.contextmanager
def _mode(mode: str, tensors: list):
    previous = getattr(_state, "active", None)
    _state.active = (mode, tensors)
    try:
        yield tensors
    finally:
        _state.active = previous


def recording(kept: list):
    """Within: every `project` appends its output to `kept`."""
    return _mode("record", kept)


def replaying(kept: list):
    """Within: the i-th `project` returns `kept[i]`, differentiable as its dense layer."""
    return _mode("replay", list(kept))


def active() -> bool:
    return getattr(_state, "active", None) is not None


def project(dense, inputs):
    """`dense(inputs)` for a `keras.layers.Dense` without activation, recorded or replayed."""
    current = getattr(_state, "active", None)
    if current is None:
        return dense(inputs)
    mode, tensors = current
    if mode == "record":
        outputs = dense(inputs)
        tensors.append(outputs)
        return outputs
    if not tensors:
        raise RuntimeError("the replayed block made more projections than the recorded one")
    return _replayed(dense, inputs, tensors.pop(0))


def _replayed(dense, inputs, outputs):
    import tensorflow as tf  # the loop that replays is TensorFlow's

    # Read here, inside the tape, so that the kernel's and the bias's gradients reach them.
    kernel = tf.identity(tf.cast(keras.ops.convert_to_tensor(dense.kernel), outputs.dtype))
    bias = None if dense.bias is None else \
        tf.identity(tf.cast(keras.ops.convert_to_tensor(dense.bias), outputs.dtype))

    @tf.custom_gradient
    def product(inputs, kernel, *bias):
        def backward(output_gradient):
            return dense_gradients(inputs, kernel, output_gradient)[:2 + len(bias)]

        return tf.identity(outputs), backward

    return product(inputs, kernel, *(() if bias is None else (bias,)))


def dense_gradients(inputs, kernel, output_gradient):
    """The gradients of `inputs @ kernel + bias` (inputs `[..., in]`, kernel `[in, out]`) given
    the output's: `(inputs, kernel, bias)`, the products autodiff forms."""
    import tensorflow as tf  # inside, as in `_replayed`

    rows = tf.reshape(output_gradient, [-1, tf.shape(kernel)[1]])
    inputs_gradient = tf.reshape(tf.matmul(rows, kernel, transpose_b=True), tf.shape(inputs))
    kernel_gradient = tf.matmul(tf.reshape(inputs, [-1, tf.shape(kernel)[0]]), rows,
                                transpose_a=True)
    return inputs_gradient, kernel_gradient, tf.reduce_sum(rows, axis=0)
