"""What our SavedModels are, below both `albert.checkpoints` and `albert.export`.

* `encoder`: the encoder SavedModel's root (the TF-Hub encoder contract, the
  weights under the original's names, the config asset) and `save`.
* `tracking`: how a root stores each weight once.

Nothing here imports `albert.checkpoints` or `albert.export`: they import it.
"""
