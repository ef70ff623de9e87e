"""Base classes of the Keras models fully described by one `AlbertConfig` (and of those with a head)."""

import keras
from keras import ops

from albert.config import AlbertConfig
from albert.modeling.dropout import HEAD_DROPOUT_SITE, call_seeds, derive_seeds


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


class EncoderWithHead(ConfiguredModel):
    """An `AlbertEncoder` (`self.encoder`) and one head layer (`self.head`).

    Subclasses set `head_name` (their table in `albert.checkpoints.naming.HEADS`)
    and, for heads with task sizes (e.g. the number of labels),
    `head_dimensions()`.
    """

    def head_dimensions(self) -> dict:
        return {}

    def build(self, input_shape=None):
        if self.built:
            return
        self.head.build()
        self.built = True

    def head_dropout_seeds(self, inputs, training: bool, rate: float):
        """Per-example seeds of the head's dropout (None when it does not apply): derived
        from the example's seeds, at a site of its own."""
        if not (training and rate > 0):
            return None
        return derive_seeds(call_seeds(inputs, ops.shape(inputs["input_word_ids"])[0],
                                       self.seed_generator), HEAD_DROPOUT_SITE)
