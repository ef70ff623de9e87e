"""Parity with Hugging Face `transformers` (PyTorch, CPU) loaded from our export."""

import json

import numpy as np
import pytest

from albert.checkpoints import model_weights, read_checkpoint, write_checkpoint
from albert.checkpoints.hf import HF_WEIGHTS
from albert.errors import CheckpointMismatchError, ConfigError
from albert.modeling import AlbertEncoder, AlbertPretrainer
from conftest import random_inputs, tiny_config
from hf_reference import torch_inputs

# The test extras install these; a missing one fails the run rather than skipping.
import torch  # noqa: E402
import transformers  # noqa: E402

PARITY_CONFIGS = {
    "groups2_inner2": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
    "e_equals_h": dict(embedding_size=32),
    "all_shared": dict(num_hidden_layers=3),
    "not_shared_relu": dict(num_hidden_layers=3, num_hidden_groups=3, hidden_act="relu"),
}


def _randomise_norms_and_biases(model, seed=3):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if any(part in variable.path for part in ("gamma", "beta", "bias")):
            variable.assign(rng.normal(0.5, 0.2, variable.shape).astype("float32"))


@pytest.mark.parametrize("name", sorted(PARITY_CONFIGS))
def test_pretraining_outputs_match_transformers(tmp_path, name):
    config = tiny_config(**PARITY_CONFIGS[name])
    model = AlbertPretrainer(config)
    _randomise_norms_and_biases(model)
    write_checkpoint(model_weights(model), config, str(tmp_path), "hf")
    reference = transformers.AlbertForPreTraining.from_pretrained(str(tmp_path)).eval()

    inputs = random_inputs(config, batch_size=4, sequence_length=12)
    ours = model(inputs)
    with torch.no_grad():
        theirs = reference(**torch_inputs(inputs), output_hidden_states=True)
    hf_mlm = np.take_along_axis(theirs.prediction_logits.numpy(),
                                inputs["masked_lm_positions"][..., None].astype(np.int64), axis=1)
    hf_pooled = reference.albert.pooler_activation(
        reference.albert.pooler(theirs.hidden_states[-1][:, 0])).detach().numpy()
    comparisons = {
        "sequence_output": (ours["sequence_output"], theirs.hidden_states[-1].numpy()),
        "pooled_output": (ours["pooled_output"], hf_pooled),
        "mlm_logits": (ours["mlm_logits"], hf_mlm),
        "sentence_order_logits": (ours["sentence_order_logits"], theirs.sop_logits.numpy()),
    }
    for key, (a, b) in comparisons.items():
        assert np.abs(np.asarray(a) - b).max() <= 1e-5, key
    assert len(theirs.hidden_states) - 1 == len(ours["encoder_outputs"])
    for a, b in zip(ours["encoder_outputs"], theirs.hidden_states[1:]):
        assert np.abs(np.asarray(a) - b.numpy()).max() <= 1e-5


def test_encoder_export_loads_as_albert_model(tmp_path):
    config = tiny_config()
    encoder = AlbertEncoder(config)
    write_checkpoint(model_weights(encoder), config, str(tmp_path), "hf")
    with open(tmp_path / "config.json") as handle:
        assert json.load(handle)["architectures"] == ["AlbertModel"]
    reference = transformers.AlbertModel.from_pretrained(str(tmp_path)).eval()
    inputs = random_inputs(config)
    with torch.no_grad():
        theirs = reference(**torch_inputs(inputs))
    ours = encoder({k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    assert np.abs(np.asarray(ours["pooled_output"]) - theirs.pooler_output.numpy()).max() <= 1e-5


@pytest.mark.parametrize("changes", [{}, {"embedding_size": 32},
                                     {"num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2}])
def test_ours_to_hf_to_ours_is_bit_exact(tmp_path, changes):
    config = tiny_config(**changes)
    weights = model_weights(AlbertPretrainer(config))
    write_checkpoint(weights, config, str(tmp_path), "hf")
    back, back_config = read_checkpoint(str(tmp_path), "hf")
    assert back_config == config
    assert set(back) == set(weights)
    for name in weights:
        np.testing.assert_array_equal(back[name], weights[name])


def test_checkpoint_saved_by_transformers_is_read(tmp_path):
    hf_config = transformers.AlbertConfig(
        vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=37, hidden_act="gelu_new",
        max_position_embeddings=64)
    reference = transformers.AlbertForPreTraining(hf_config).eval()
    reference.save_pretrained(str(tmp_path))
    weights, config = read_checkpoint(str(tmp_path), "hf")
    np.testing.assert_array_equal(
        weights["bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"],
        reference.albert.encoder.albert_layer_groups[0].albert_layers[0].attention.query.weight
        .detach().numpy().T)
    assert config.num_hidden_layers == 2 and config.activation == "gelu"


def test_strategies_hf_cannot_represent_are_refused(tmp_path):
    for changes, message in [({"sharing_strategy": "shared_ffn"}, "no per-layer sub-block copies"),
                             ({"num_hidden_layers": 18, "num_hidden_groups": 14}, "routes layers")]:
        config = tiny_config(**changes)
        with pytest.raises(ConfigError, match=message):
            write_checkpoint(model_weights(AlbertEncoder(config)), config, str(tmp_path / "x"), "hf")
    assert not (tmp_path / "x").exists()


def test_non_identity_projection_with_equal_sizes_is_refused(tmp_path):
    config = tiny_config(embedding_size=32)
    write_checkpoint(model_weights(AlbertEncoder(config)), config, str(tmp_path), "hf")
    from safetensors.numpy import load_file, save_file
    state = load_file(str(tmp_path / HF_WEIGHTS))
    state["albert.encoder.embedding_hidden_mapping_in.weight"] *= 2
    save_file(state, str(tmp_path / HF_WEIGHTS), metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatchError, match="not the identity"):
        read_checkpoint(str(tmp_path), "hf")


def test_hf_config_disagreeing_with_the_given_config_is_an_error(tmp_path):
    config = tiny_config()
    write_checkpoint(model_weights(AlbertPretrainer(config)), config, str(tmp_path), "hf")
    with pytest.raises(CheckpointMismatchError, match="mis-shaped"):
        read_checkpoint(str(tmp_path), "hf", tiny_config(intermediate_size=40))
