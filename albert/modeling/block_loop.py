"""Every application of one shared block in a `tf.while_loop`, with a backward pass written here.

Differentiated by TensorFlow, a loop over a shared block keeps every intermediate of every
application for the backward pass, and its backward loop sums the block's weight gradients into
accumulators that start as zeros: the size of the block's weights, allocated as the step starts
(they wait for no input) and alive beside the first application's weight gradients when the
backward pass begins, which is where a step peaks. Here instead:

* The forward loop runs without a tape and keeps, per application, its input and the outputs of
  the block's dense projections (`albert.modeling.dense_replay`); with `recompute`, its input
  alone.
* The backward loop runs the applications in reverse. Each one is run again on a tape, replaying
  the kept projections (or, with `recompute`, computing them again), and its gradients are
  taken there: one application's intermediates exist at a time.
* The weight gradients' sums start as the last application's gradients, with no zeros beneath
  them, and each later application's gradients are added in. A replayed projection's kernel
  gradient is added in as it is formed, a block of rows at a time
  (`albert.modeling.dense_replay.KernelSums`): the sums and one block are alive, not the sums
  and an application's kernel gradients.

The values are the block's own; the gradients are autodiff's products and sums, in another
order of addition (float rounding). TensorFlow backend only.
"""

import contextlib
from typing import Callable, List

from albert.modeling.dense_replay import KernelSums, recording, replaying, variable_key


def apply_in_loop(initial_states, count: int, apply: Callable, recompute: bool = False
                  ) -> List:
    """`[output of application 0, 1, ..., count - 1]`, where application i is `apply(states, i)`
    on the previous output (`initial_states` first) and `i` is an int32 scalar tensor. `apply`
    must read its weights itself (the backward pass returns their gradients) and give the same
    values when run again."""
    import tensorflow as tf  # inside: the Keras backend may be another one (see the encoder)

    if count < 2:
        raise ValueError(f"apply_in_loop needs at least 2 applications, not {count}")

    def kept_projections(kept):
        return contextlib.nullcontext() if recompute else recording(kept)

    def replayed(kept, kernel_sums):
        return contextlib.nullcontext() if recompute else replaying(kept, kernel_sums)

    @tf.custom_gradient
    def forward(states):
        # The first application outside the loop: it tells the kept tensors' shapes.
        kept = []
        with kept_projections(kept):
            first = apply(states, tf.constant(0))
        inputs = _array(states, count).write(0, states)
        projections = [_array(tensor, count).write(0, tensor) for tensor in kept]

        def body(application, states, inputs, projections):
            kept = []
            with kept_projections(kept):
                outputs = apply(states, application)
            return (application + 1, outputs, inputs.write(application, states),
                    [array.write(application, tensor) for array, tensor in zip(projections, kept)])

        _, last, inputs, projections = tf.while_loop(
            lambda application, *_: application < count, body,
            (tf.constant(1), first, inputs, projections), maximum_iterations=count - 1,
            parallel_iterations=1)
        # Application i's output is application i + 1's input: read, not copied.
        outputs = [inputs.read(application) for application in range(1, count)] + [last]

        def backward(*output_gradients, variables=None):
            variables = list(variables or [])
            # Usually only the last output is used; the tape hands zeros for the others, which
            # are left out rather than added (and, folded into constants, kept by the graph).
            inner = [application for application, gradient in enumerate(output_gradients[:-1])
                     if not _known_zero(gradient)]
            upstream = _array(output_gradients[-1], count)
            for application in range(count - 1) if inner else ():
                gradient = output_gradients[application]
                upstream = upstream.write(application, gradient if application in inner
                                          else tf.zeros_like(output_gradients[-1]))

            def gradients(application, states_gradient, sums=None):
                """The states' gradient, and the weights' sums with this application's
                gradients added in (`sums` None: its gradients alone)."""
                states = inputs.read(application)
                previous = [] if sums is None else list(zip(variables, sums))
                kernel_sums = None if recompute else KernelSums(
                    {variable_key(variable): total for variable, total in previous})
                with tf.GradientTape() as tape:
                    tape.watch(states)
                    with replayed([array.read(application) for array in projections],
                                  kernel_sums):
                        outputs = apply(states, application)
                found = tape.gradient(outputs, [states] + variables,
                                      output_gradients=states_gradient)
                totals = []
                for index, (variable, gradient) in enumerate(zip(variables, found[1:])):
                    if kernel_sums is not None and variable_key(variable) in kernel_sums.added:
                        totals.append(kernel_sums.sums[variable_key(variable)])
                        continue
                    if gradient is None:
                        gradient = tf.zeros_like(variable)
                    totals.append(gradient if sums is None else sums[index] + gradient)
                return found[0], totals

            last_application = tf.constant(count - 1)
            states_gradient, sums = gradients(last_application, output_gradients[-1])

            def reverse_body(application, states_gradient, sums):
                if inner:
                    states_gradient += upstream.read(application)
                states_gradient, sums = gradients(application, states_gradient, sums)
                return application - 1, states_gradient, sums

            _, states_gradient, sums = tf.while_loop(
                lambda application, *_: application >= 0, reverse_body,
                (last_application - 1, states_gradient, sums), maximum_iterations=count - 1,
                # Only the gradient waits for the previous iteration: with more in flight,
                # several applications would be run again at once, each with its intermediates.
                parallel_iterations=1)
            return states_gradient, sums

        return outputs, backward

    return forward(initial_states)


def _known_zero(tensor) -> bool:
    """Whether `tensor` is made as zeros in its graph (the tape's gradient of an unused output)."""
    import tensorflow as tf  # inside, as in `apply_in_loop`

    op = getattr(tensor, "op", None)
    if op is None:
        return False
    if op.type == "ZerosLike":
        return True
    if op.type == "Fill":
        value = tf.get_static_value(op.inputs[1])
        return value is not None and not value.any()
    return False


def _array(like, size: int):
    import tensorflow as tf  # inside, as in `apply_in_loop`

    # Read twice (an output, then in the backward pass): eagerly, a read would clear it.
    return tf.TensorArray(like.dtype, size=size, element_shape=like.shape, clear_after_read=False)

