"""SQuAD heads: v2.0 against a NumPy transcription, v1.1 against Hugging Face, TF1 round trips."""

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from albert.checkpoints import assign_model_weights, model_weights, read_checkpoint, write_checkpoint
from albert.checkpoints.weights import model_variables
from albert.modeling import AlbertSquadV1, AlbertSquadV2
from conftest import encoder_inputs, random_inputs, tiny_config
from hf_reference import torch_inputs
from original_checkpoints import original_fine_tuned_checkpoint


def _p_mask(inputs, query_length=3):
    """1 on the question, both [SEP] and padding; 0 on [CLS] and the context."""
    mask = inputs["input_mask"]
    p_mask = np.ones_like(mask)
    for row, length in enumerate(mask.sum(axis=1)):
        p_mask[row, 0] = 0
        p_mask[row, query_length + 2:length - 1] = 0
    return p_mask


def _layer_norm(x, gamma, beta, epsilon=1e-12):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _top_k(x, k):
    index = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, index, -1), index


def reference_v2(h, p_mask, w, start_n_top, end_n_top, start_positions=None):
    """The v2.0 head written out in NumPy (float64), time-major as the original."""
    h = h.astype(np.float64)
    p = p_mask.astype(np.float64)
    start = (h @ w["start_logits/dense/kernel"])[..., 0] + w["start_logits/dense/bias"][0]
    start_masked = start * (1 - p) - 1e30 * p
    start_log_probs = _log_softmax(start_masked)

    def end_log_probs(start_states):  # [B, K, H] -> [B, K, S]
        B, S, H = h.shape
        K = start_states.shape[1]
        x = np.concatenate([np.broadcast_to(h[:, None], (B, K, S, H)),
                            np.broadcast_to(start_states[:, :, None], (B, K, S, H))], -1)
        x = np.tanh(x @ w["end_logits/dense_0/kernel"] + w["end_logits/dense_0/bias"])
        x = _layer_norm(x, w["end_logits/LayerNorm/gamma"], w["end_logits/LayerNorm/beta"])
        logits = (x @ w["end_logits/dense_1/kernel"])[..., 0] + w["end_logits/dense_1/bias"][0]
        return _log_softmax(logits * (1 - p[:, None]) - 1e30 * p[:, None])

    out = {"start_log_probs": start_log_probs}
    if start_positions is not None:
        states = h[np.arange(len(h)), start_positions][:, None]
        out["end_log_probs"] = end_log_probs(states)[:, 0]
    else:
        top, index = _top_k(start_log_probs, start_n_top)
        states = np.take_along_axis(h, index[..., None], 1)
        end_top, end_index = _top_k(end_log_probs(states), end_n_top)
        out.update(start_top_log_probs=top, start_top_index=index,
                   end_top_log_probs=end_top.reshape(len(h), -1),
                   end_top_index=end_index.reshape(len(h), -1))
    start_p = np.exp(_log_softmax(start_masked))
    feature = np.einsum("bs,bsh->bh", start_p, h)
    answer = np.tanh(np.concatenate([feature, h[:, 0]], -1) @ w["answer_class/dense_0/kernel"]
                     + w["answer_class/dense_0/bias"])
    out["cls_logits"] = (answer @ w["answer_class/dense_1/kernel"])[:, 0]
    return out


@pytest.mark.parametrize("start_n_top,end_n_top", [(3, 2), (2, 4)])
def test_v2_head_equals_the_numpy_transcription(start_n_top, end_n_top):
    config = tiny_config()
    model = AlbertSquadV2(config, start_n_top=start_n_top, end_n_top=end_n_top, dropout_rate=0.0)
    # Larger head weights than the initialiser's, so the beam is not a near-tie.
    rng = np.random.default_rng(3)
    for name, variable in model_variables(model).items():
        if not name.startswith("bert/"):
            variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    inputs = encoder_inputs(random_inputs(config, batch_size=3, sequence_length=14))
    inputs["p_mask"] = _p_mask(inputs)
    weights = {k: v.astype(np.float64) for k, v in model_weights(model).items()}
    h = model.encoder(inputs, training=False)["sequence_output"].numpy()

    ours = {k: np.asarray(v) for k, v in model(inputs, training=False).items()}
    expected = reference_v2(h, inputs["p_mask"], weights, start_n_top, end_n_top)
    for name in ("start_top_index", "end_top_index"):
        np.testing.assert_array_equal(ours[name], expected[name], err_msg=name)
    for name in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
        np.testing.assert_allclose(ours[name], expected[name], atol=1e-5, err_msg=name)
    assert ours["end_top_index"].shape == (3, start_n_top * end_n_top)

    # Training: the end is conditioned on the gold start.
    starts = np.array([0, 6, 5], np.int32)
    trained = model(dict(inputs, start_positions=starts), training=True)
    expected = reference_v2(h, inputs["p_mask"], weights, start_n_top, end_n_top, starts)
    for name in ("start_log_probs", "end_log_probs", "cls_logits"):
        got = np.asarray(trained[name])
        finite = expected[name] > -1e20
        np.testing.assert_allclose(got[finite], expected[name][finite], atol=1e-5, err_msg=name)


def test_v1_head_and_huggingface_question_answering_agree(tmp_path):
    config = tiny_config()
    model = AlbertSquadV1(config)
    inputs = encoder_inputs(random_inputs(config, batch_size=3, sequence_length=12))
    ours = model(inputs, training=False)
    write_checkpoint(model_weights(model), config, str(tmp_path), "hf", head="squad_v1")
    hf = transformers.AlbertForQuestionAnswering.from_pretrained(str(tmp_path))
    hf.eval()
    with torch.no_grad():
        theirs = hf(**torch_inputs(inputs))
    np.testing.assert_allclose(theirs.start_logits.numpy(), ours["start_logits"], atol=1e-5)
    np.testing.assert_allclose(theirs.end_logits.numpy(), ours["end_logits"], atol=1e-5)
    back, _ = read_checkpoint(str(tmp_path), "hf", config, heads="required", head="squad_v1")
    for name, value in model_weights(model).items():
        np.testing.assert_array_equal(back[name], value)


@pytest.mark.parametrize("head,model_class", [("squad_v1", AlbertSquadV1),
                                              ("squad_v2", AlbertSquadV2)])
def test_original_checkpoints_move_both_ways_bit_exactly(tmp_path, head, model_class):
    config = tiny_config()
    prefix = str(tmp_path / "model.ckpt-800")
    values = original_fine_tuned_checkpoint(prefix, config, head=head)
    weights, _ = read_checkpoint(prefix, "tf1", config, heads="required", head=head)
    model = model_class(config)
    assign_model_weights(model, weights, prefix)
    for name, value in model_weights(model).items():
        assert value.tobytes() == values[name].tobytes(), name
    write_checkpoint(model_weights(model), config, str(tmp_path / "back"), "tf1", head=head)
    reader = tf.train.load_checkpoint(str(tmp_path / "back" / "model.ckpt-best"))
    for name, value in values.items():
        assert reader.get_tensor(name).tobytes() == value.tobytes(), name


@pytest.mark.parametrize("head", ["squad_v1", "squad_v2"])
def test_keras_files_keep_the_squad_heads(tmp_path, head):
    config = tiny_config()
    model = AlbertSquadV2(config) if head == "squad_v2" else AlbertSquadV1(config)
    write_checkpoint(model_weights(model), config, str(tmp_path), "keras", head=head)
    back, _ = read_checkpoint(str(tmp_path), "keras", config, heads="required", head=head)
    for name, value in model_weights(model).items():
        np.testing.assert_array_equal(back[name], value)
