"""ALBERT's learning-rate schedule, AdamW and LAMB, as Keras 3 optimizers.

The update rules are the original's, which differ from Keras's and Model
Garden's own AdamW / LAMB (bias correction, ε, where the weight decay and the
trust ratio apply; see docs/fidelity.md):

* no bias correction; `u = m / (sqrt(v) + ε)` with ε = 1e-6;
* weight decay 0.01 added to the update (`u += wd · w`, pre-update `w`) for
  every variable whose original name does not match `LayerNorm`,
  `layer_norm` or `bias`;
* LAMB scales the update by the trust ratio `‖w‖ / ‖u‖` (1 when either norm
  is 0, and for the excluded variables): `w -= ratio · lr · u`;
* gradients are clipped to global norm 1.0 first, over all variables
  jointly — after summing across replicas, so distributed training equals
  single-device training on the global batch.

`bias_correction=True` (`--adam_bias_correction`, off by default) is the
bias-corrected AdamW of Hugging Face's `AdamW` and Keras's `AdamW`:
`u = c_t · m / (sqrt(v) + ε)` with `c_t = sqrt(1 − β₂ᵗ) / (1 − β₁ᵗ)` at
step t (1-based), the rest unchanged (weight decay, its exclusions, the
clip; for LAMB the trust ratio of that `u`). Without the correction the
updates are `1 / c_t` times Adam's: 3.2× at step 1, 6.5× at step 10, 3.2×
at step 100, 1.3× at step 1000 — a much larger learning rate early in the
run, which is where fine-tuning on small data is known to fail.

Exclusions match the variables' original TF1 names (e.g.
`bert/encoder/.../LayerNorm/gamma`), given by `variable_names`; a Keras 3
variable's own name is just `gamma` or `kernel`.
"""

import re
from typing import Dict, Optional, Sequence

import keras
from keras import ops

DEFAULT_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="albert")
class AlbertLearningRateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then polynomial decay to 0 computed from step 0.

    `decayed(step) = lr · (1 - min(step, T) / T) ** poly_power`; during
    warm-up (`step - start_warmup_step < W`) the rate is
    `lr · (step - start_warmup_step) / W`. The rate jumps at the end of
    warm-up, as in the original. QUIRK fixed: a step before
    `start_warmup_step` gave a negative rate in the original; it is 0 here.
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, start_warmup_step=0,
                 poly_power=1.0):
        self.learning_rate = learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.start_warmup_step = start_warmup_step
        self.poly_power = poly_power

    def __call__(self, step):
        step = ops.cast(step, "float32")
        total = float(max(self.num_train_steps, 1))
        progress = ops.minimum(step, total) / total
        decayed = self.learning_rate * ops.power(1.0 - progress, self.poly_power)
        if self.num_warmup_steps <= 0:
            return decayed
        warmup_step = ops.floor(step) - float(self.start_warmup_step)
        warmup = self.learning_rate * ops.maximum(warmup_step, 0.0) / float(self.num_warmup_steps)
        return ops.where(warmup_step < self.num_warmup_steps, warmup, decayed)

    def warmup_warning(self) -> Optional[str]:
        """What a run of `num_train_steps` misses when its warm-up does not end before it does
        (None when it ends in time).

        Steps 0 .. T-1 are trained; the rate reaches its peak only at step
        `start_warmup_step + W`. Short runs with the pretraining defaults
        (3125 warm-up steps) stay near zero for their whole length.
        """
        warmup_end = self.start_warmup_step + self.num_warmup_steps
        if self.num_warmup_steps <= 0 or warmup_end < self.num_train_steps:
            return None
        last_rate = self.learning_rate * max(
            self.num_train_steps - 1 - self.start_warmup_step, 0) / self.num_warmup_steps
        started = f", from step {self.start_warmup_step}" if self.start_warmup_step else ""
        return (f"The learning-rate warm-up ({self.num_warmup_steps} steps{started}) does not "
                f"end before the run does ({self.num_train_steps} steps): the learning rate "
                f"climbs for the whole run, ends at {last_rate:.3g} and never reaches the peak "
                f"learning rate {self.learning_rate:g}. Warm up over fewer steps than the run "
                "trains, e.g. a tenth of them: --num_warmup_steps (run_pretraining.py), "
                "--warmup_step or --warmup_proportion (fine-tuning scripts)")

    def get_config(self):
        return {"learning_rate": self.learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps,
                "start_warmup_step": self.start_warmup_step, "poly_power": self.poly_power}


def clip_by_global_norm(gradients, clip_norm):
    """The original's `tf.clip_by_global_norm`: scale by clip / max(norm, clip)."""
    norm = ops.sqrt(sum(ops.sum(ops.square(g)) for g in gradients))
    scale = clip_norm / ops.maximum(norm, clip_norm)
    return [g * ops.cast(scale, g.dtype) for g in gradients]


