"""Base class for Keras models that are fully described by one `AlbertConfig`."""

import keras

from albert.config import AlbertConfig


class ConfiguredModel(keras.Model):
    """A `keras.Model` whose only constructor argument is an `AlbertConfig`.

    It serialises as the config's JSON keys, so `.keras` files carry the
    original `albert_config.json` content and rebuild the same model.
    """

    def get_config(self):
        return {
            "config": self.albert_config.to_dict(),
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # The stored config was accepted when the model was made; keys another
        # tool added then are kept now.
        albert_config = AlbertConfig.from_dict(config.pop("config"), allow_unknown_keys=True)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(albert_config, **config)
