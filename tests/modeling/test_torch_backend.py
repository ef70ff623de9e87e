"""The same model under the PyTorch Keras backend gives the TensorFlow backend's outputs."""

import numpy as np
import pytest

from albert.checkpoints import model_weights
from albert.modeling import AlbertPretrainer
from conftest import random_inputs, tiny_config
from scripts import run_script

import torch  # noqa: E402,F401  (a test extra: fails rather than skips when missing)

TORCH_SIDE = """
import sys
import numpy as np
import keras
assert keras.backend.backend() == "torch"
from albert.checkpoints import assign_model_weights
from albert.config import AlbertConfig
from albert.modeling import AlbertPretrainer
data = np.load(sys.argv[1], allow_pickle=False)
config = AlbertConfig.from_json_string(str(data["config"]))
model = AlbertPretrainer(config)
assign_model_weights(model, {k[2:]: data[k] for k in data.files if k.startswith("w:")})
inputs = {k[2:]: data[k] for k in data.files if k.startswith("i:")}
outputs = model(inputs)
np.savez(sys.argv[2], **{k: keras.ops.convert_to_numpy(outputs[k]) for k in
         ("sequence_output", "pooled_output", "mlm_logits", "sentence_order_logits")})
"""


# Slow tier (25-33 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_torch_backend_matches_tensorflow_backend(tmp_path):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    model = AlbertPretrainer(config)
    inputs = random_inputs(config)
    expected = model(inputs)
    np.savez(tmp_path / "in.npz", config=config.to_json_string(),
             **{f"w:{k}": v for k, v in model_weights(model).items()},
             **{f"i:{k}": v for k, v in inputs.items()})
    script = tmp_path / "torch_side.py"
    script.write_text(TORCH_SIDE)
    result = run_script(str(script), str(tmp_path / "in.npz"), str(tmp_path / "out.npz"),
                        env={"KERAS_BACKEND": "torch"})
    assert result.returncode == 0, result.stderr
    actual = np.load(tmp_path / "out.npz")
    for key in actual.files:
        assert np.abs(actual[key] - np.asarray(expected[key])).max() <= 1e-5, key