def clip_scale_tf(gradients, clip_norm):
    """`clip_by_global_norm`'s scale, clip / max(norm, clip), in TensorFlow without a
    temporary the size of a gradient: the norm comes from `tf.nn.l2_loss` (sum of
    squares / 2, reduced in one kernel), as `tf.clip_by_global_norm`'s own norm does."""
    import tensorflow as tf  # inside: only the TensorFlow backend takes this path

    norm = tf.sqrt(2.0 * tf.add_n([tf.cast(tf.nn.l2_loss(g), tf.float32) for g in gradients]))
    return clip_norm / tf.maximum(norm, clip_norm)


class _AlbertOptimizer(keras.optimizers.Optimizer):
    """Shared state of ALBERT's AdamW and LAMB: slots m, v, exclusions, clipping."""

    use_trust_ratio = False

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, clip_norm=1.0, bias_correction: bool = False,
                 exclude_from_weight_decay: Sequence[str] = DEFAULT_EXCLUDE,
                 exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
                 variable_names: Optional[Dict[str, str]] = None,
                 gradients_summed_by_caller: bool = False, name=None, **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        # Kept for `warmup_warning` (Keras keeps its own copy private).
        self.learning_rate_schedule = (
            learning_rate if isinstance(learning_rate, AlbertLearningRateSchedule) else None)
        # True: the caller applies gradients already summed across replicas (ALBERT's
        # training loop does, so that mixed_float16's finiteness check sees the sum, and
        # refuses an optimizer built without it); False: `apply` sums them, as Keras
        # optimizers do (model.fit).
        self.gradients_summed_by_caller = gradients_summed_by_caller
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.clip_norm = clip_norm
        self.bias_correction = bias_correction
        self.exclude_from_weight_decay = list(exclude_from_weight_decay or [])
        self.exclude_from_layer_adaptation = list(
            exclude_from_layer_adaptation if exclude_from_layer_adaptation is not None
            else self.exclude_from_weight_decay)
        # {Keras variable path: original name}; unknown variables use their path.
        self.variable_names = dict(variable_names or {})

    def original_name(self, variable) -> str:
        return self.variable_names.get(variable.path, variable.path)

    def _matches(self, variable, patterns) -> bool:
        name = self.original_name(variable)
        return any(re.search(pattern, name) for pattern in patterns)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = [], []
        self._decay, self._adapt = [], []
        for variable in var_list:
            self._momentums.append(self.add_variable_from_reference(variable, "adam_m"))
            self._velocities.append(self.add_variable_from_reference(variable, "adam_v"))
            self._decay.append(self.weight_decay_rate > 0
                               and not self._matches(variable, self.exclude_from_weight_decay))
            self._adapt.append(not self._matches(variable, self.exclude_from_layer_adaptation))

    def slots(self, variable):
        """(adam_m, adam_v) of a model variable, for checkpoints."""
        index = self._get_variable_index(variable)
        return self._momentums[index], self._velocities[index]

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if keras.backend.backend() == "tensorflow":
            self._tensorflow_update_step(grads, trainable_variables, learning_rate)
        else:
            grads = clip_by_global_norm(grads, self.clip_norm)
            for grad, variable in zip(grads, trainable_variables):
                self.update_step(grad, variable, learning_rate)

    def _tensorflow_update_step(self, grads, trainable_variables, learning_rate):
        # Keras sums gradients across replicas inside its update; the clip must
        # come after that sum, so this runs the same steps with the clip in
        # between: all-reduce, clip, per-variable update on every replica.
        # ALBERT's training loop sums the gradients itself, before the loss-scale
        # decision (albert.training.replica_step), and needs an optimizer built
        # with `gradients_summed_by_caller`: then they are not summed twice.
        import tensorflow as tf  # inside: only the TensorFlow backend takes this path

        # Embedding gradients arrive as IndexedSlices with repeated rows; the
        # norm and the moments need them summed into dense tensors, as the
        # original's update did (keras.ops leaves IndexedSlices as they are).
        grads = [tf.convert_to_tensor(g) for g in grads]
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        reduced = list(zip(grads, variables))
        if not self.gradients_summed_by_caller:
            reduced = self._all_reduce_sum_gradients(reduced)
        # The clip's scale only: each gradient is multiplied by it inside its own
        # variable's update, so no clipped copy of every gradient is ever held.
        scale = clip_scale_tf([g for g, _ in reduced], self.clip_norm)
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_tf_update_step, self._distribution_strategy, reduced,
            learning_rate, scale)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate,
                                    gradient_scale=None):
        """Each variable's update after the previous one's (TensorFlow graphs).

        Unordered, the graph executor runs the updates' elementwise steps
        breadth first: the first temporary of every variable, then the second
        of every variable, and so on, so the moments' and the trust ratio's
        temporaries of all variables are alive together (about four copies of
        the model at once). One variable at a time holds one variable's
        temporaries. Under XLA the order costs nothing: the compiler fuses each
        update into a few loops.
        """
        import tensorflow as tf  # inside: only the TensorFlow backend takes this path

        def update(variable, gradient, learning_rate, gradient_scale):
            if gradient_scale is not None:
                gradient = gradient * tf.cast(gradient_scale, gradient.dtype)
            self.update_step(gradient, variable, learning_rate)
            # Read after the update (tf.function orders a variable's ops as
            # written): the next variable's update waits for this read.
            return variable.read_value()

        done = []
        for gradient, variable in grads_and_vars:
            with tf.control_dependencies(done):
                finished = distribution.extended.update(
                    variable, update, args=(gradient, learning_rate, gradient_scale),
                    group=False)
            if not tf.executing_eagerly():  # eagerly, each update has run already
                done = [value.op for value in tf.nest.flatten(
                    distribution.experimental_local_results(finished))]

    def _update_direction(self, gradient, variable):
        """m, v updated in place; returns u (with weight decay) for the variable."""
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        gradient = ops.cast(gradient, variable.dtype)
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient)
        self.assign(m, next_m)
        self.assign(v, next_v)
        update = next_m / (ops.sqrt(next_v) + self.epsilon)
        if self.bias_correction:
            # Keras increments `iterations` after the update: this is step t - 1.
            t = ops.cast(self.iterations + 1, variable.dtype)
            update = update * (ops.sqrt(1.0 - ops.power(ops.cast(self.beta_2, variable.dtype), t))
                               / (1.0 - ops.power(ops.cast(self.beta_1, variable.dtype), t)))
        if self._decay[index]:
            update = update + self.weight_decay_rate * variable
        return update, index

    def get_config(self):
        config = super().get_config()
        config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                      beta_2=self.beta_2, epsilon=self.epsilon, clip_norm=self.clip_norm,
                      bias_correction=self.bias_correction,
                      exclude_from_weight_decay=self.exclude_from_weight_decay,
                      exclude_from_layer_adaptation=self.exclude_from_layer_adaptation,
                      gradients_summed_by_caller=self.gradients_summed_by_caller)
        return config


