"""What the feed-forward block keeps for the backward pass, in training.

Differentiated as written, every operation keeps its own operands for the backward pass. For
the tanh GELU (seven elementwise operations on `[batch, length, intermediate]`) followed by
the output dense layer, that is several copies of the block's widest activation per layer
application, held until the backward pass reaches it. `activation_then_dense` keeps only the
GELU's input: the backward pass recomputes the GELU (one more elementwise pass, small beside
the block's matrix products) and forms the dense layer's gradients from it (docs/memory.md
has the figures). Layer norms made to keep only their inputs saved nothing measurable, so
they are differentiated as written.
"""

import keras

from albert.modeling import dense_replay


def activation_then_dense(activation, dense, inputs, training):
    """`dense(activation(inputs))`, keeping only `inputs` for the backward pass in training.

    The dense layer's kernel gradient needs the activation's output, the widest tensor of the
    feed-forward block (`[batch, length, intermediate]`). Differentiated as written, one copy
    per layer application waits for the backward pass. Here the backward pass recomputes the
    activation from its input (elementwise; the matrix product is not run again) and forms the
    three gradients itself. The forward values are the dense layer's own; the gradients are the
    same products and sums, equal to rounding. Outside training, or on another Keras backend,
    it is `dense(activation(inputs))` as written.
    """
    if not training or keras.backend.backend() != "tensorflow":
        return dense(activation(inputs))
    if dense_replay.active():
        # In the shared-block loop, which keeps the product's output and replays it instead.
        # Its replay runs on a tape, where the activation too keeps only its input.
        return dense_replay.project(dense, activation_keeping_input(activation, inputs))
    import tensorflow as tf  # inside: the Keras backend may be another one

    # Read (and, under a mixed policy, cast) here, as tensors: the gradients flow back to the
    # variables through the reads. (Eagerly, convert_to_tensor may hand back the variable.)
    kernel = tf.identity(keras.ops.convert_to_tensor(dense.kernel))
    bias = tf.identity(keras.ops.convert_to_tensor(dense.bias))

    @tf.custom_gradient
    def forward(inputs, kernel, bias):
        outputs = keras.ops.add(keras.ops.matmul(activation(inputs), kernel), bias)

        def backward(output_gradient):
            activated, activation_gradient = _recomputed(activation, inputs, output_gradient)
            activated_gradient, kernel_gradient, bias_gradient = dense_replay.dense_gradients(
                activated, kernel, output_gradient)
            return activation_gradient(activated_gradient), kernel_gradient, bias_gradient

        return outputs, backward

    return forward(inputs, kernel, bias)


def activation_keeping_input(activation, inputs):
    """`activation(inputs)`, differentiated by computing the activation again from `inputs` in
    the backward pass instead of keeping its intermediates (for the tanh GELU, five tensors of
    the block's widest shape, alive on the shared-block loop's replay tape until its backward
    pass reaches them). TensorFlow only."""
    import tensorflow as tf  # inside, as in `activation_then_dense`

    @tf.custom_gradient
    def forward(inputs):
        def backward(output_gradient):
            _, activation_gradient = _recomputed(activation, inputs, output_gradient)
            return activation_gradient(output_gradient)

        return activation(inputs), backward

    return forward(inputs)


def _recomputed(activation, inputs, after):
    """The activation computed again from `inputs` once `after` exists, and a function from its
    output's gradient to its input's."""
    import tensorflow as tf  # inside, as in `activation_then_dense`

    # After `after` (the output's gradient): otherwise the graph optimiser merges the
    # recomputation with the forward activation, which then waits after all.
    with tf.control_dependencies([after]):
        recompute_from = tf.identity(inputs)
    with tf.GradientTape() as tape:
        tape.watch(recompute_from)
        activated = activation(recompute_from)

    def activation_gradient(activated_gradient):
        return tape.gradient(activated, recompute_from, output_gradients=activated_gradient)

    return activated, activation_gradient
