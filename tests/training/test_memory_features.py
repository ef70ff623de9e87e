"""Gradient accumulation and rematerialisation: the same training, less memory."""

import json
import os
import random
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert.config import AlbertConfig
from albert.modeling.encoder import set_rematerialization
from albert.pretraining_data.schema import DataContract
from albert.tasks.pretraining import PretrainingTask
from conftest import REPO
from scripts import assert_clean_failure, run_script
from test_preemption import _wait_for_steps
from test_run_pretraining import _args, _config_file, _losses

STEPS = 12
COMMON = dict(num_train_steps=STEPS, train_batch_size=16, save_checkpoints_steps=6)


def _final_weights(output_dir):
    reader = tf.train.load_checkpoint(os.path.join(output_dir, f"model.ckpt-{STEPS}"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith("bert/") and "adam" not in name}


def _assert_same_training(reference_dir, other_dir):
    expected, actual = _losses(reference_dir), _losses(other_dir)
    assert sorted(actual) == list(range(1, STEPS + 1))
    for step in expected:
        assert actual[step] == pytest.approx(expected[step], rel=1e-5), step
    reference, weights = _final_weights(reference_dir), _final_weights(other_dir)
    assert set(weights) == set(reference) and len(reference) > 10
    for name in reference:
        np.testing.assert_allclose(weights[name], reference[name], rtol=1e-5, atol=1e-5,
                                   err_msg=name)


@pytest.fixture(scope="module")
def unsplit(tmp_path_factory, synthetic_records):
    files, _ = synthetic_records
    root = tmp_path_factory.mktemp("accumulation")
    config = _config_file(root)   # dropout on
    result = run_script(*_args(config, files, str(root / "unsplit"), **COMMON))
    assert result.returncode == 0, result.stderr[-3000:]
    return config, files, root / "unsplit"


# The mirrored case (a minute) and rematerialisation (20 s) are `slow`; one device with
# accumulation stays in the default suite.
@pytest.mark.parametrize("flags", [dict(gradient_accumulation_steps=4),
                                   pytest.param(dict(gradient_accumulation_steps=4,
                                                     strategy="mirrored", cpu_devices=2),
                                                marks=pytest.mark.slow),
                                   pytest.param(dict(gradient_accumulation_steps=2,
                                                     rematerialize=True),
                                                marks=pytest.mark.slow)])
def test_split_steps_train_like_the_unsplit_step(tmp_path, unsplit, flags):
    config, files, reference = unsplit
    result = run_script(*_args(config, files, str(tmp_path / "split"), **COMMON, **flags))
    assert result.returncode == 0, result.stderr[-3000:]
    _assert_same_training(reference, tmp_path / "split")


# `slow` (about 40 s, a killed process and its resumption); CI runs it.
@pytest.mark.slow
def test_a_run_killed_mid_step_resumes_like_the_unsplit_run(tmp_path, unsplit):
    config, files, reference = unsplit
    output_dir = tmp_path / "killed"
    args = _args(config, files, str(output_dir), **COMMON, gradient_accumulation_steps=4)
    process = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=REPO))
    _wait_for_steps(output_dir, [process], steps=STEPS // 2 + 1)
    process.send_signal(signal.SIGKILL)   # inside a step's micro-batch loop, most likely
    process.wait()
    resumed = run_script(*args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed from" in resumed.stderr
    _assert_same_training(reference, output_dir)


def test_a_batch_that_does_not_split_is_one_error_line(tmp_path, unsplit):
    config, files, _ = unsplit
    result = run_script(*_args(config, files, str(tmp_path / "bad"), **COMMON,
                               gradient_accumulation_steps=3))
    assert_clean_failure(result, "--gradient_accumulation_steps=3")
    assert not (tmp_path / "bad").exists()


# Slow tier (about 32 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_fine_tuning_accumulates_like_the_unsplit_batch(tmp_path, synthetic_corpus):
    from test_run_classifier import TINY as CLASSIFIER, _args as classifier_args, _sst2_folder

    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps({**CLASSIFIER, "hidden_dropout_prob": 0.1,
                                       "attention_probs_dropout_prob": 0.1}))
    _sst2_folder(str(tmp_path / "glue" / "SST-2"), random.Random(3), 32)
    runs = {}
    for steps in (1, 4):
        output_dir = tmp_path / f"k{steps}"
        result = run_script(*classifier_args(config_file, str(tmp_path / "glue"), spm,
                                             str(output_dir), do_train=True, train_step=8,
                                             save_checkpoints_steps=8,
                                             gradient_accumulation_steps=steps))
        assert result.returncode == 0, result.stderr[-3000:]
        runs[steps] = {row["step"]: row["loss"] for row in map(
            json.loads, (output_dir / "train_log.jsonl").read_text().splitlines())}
    assert sorted(runs[4]) == list(range(1, 9))
    for step, loss in runs[1].items():
        assert runs[4][step] == pytest.approx(loss, rel=1e-5), step


def test_rematerialised_gradients_equal_the_stored_ones():
    config = AlbertConfig(vocab_size=1200, embedding_size=16, hidden_size=32,
                          num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=64, hidden_dropout_prob=0.1,
                          attention_probs_dropout_prob=0.1)
    data = DataContract(files=[], record_counts=[], max_seq_length=32, max_predictions_per_seq=5,
                        has_token_boundary=False)
    task = PretrainingTask(config, data)
    model = task.build_model()
    ids = tf.random.stateless_uniform([4, 32], [3, 4], 5, 1200, tf.int32)
    features = {"input_word_ids": ids, "input_mask": tf.ones([4, 32], tf.int32),
                "input_type_ids": tf.zeros([4, 32], tf.int32),
                "masked_lm_positions": tf.constant([[1, 3, 5, 7, 9]] * 4),
                "masked_lm_ids": tf.gather(ids, [1, 3, 5, 7, 9], axis=1),
                "masked_lm_weights": tf.ones([4, 5]), "next_sentence_labels": tf.zeros([4, 1],
                                                                                       tf.int32),
                "dropout_seeds": tf.constant([11, 12, 13, 14])}

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            losses = task.losses(model(features, training=True), features,
                                 task.loss_normalizers(features))
        return losses["loss"], tape.gradient(losses["loss"], model.trainable_variables)

    loss, stored = gradients()
    assert set_rematerialization(model) == 1
    remat_loss, recomputed = tf.function(gradients.python_function)()
    assert float(remat_loss) == pytest.approx(float(loss), rel=1e-6)
    for variable, a, b in zip(model.trainable_variables, stored, recomputed):
        if a is None:
            assert b is None
            continue
        np.testing.assert_allclose(tf.convert_to_tensor(b).numpy(),
                                   tf.convert_to_tensor(a).numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=variable.path)