@keras.saving.register_keras_serializable(package="albert")
class AlbertAdamW(_AlbertOptimizer):
    """The original `AdamWeightDecayOptimizer`: `w -= lr · (m / (sqrt(v) + ε) + wd · w)`.

    Example:
        schedule = AlbertLearningRateSchedule(5e-5, num_train_steps=1000, num_warmup_steps=100)
        optimizer = AlbertAdamW(schedule, variable_names=original_names(model))
    """

    def update_step(self, gradient, variable, learning_rate):
        update, _ = self._update_direction(gradient, variable)
        self.assign_sub(variable, ops.cast(learning_rate, variable.dtype) * update)


@keras.saving.register_keras_serializable(package="albert")
class AlbertLamb(_AlbertOptimizer):
    """The original `LAMBOptimizer`: AdamW's update scaled by the trust ratio ‖w‖ / ‖u‖.

    The ratio is not clipped; it is 1 when either norm is 0 and for variables
    matching `exclude_from_layer_adaptation` (default: the weight-decay
    exclusions, so LayerNorm and bias variables get neither).
    """

    def update_step(self, gradient, variable, learning_rate):
        update, index = self._update_direction(gradient, variable)
        learning_rate = ops.cast(learning_rate, variable.dtype)
        if self._adapt[index]:
            weight_norm = ops.sqrt(ops.sum(ops.square(variable)))
            update_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(ops.logical_and(weight_norm > 0, update_norm > 0),
                              weight_norm / ops.maximum(update_norm, 1e-30), 1.0)
            self.assign_sub(variable, ratio * learning_rate * update)
        else:
            self.assign_sub(variable, learning_rate * update)


def create_optimizer(name: str, learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                     start_warmup_step: int = 0, poly_power: float = 1.0,
                     variable_names: Optional[Dict[str, str]] = None,
                     bias_correction: bool = False, gradients_summed_by_caller: bool = False):
    """The optimizer the original's `--optimizer` flag names ("adamw" or "lamb");
    `bias_correction` adds Adam's bias correction (not the original's);
    `gradients_summed_by_caller` for ALBERT's training loop (see `_AlbertOptimizer`)."""
    schedule = AlbertLearningRateSchedule(learning_rate, num_train_steps, num_warmup_steps,
                                          start_warmup_step, poly_power)
    classes = {"adamw": AlbertAdamW, "lamb": AlbertLamb}
    if name not in classes:
        raise ValueError(f"Unknown optimizer {name!r}; expected 'adamw' or 'lamb'")
    return classes[name](learning_rate=schedule, variable_names=variable_names,
                         bias_correction=bias_correction,
                         gradients_summed_by_caller=gradients_summed_by_caller)


@keras.saving.register_keras_serializable(package="albert")
class AlbertLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Dynamic loss scaling (mixed_float16) whose skipped steps still count.

    When the scaled gradients overflow, Keras skips the update and leaves the
    step counter where it was, so the learning-rate schedule, `global_step`
    and the training loop's step (and checkpoint names) drift apart. The
    original increments `global_step` on every step, whatever the update
    does: here a skipped step advances the counter too, so the three agree.
    """

    def _stateful_handle_non_finite_grads(self):
        super()._stateful_handle_non_finite_grads()
        self.inner_optimizer.iterations.assign_add(1)
