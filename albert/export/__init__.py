"""Exported models: SavedModels that load with `tf.saved_model.load`, without this package."""
