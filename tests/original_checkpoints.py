"""Fine-tuned checkpoints as the original code writes them (a TF1 graph saved by its Saver)."""

import numpy as np
import tensorflow as tf

from albert.checkpoints.naming import backbone_names


def original_fine_tuned_checkpoint(prefix, config, num_outputs=None, seed=0, global_step=800,
                                   head=None):
    """Writes `prefix` with the backbone, a head, their adam_m / adam_v slots and
    global_step; returns the model's values.

    The head: the root-scope `output_weights [num_outputs, H]` / `output_bias
    [num_outputs]` (GLUE: num_outputs = labels; RACE: 1), or the variables of
    `head`, a table of `albert.checkpoints.naming.HEADS` (e.g. "squad_v2").
    """
    from albert.checkpoints.naming import head_names

    rng = np.random.default_rng(seed)
    values = {row.original: rng.normal(0, 0.05, row.shape).astype("float32")
              for row in backbone_names(config)}
    if head is None:
        values["output_weights"] = rng.normal(0, 0.05, (num_outputs, config.hidden_size)
                                              ).astype("float32")
        values["output_bias"] = rng.normal(0, 0.05, (num_outputs,)).astype("float32")
    else:
        for row in head_names(config, head):
            values[row.original] = rng.normal(0, 0.3, row.shape).astype("float32")
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, value in values.items():
            variables.append(tf.compat.v1.get_variable(name, initializer=value))
            for slot in ("adam_m", "adam_v"):
                variables.append(tf.compat.v1.get_variable(f"{name}/{slot}",
                                                           initializer=np.zeros_like(value)))
        variables.append(tf.compat.v1.get_variable("global_step",
                                                   initializer=np.int64(global_step)))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, prefix, write_meta_graph=False)
    return values
