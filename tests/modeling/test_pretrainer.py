import numpy as np
import pytest
from keras import ops

from albert.errors import InputError
from albert.modeling import AlbertPretrainer, pretraining_losses, pretraining_metric_sums
from albert.modeling.heads import gather_positions
from conftest import random_inputs, tiny_config


def _log_softmax(logits):
    logits = logits - logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _labels(config, batch_size=3, num_predictions=4, seed=5):
    rng = np.random.default_rng(seed)
    weights = np.ones((batch_size, num_predictions), "float32")
    weights[1, 2:] = 0.0  # padded prediction slots
    return {"masked_lm_ids": rng.integers(0, config.vocab_size, (batch_size, num_predictions)).astype("int32"),
            "masked_lm_weights": weights,
            "next_sentence_labels": rng.integers(0, 2, (batch_size, 1)).astype("int32")}


def test_losses_are_the_original_formulas():
    config = tiny_config()
    model = AlbertPretrainer(config)
    inputs = random_inputs(config)
    labels = _labels(config)
    outputs = model(inputs)
    losses = {k: float(v) for k, v in pretraining_losses(outputs, labels).items()}

    log_probs = _log_softmax(np.asarray(outputs["mlm_logits"], np.float64))
    per_position = -np.take_along_axis(log_probs, labels["masked_lm_ids"][..., None], -1)[..., 0]
    weights = labels["masked_lm_weights"]
    expected_mlm = (weights * per_position).sum() / (weights.sum() + 1e-5)
    sop_log_probs = _log_softmax(np.asarray(outputs["sentence_order_logits"], np.float64))
    expected_sop = -np.take_along_axis(sop_log_probs, labels["next_sentence_labels"], -1).mean()

    assert losses["masked_lm_loss"] == pytest.approx(expected_mlm, rel=1e-5)
    assert losses["sentence_order_loss"] == pytest.approx(expected_sop, rel=1e-5)
    assert losses["loss"] == pytest.approx(expected_mlm + expected_sop, rel=1e-5)

    # Masked LM alone (the paper's "None" ablation): the sentence loss is reported, not trained.
    mlm_only = {k: float(v) for k, v in
                pretraining_losses(outputs, labels, sentence_objective=False).items()}
    assert mlm_only["loss"] == pytest.approx(expected_mlm, rel=1e-5)
    assert mlm_only["sentence_order_loss"] == pytest.approx(expected_sop, rel=1e-5)


def test_metric_sums_are_weighted_like_the_original():
    config = tiny_config()
    outputs = AlbertPretrainer(config)(random_inputs(config))
    labels = _labels(config)
    # Make two predictions correct, one of them in a zero-weight slot.
    labels["masked_lm_ids"][0, 0] = int(np.argmax(outputs["mlm_logits"][0, 0]))
    labels["masked_lm_ids"][1, 3] = int(np.argmax(outputs["mlm_logits"][1, 3]))
    sums = {k: (float(a), float(b)) for k, (a, b) in pretraining_metric_sums(outputs, labels).items()}
    predictions = np.argmax(np.asarray(outputs["mlm_logits"]), -1)
    weights = labels["masked_lm_weights"]
    correct = (predictions == labels["masked_lm_ids"]) * weights
    assert sums["masked_lm_accuracy"] == pytest.approx((correct.sum(), weights.sum()))
    assert sums["masked_lm_accuracy"][0] >= 1.0
    sop_correct = (np.argmax(np.asarray(outputs["sentence_order_logits"]), -1)
                   == labels["next_sentence_labels"][:, 0]).sum()
    assert sums["sentence_order_accuracy"] == pytest.approx((sop_correct, 3.0))
    # The streaming MLM loss divides by Σw without the training loss's 1e-5.
    loss_total, loss_count = sums["masked_lm_loss"]
    assert loss_total / loss_count == pytest.approx(
        float(pretraining_losses(outputs, labels)["masked_lm_loss"]) * (weights.sum() + 1e-5) / weights.sum(),
        rel=1e-5)


def test_mlm_logits_are_computed_at_the_masked_positions_only():
    config = tiny_config()
    model = AlbertPretrainer(config)
    inputs = random_inputs(config, num_predictions=3)
    outputs = model(inputs)
    assert tuple(outputs["mlm_logits"].shape) == (3, 3, config.vocab_size)
    assert tuple(outputs["sentence_order_logits"].shape) == (3, 2)
    # The head applied to every position, then indexed, gives the same logits.
    everything = np.tile(np.arange(10, dtype="int32"), (3, 1))
    all_logits = np.asarray(model.masked_lm(outputs["sequence_output"], everything,
                                            model.encoder.get_embedding_table()))
    expected = np.take_along_axis(all_logits, inputs["masked_lm_positions"][..., None], axis=1)
    np.testing.assert_allclose(np.asarray(outputs["mlm_logits"]), expected, atol=1e-6)


def test_gather_positions_indexes_each_row_separately():
    states = np.arange(2 * 5 * 3, dtype="float32").reshape(2, 5, 3)
    positions = np.array([[4, 0], [1, 1]], "int32")
    gathered = np.asarray(gather_positions(ops.convert_to_tensor(states), positions))
    np.testing.assert_array_equal(gathered, np.stack([states[0, [4, 0]], states[1, [1, 1]]]))


def test_decoder_is_tied_to_the_word_embeddings():
    model = AlbertPretrainer(tiny_config())
    table_paths = [v.path for v in model.weights if v.shape == (99, 16)]
    assert len(table_paths) == 1  # no separate decoder matrix


def test_missing_masked_positions_is_a_clear_error():
    config = tiny_config()
    inputs = random_inputs(config)
    del inputs["masked_lm_positions"]
    with pytest.raises(InputError, match="masked_lm_positions"):
        AlbertPretrainer(config)(inputs)
