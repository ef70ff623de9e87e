"""run_pretraining.py end to end: resume, several workers, precision, bad input."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from albert.checkpoints import model_weights, write_checkpoint
from albert.modeling import AlbertPretrainer
from conftest import REPO, tiny_config
from scripts import assert_clean_failure, run_script

TINY = {"vocab_size": 1200, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def _config_file(tmp_path, **changes):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**TINY, **changes}))
    return str(path)


def _args(config, files, output_dir, **flags):
    values = {"albert_config_file": config, "input_file": ",".join(files), "output_dir": output_dir,
              "max_seq_length": 64, "max_predictions_per_seq": 10, "train_batch_size": 8,
              "num_train_steps": 30, "num_warmup_steps": 3, "learning_rate": 0.005,
              "save_checkpoints_steps": 10, **flags}
    args = []
    for key, value in values.items():
        if value is True:
            args.append(f"--{key}")
        elif value is False:
            args.append(f"--no{key}")
        else:
            args.append(f"--{key}={value}")
    return ["run_pretraining.py", *args, "--noprogress"]


def _log(output_dir):
    with open(os.path.join(output_dir, "train_log.jsonl")) as handle:
        return [json.loads(line) for line in handle]


def _losses(output_dir):
    return {row["step"]: row["loss"] for row in _log(output_dir)}


def test_killed_run_resumes_and_matches_an_uninterrupted_run(tmp_path, synthetic_records):
    files, _ = synthetic_records
    config = _config_file(tmp_path)  # dropout on: the random state must survive the resume
    args = dict(num_train_steps=60)
    reference = run_script(*_args(config, files, str(tmp_path / "reference"), **args))
    assert reference.returncode == 0, reference.stderr

    output_dir = tmp_path / "killed"
    command = [sys.executable, *_args(config, files, str(output_dir), **args)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
    deadline = time.time() + 300
    while time.time() < deadline:
        state = output_dir / "checkpoint"
        if state.exists() and "model.ckpt-20" in state.read_text():
            break
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    killed_at = max(_losses(output_dir))
    assert killed_at < 60

    resumed = run_script(*_args(config, files, str(output_dir), **args))
    assert resumed.returncode == 0, resumed.stderr
    assert "Resumed from" in resumed.stderr
    expected, actual = _losses(tmp_path / "reference"), _losses(output_dir)
    assert sorted(actual) == list(range(1, 61))  # no duplicated or missing log lines
    for step in range(1, 61):
        assert actual[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-6), step


def _free_port():
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def test_two_workers_train_like_one_process(tmp_path, synthetic_records):
    files, _ = synthetic_records
    config = _config_file(tmp_path, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    args = dict(num_train_steps=12, train_batch_size=16, save_checkpoints_steps=6)
    single = run_script(*_args(config, files, str(tmp_path / "single"), strategy="one_device", **args))
    assert single.returncode == 0, single.stderr

    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    processes = []
    for index in range(2):
        env = dict(os.environ, PYTHONPATH=REPO, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        command = [sys.executable, *_args(config, files, str(tmp_path / "workers"),
                                          strategy="multi_worker", **args)]
        processes.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (_, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr[-3000:]
    expected, actual = _losses(tmp_path / "single"), _losses(tmp_path / "workers")
    assert sorted(actual) == list(range(1, 13))
    for step in expected:
        assert actual[step] == pytest.approx(expected[step], rel=1e-4), step
    assert sorted(p.name for p in (tmp_path / "workers").glob("input_state-12-worker*.index")) == [
        "input_state-12-worker0.index", "input_state-12-worker1.index"]


@pytest.mark.parametrize("flags", [{"mixed_precision": "mixed_bfloat16"}, {"jit_compile": True},
                                   {"mixed_precision": "mixed_float16", "optimizer": "adamw"},
                                   {"masked_lm_budget": 0.15, "steps_per_loop": 5}])
def test_precision_xla_dynamic_masking_runs_complete(tmp_path, synthetic_records, flags):
    files, _ = synthetic_records
    result = run_script(*_args(_config_file(tmp_path), files, str(tmp_path / "run"),
                               num_train_steps=10, **flags))
    assert result.returncode == 0, result.stderr[-3000:]
    losses = _losses(tmp_path / "run")
    assert sorted(losses) == list(range(1, 11)) and all(np.isfinite(list(losses.values())))
    assert (tmp_path / "run" / "model.ckpt-10.index").exists()


def test_evaluation_only_evaluates_each_checkpoint_once(tmp_path, synthetic_records):
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    output_dir = str(tmp_path / "run")
    assert run_script(*_args(config, files, output_dir, num_train_steps=20)).returncode == 0
    for _ in range(2):
        result = run_script(*_args(config, files, output_dir, num_train_steps=20, do_train=False,
                                   do_eval=True, eval_file=files[0], max_eval_steps=3))
        assert result.returncode == 0, result.stderr[-2000:]
    with open(os.path.join(output_dir, "eval_results.json")) as handle:
        results = json.load(handle)
    assert [e["step"] for e in results["evaluations"]] == [10, 20]
    assert results["best"]["step"] in (10, 20)
    assert (tmp_path / "run" / "model.ckpt-best.index").exists()
    assert set(results["evaluations"][0]) == {"step", "masked_lm_accuracy", "masked_lm_loss",
                                              "sentence_order_accuracy", "sentence_order_loss"}


def test_divergence_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, synthetic_records):
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    output_dir = str(tmp_path / "run")
    assert run_script(*_args(config, files, output_dir, num_train_steps=10)).returncode == 0
    before = (tmp_path / "run" / "model.ckpt-10.index").read_bytes()
    # Resume with an absurd learning rate: the weights blow up within a few steps.
    result = run_script(*_args(config, files, output_dir, num_train_steps=30, optimizer="adamw",
                               learning_rate=1e30, num_warmup_steps=0))
    assert_clean_failure(result, "The loss became", "The last checkpoint (10) is kept")
    assert (tmp_path / "run" / "model.ckpt-10.index").read_bytes() == before
    assert not (tmp_path / "run" / "model.ckpt-20.index").exists()


@pytest.mark.parametrize("problem", ["missing", "corrupt", "lengths", "checkpoint"])
def test_bad_input_fails_cleanly_and_writes_nothing(tmp_path, synthetic_records, problem):
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    flags, expected = {}, ""
    if problem == "missing":
        files, expected = [str(tmp_path / "nothing-*.tfrecord")], "No input file matches"
    elif problem == "corrupt":
        corrupt = tmp_path / "corrupt.tfrecord"
        corrupt.write_bytes(os.urandom(2000))
        files, expected = [str(corrupt)], "not a readable TFRecord file"
    elif problem == "lengths":
        flags, expected = {"max_seq_length": 32}, "input_ids has 64 values but --max_seq_length gives 32"
    else:
        other = tiny_config(vocab_size=1200, hidden_size=48)
        write_checkpoint(model_weights(AlbertPretrainer(other)), other, str(tmp_path / "other"), "tf1")
        flags, expected = {"init_checkpoint": str(tmp_path / "other")}, "does not fit the config"
    output_dir = tmp_path / "run"
    result = run_script(*_args(config, files, str(output_dir), **flags))
    assert_clean_failure(result, expected)
    assert not output_dir.exists()
