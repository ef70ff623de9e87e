"""One float16-loss-scaled training step in which a single replica's gradients overflow.

Used in-process by test_replica_step.py (2 mirrored CPU devices) and run as a
loopback worker (`python overflow_step.py <result.json>` with TF_CONFIG set)
for MultiWorkerMirroredStrategy. Replica / worker 0 gets finite features,
the last one gets features holding `inf`; every replica must then skip the
step together: weights unchanged and equal everywhere, the loss scale
halved, the step counted.
"""

import json
import sys

import numpy as np
import tensorflow as tf

INITIAL_SCALE = 2.0 ** 10
FEATURES = 4


class LinearTask:
    """The parts of a `Task` the replica step uses: a sum of a linear model's outputs."""

    loss_names = ("loss",)

    def loss_normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["x"])[0], tf.float32)}

    def losses(self, outputs, features, normalizers):
        return {"loss": tf.reduce_sum(tf.cast(outputs, tf.float32)) / normalizers["examples"]}


def run_overflow_step(strategy, per_replica_batch=2):
    """Runs one step; returns {weights per replica, loss scale, iterations}."""
    import keras

    from albert.training.optimization import AlbertLamb, AlbertLossScaleOptimizer
    from albert.training.replica_step import train_steps_function

    replicas = strategy.num_replicas_in_sync
    with strategy.scope():
        inputs = {"x": keras.Input((FEATURES,), name="x")}
        model = keras.Model(inputs, keras.layers.Dense(1)(inputs["x"]))
        optimizer = AlbertLossScaleOptimizer(
            AlbertLamb(learning_rate=0.1, gradients_summed_by_caller=True),
            initial_scale=INITIAL_SCALE)
        optimizer.build(model.trainable_variables)
    before = [np.array(v.numpy()) for v in model.trainable_variables]

    def dataset_fn(context):
        # One input pipeline per worker; a pipeline's batches go to its replicas in turn.
        local = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * local
        batches = np.ones((local, per_replica_batch, FEATURES), np.float32)
        for replica in range(local):
            if first + replica == replicas - 1:
                batches[replica, 0, 0] = np.inf
        return tf.data.Dataset.from_tensor_slices({"x": batches}).repeat()

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    train_steps = train_steps_function(LinearTask(), strategy, model, optimizer, iterator,
                                       jit_compile=False, loss_names=("loss",))
    train_steps(tf.constant(1))
    weights = [[np.array(value).tolist() for value in strategy.experimental_local_results(v.value)]
               for v in model.trainable_variables]
    return {"before": [w.tolist() for w in before], "weights": weights,
            "loss_scale": float(optimizer.dynamic_scale.numpy()),
            "iterations": int(optimizer.inner_optimizer.iterations.numpy())}


if __name__ == "__main__":
    result = run_overflow_step(tf.distribute.MultiWorkerMirroredStrategy())
    with open(sys.argv[1], "w") as handle:
        json.dump(result, handle)
