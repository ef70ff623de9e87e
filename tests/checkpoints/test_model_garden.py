"""Parity with tf-models-official's `AlbertEncoder` loaded from our export."""

import numpy as np
import pytest
import tensorflow as tf

from albert.checkpoints import model_weights, read_checkpoint, write_checkpoint
from albert.checkpoints.model_garden import (MODEL_GARDEN_CHECKPOINT, assign_to_model_garden,
                                             build_model_garden_encoder, model_garden_weights)
from albert.errors import CheckpointMismatchError, ConfigError
from albert.modeling import AlbertEncoder
from conftest import encoder_inputs, random_inputs, tiny_config

# tf-models-official is a dependency: a missing one fails here rather than skipping.
import official.nlp.modeling.networks  # noqa: E402,F401


@pytest.mark.parametrize("changes", [{}, {"embedding_size": 32}, {"num_hidden_layers": 5}])
def test_encoder_outputs_match_model_garden(tmp_path, changes):
    config = tiny_config(**changes)
    encoder = AlbertEncoder(config)
    rng = np.random.default_rng(1)
    for variable in encoder.weights:
        if any(part in variable.path for part in ("gamma", "beta", "bias")):
            variable.assign(rng.normal(0.5, 0.2, variable.shape).astype("float32"))
    write_checkpoint(model_weights(encoder), config, str(tmp_path), "model_garden")

    reference = build_model_garden_encoder(config)
    status = tf.train.Checkpoint(encoder=reference).read(str(tmp_path / MODEL_GARDEN_CHECKPOINT))
    status.assert_existing_objects_matched()
    inputs = encoder_inputs(random_inputs(config, batch_size=4, sequence_length=12))
    ours = encoder(inputs)
    theirs = reference(inputs, training=False)
    for key in ("sequence_output", "pooled_output"):
        assert np.abs(np.asarray(ours[key]) - theirs[key].numpy()).max() <= 1e-5, key
    for a, b in zip(ours["encoder_outputs"], theirs["encoder_outputs"], strict=True):
        assert np.abs(np.asarray(a) - b.numpy()).max() <= 1e-5


def test_model_garden_round_trip_is_bit_exact(tmp_path):
    config = tiny_config()
    weights = model_weights(AlbertEncoder(config))
    write_checkpoint(weights, config, str(tmp_path), "model_garden")
    back, _ = read_checkpoint(str(tmp_path), "model_garden", config)
    assert set(back) == set(weights)
    for name in weights:
        np.testing.assert_array_equal(back[name], weights[name])


def test_model_garden_default_type_vocab_size_is_caught(tmp_path):
    # Model Garden's own default (type_vocab_size=16) against an ALBERT config (2).
    config = tiny_config()
    wrong = build_model_garden_encoder(tiny_config(type_vocab_size=16))
    tf.train.Checkpoint(encoder=wrong).write(str(tmp_path / "enc"))
    with pytest.raises(CheckpointMismatchError,
                       match=r"token_type_embeddings: checkpoint \[16, 16\], config \[2, 16\]"):
        read_checkpoint(str(tmp_path / "enc"), "model_garden", config)


def test_weights_move_in_and_out_of_a_live_model_garden_encoder():
    config = tiny_config()
    weights = model_weights(AlbertEncoder(config))
    reference = build_model_garden_encoder(config)
    assign_to_model_garden(reference, weights, config)
    back = model_garden_weights(reference, config)
    for name in weights:
        np.testing.assert_array_equal(back[name], weights[name])


def test_grouped_models_are_refused(tmp_path):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2)
    with pytest.raises(ConfigError, match="only hold all-shared models"):
        write_checkpoint(model_weights(AlbertEncoder(config)), config, str(tmp_path), "model_garden")
