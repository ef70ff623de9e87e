import keras
import numpy as np
import pytest

import numpy_reference
from albert.checkpoints import model_weights
from albert.checkpoints.naming import count_parameters
from albert.config import AlbertConfig
from albert.errors import InputError
from albert.modeling import AlbertClassifier, AlbertEncoder, AlbertPretrainer
from albert.modeling.attention import attention_bias_from_mask
from conftest import encoder_inputs, random_inputs, tiny_config


def test_shapes_of_the_original_model_test():
    # The original's modeling test: B=13, S=7, V=99, E=32, H=32, L=5, N=4, I=37,
    # dropout 0.1, T=16, training mode.
    config = AlbertConfig(vocab_size=99, embedding_size=32, hidden_size=32, num_hidden_layers=5,
                          num_attention_heads=4, intermediate_size=37, hidden_dropout_prob=0.1,
                          attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                          type_vocab_size=16)
    encoder = AlbertEncoder(config)
    inputs = random_inputs(config, batch_size=13, sequence_length=7, num_predictions=2)
    inputs["input_type_ids"] = np.random.default_rng(0).integers(0, 16, (13, 7)).astype("int32")
    outputs = encoder(encoder_inputs(inputs), training=True)
    assert tuple(encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"]).shape) == (13, 7, 32)
    assert tuple(outputs["sequence_output"].shape) == (13, 7, 32)
    assert tuple(outputs["pooled_output"].shape) == (13, 32)
    assert len(outputs["encoder_outputs"]) == 5
    assert encoder.embedding_projection is None  # E == H: no projection variables
    assert not any("embedding_hidden_mapping_in" in v.path for v in encoder.weights)


def test_encoder_outputs_has_one_entry_per_block_application():
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    outputs = AlbertEncoder(config)(encoder_inputs(random_inputs(config)))
    assert len(outputs["encoder_outputs"]) == 8
    np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])


