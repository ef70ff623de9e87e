import keras
import numpy as np

from albert.checkpoints import model_weights, read_checkpoint, write_checkpoint
from albert.modeling import AlbertPretrainer
from conftest import random_inputs, tiny_config


def test_keras_export_loads_with_keras_after_importing_albert(tmp_path):
    config = tiny_config(sharing_strategy="shared_attention")
    model = AlbertPretrainer(config)
    weights = model_weights(model)
    written = write_checkpoint(weights, config, str(tmp_path), "keras")
    assert sorted(p.split("/")[-1] for p in written) == ["albert_config.json", "model.keras"]
    loaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    inputs = random_inputs(config)
    np.testing.assert_array_equal(model(inputs)["mlm_logits"], loaded(inputs)["mlm_logits"])
    back, back_config = read_checkpoint(str(tmp_path / "model.keras"), "keras")
    assert back_config == config
    for name in weights:
        np.testing.assert_array_equal(back[name], weights[name])
