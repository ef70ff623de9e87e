"""Keeping each weight once in a SavedModel.

A Keras 3 variable and the `tf.Variable` inside it are two objects, and the
SavedModel writer stores every variable-like object its root reaches. A root
that tracks a Keras model *and* lists `variable.value` (as the functions it
serves capture the `tf.Variable`s, and as TF-Hub users read `variables`)
stores every weight twice; so does `keras.export.ExportArchive`. Our roots
list the `tf.Variable`s and hold the model in `Untracked`, out of the object
graph.
"""


class Untracked:
    """A Keras model held where SavedModel tracking does not look (a plain object, not a
    `Trackable`, so the root does not walk into it)."""

    def __init__(self, model):
        self.model = model


def tf_variables(variables) -> list:
    """The `tf.Variable`s inside Keras variables (what traced functions capture)."""
    return [variable.value for variable in variables]