@pytest.mark.parametrize("changes", [
    {},
    {"num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2},
    {"embedding_size": 32},
    {"sharing_strategy": "shared_attention"},
    {"sharing_strategy": "shared_ffn"},
    {"num_hidden_layers": 22, "num_hidden_groups": 22, "hidden_act": "relu"},
], ids=["all_shared", "groups2_inner2", "e_equals_h", "shared_attention", "shared_ffn",
        "routing_quirk_22"])
def test_forward_pass_matches_the_numpy_transcription_of_the_original(changes):
    config = tiny_config(**changes)
    model = AlbertPretrainer(config)
    # Non-trivial LayerNorm and bias values, so every variable matters.
    rng = np.random.default_rng(7)
    for variable in model.weights:
        if "gamma" in variable.path or "beta" in variable.path or "bias" in variable.path:
            variable.assign(rng.normal(0.5, 0.2, variable.shape).astype("float32"))
    inputs = random_inputs(config)
    ours = model(inputs)
    reference = numpy_reference.pretrainer(model_weights(model), config, inputs)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sentence_order_logits"):
        np.testing.assert_allclose(np.asarray(ours[key]), reference[key], atol=2e-5, rtol=0,
                                   err_msg=key)
    for ours_layer, reference_layer in zip(ours["encoder_outputs"], reference["encoder_outputs"],
                                           strict=True):
        np.testing.assert_allclose(np.asarray(ours_layer), reference_layer, atol=2e-5, rtol=0)


@pytest.mark.parametrize("changes", [
    {},
    {"num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2},
    {"embedding_size": 32},
    {"num_hidden_layers": 3, "num_hidden_groups": 3},
    {"sharing_strategy": "shared_ffn"},
], ids=["all_shared", "groups2_inner2", "e_equals_h", "not_shared", "shared_ffn"])
def test_pooled_only_computes_the_same_pooled_output_and_logits(changes):
    config = tiny_config(**changes)
    classifier = AlbertClassifier(config, num_labels=3)
    inputs = encoder_inputs(random_inputs(config, batch_size=4, sequence_length=12))
    full = classifier(inputs)
    lean = classifier(inputs, logits_only=True)
    assert sorted(lean) == ["logits", "pooled_output"]
    for key in ("pooled_output", "logits"):
        np.testing.assert_allclose(np.asarray(lean[key]), np.asarray(full[key]), atol=1e-6,
                                   rtol=0, err_msg=key)
    only = classifier.encoder(inputs, pooled_only=True)
    assert list(only) == ["pooled_output"]
    # Token 0 alone in the last block: its query, output and feed-forward ran on [B, 1, H].
    last_block_input = classifier.encoder(inputs)["encoder_outputs"][-2]
    attention = classifier.encoder.attention_blocks[-1]
    first = attention(last_block_input, attention_bias_from_mask(inputs["input_mask"], "float32"),
                      query_states=last_block_input[:, :1])
    assert tuple(first.shape) == (4, 1, config.hidden_size)


def test_pooled_only_is_for_inference_and_has_the_query_shape_symbolically():
    config = tiny_config()
    classifier = AlbertClassifier(config, num_labels=2)
    inputs = encoder_inputs(random_inputs(config, batch_size=2, sequence_length=6))
    with pytest.raises(InputError, match="inference"):
        classifier(inputs, training=True, logits_only=True)
    attention = classifier.encoder.attention_blocks[0]
    hidden = keras.KerasTensor((None, 6, config.hidden_size))
    bias = keras.KerasTensor((None, 1, 1, 6))
    assert attention(hidden, bias).shape == (None, 6, config.hidden_size)
    first = attention(hidden, bias, query_states=keras.KerasTensor((None, 1, config.hidden_size)))
    assert first.shape == (None, 1, config.hidden_size)


def test_padding_tokens_do_not_change_real_positions():
    config = tiny_config()
    encoder = AlbertEncoder(config)
    inputs = encoder_inputs(random_inputs(config, batch_size=4, sequence_length=12))
    changed = {key: value.copy() for key, value in inputs.items()}
    padding = inputs["input_mask"] == 0
    assert padding.any()
    rng = np.random.default_rng(3)
    changed["input_word_ids"][padding] = rng.integers(5, config.vocab_size, padding.sum())
    changed["input_type_ids"][padding] = 1 - changed["input_type_ids"][padding]
    before = np.asarray(encoder(inputs)["sequence_output"])
    after = np.asarray(encoder(changed)["sequence_output"])
    real = ~padding
    np.testing.assert_allclose(after[real], before[real], atol=1e-5, rtol=0)
    assert np.abs(after[padding] - before[padding]).max() > 1e-3  # padded positions did change


def test_appending_padding_leaves_outputs_unchanged():
    config = tiny_config()
    encoder = AlbertEncoder(config)
    inputs = encoder_inputs(random_inputs(config, batch_size=2, sequence_length=8))
    inputs["input_mask"][:] = 1
    padded = {key: np.pad(value, ((0, 0), (0, 5))) for key, value in inputs.items()}
    short = encoder(inputs)
    long = encoder(padded)
    np.testing.assert_allclose(np.asarray(long["sequence_output"])[:, :8],
                               np.asarray(short["sequence_output"]), atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(long["pooled_output"]),
                               np.asarray(short["pooled_output"]), atol=1e-5, rtol=0)


def test_mask_and_type_ids_default_to_all_ones_and_zeros():
    config = tiny_config()
    encoder = AlbertEncoder(config)
    ids = random_inputs(config)["input_word_ids"]
    explicit = encoder({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                        "input_type_ids": np.zeros_like(ids)})
    implicit = encoder({"input_word_ids": ids})
    np.testing.assert_array_equal(explicit["sequence_output"], implicit["sequence_output"])


def test_sequence_longer_than_max_position_embeddings_is_an_error():
    config = tiny_config(max_position_embeddings=16)
    encoder = AlbertEncoder(config)
    ids = np.ones((2, 17), "int32")
    with pytest.raises(InputError, match="Sequence length 17 exceeds max_position_embeddings 16"):
        encoder({"input_word_ids": ids})


def test_dropout_is_active_in_training_only():
    config = tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    encoder = AlbertEncoder(config)
    inputs = encoder_inputs(random_inputs(config))
    inference = [np.asarray(encoder(inputs)["sequence_output"]) for _ in range(2)]
    np.testing.assert_array_equal(*inference)
    training = [np.asarray(encoder(inputs, training=True)["sequence_output"]) for _ in range(2)]
    assert np.abs(training[0] - training[1]).max() > 1e-3


@pytest.mark.parametrize("changes", [
    {}, {"embedding_size": 32}, {"num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2},
    {"sharing_strategy": "shared_attention"}, {"sharing_strategy": "shared_ffn"},
])
def test_built_models_have_exactly_the_name_table_parameter_count(changes):
    config = tiny_config(**changes)
    assert AlbertEncoder(config).count_params() == count_parameters(config)
    assert AlbertPretrainer(config).count_params() == count_parameters(config, include_heads=True)


def test_albert_base_parameter_count_is_exact():
    config = AlbertConfig.from_json_file("configs/albert_base_v2.json")
    assert AlbertEncoder(config).count_params() == 11_683_584


def _block_variables(encoder):
    attention = {id(v) for block in encoder.attention_blocks for v in block.weights}
    ffn = {id(v) for block in encoder.ffn_blocks for v in block.weights}
    return len(attention), len(ffn)


def test_all_shared_weight_count_does_not_grow_with_depth():
    shallow = AlbertEncoder(tiny_config(num_hidden_layers=2))
    deep = AlbertEncoder(tiny_config(num_hidden_layers=6))
    assert len(shallow.weights) == len(deep.weights)
    assert shallow.count_params() == deep.count_params()
    assert _block_variables(deep) == (10, 6)


def test_not_shared_gives_every_layer_its_own_blocks():
    encoder = AlbertEncoder(tiny_config(num_hidden_layers=4, num_hidden_groups=4))
    assert _block_variables(encoder) == (40, 24)


def _perturb(block):
    for variable in block.weights:
        variable.assign(variable + 0.05)


@pytest.mark.parametrize("strategy, shared, per_layer", [
    ("shared_attention", "attention_blocks", "ffn_blocks"),
    ("shared_ffn", "ffn_blocks", "attention_blocks"),
])
def test_partial_sharing_shares_one_sub_block_and_copies_the_other(strategy, shared, per_layer):
    config = tiny_config(num_hidden_layers=4, sharing_strategy=strategy)
    encoder = AlbertEncoder(config)
    assert len(getattr(encoder, shared)) == 1
    assert len(getattr(encoder, per_layer)) == 4
    inputs = encoder_inputs(random_inputs(config))
    before = [np.asarray(x) for x in encoder(inputs)["encoder_outputs"]]

    # Changing layer 2's own copy leaves layers 0 and 1 untouched and changes 2 and 3.
    _perturb(getattr(encoder, per_layer)[2])
    after = [np.asarray(x) for x in encoder(inputs)["encoder_outputs"]]
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert np.abs(after[2] - before[2]).max() > 1e-4

    # Changing the shared sub-block changes the very first layer.
    _perturb(getattr(encoder, shared)[0])
    assert np.abs(np.asarray(encoder(inputs)["encoder_outputs"][0]) - after[0]).max() > 1e-4


@pytest.mark.parametrize("model_class", [AlbertEncoder, AlbertPretrainer])
def test_keras_file_round_trip(tmp_path, model_class):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, sharing_strategy="groups")
    model = model_class(config)
    inputs = random_inputs(config)
    if model_class is AlbertEncoder:
        inputs = encoder_inputs(inputs)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is model_class
    expected, actual = model(inputs), loaded(inputs)
    np.testing.assert_array_equal(expected["sequence_output"], actual["sequence_output"])
    if model_class is AlbertPretrainer:
        np.testing.assert_array_equal(expected["mlm_logits"], actual["mlm_logits"])


def test_layers_round_trip_through_get_config():
    config = tiny_config(sharing_strategy="shared_ffn", hidden_act="relu")
    model = AlbertPretrainer(config)
    layers = [model, model.encoder, model.encoder.embeddings, model.encoder.attention_blocks[0],
              model.encoder.ffn_blocks[0], model.masked_lm, model.sentence_order]
    for layer in layers:
        clone = type(layer).from_config(layer.get_config())
        assert clone.get_config() == layer.get_config(), type(layer).__name__
    assert model.encoder.albert_config == config


def test_non_dict_input_is_a_clear_error():
    encoder = AlbertEncoder(tiny_config())
    with pytest.raises(InputError, match="expects a dict"):
        encoder(np.ones((2, 3), "int32"))
