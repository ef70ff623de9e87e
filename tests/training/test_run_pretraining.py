"""run_pretraining.py end to end, as users run it: topologies, resume, precision, mistakes."""

import glob
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
from scripts import assert_clean_failure, run_script, run_script_process

# Dropout on: every equality below must hold with it.
TINY = {"vocab_size": 1200, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def _config_file(tmp_path, name="albert_config.json", **changes):
    path = tmp_path / name
    path.write_text(json.dumps({**TINY, **changes}))
    return str(path)


def _args(config, files, output_dir, **flags):
    values = {"albert_config_file": config, "input_file": ",".join(files), "output_dir": output_dir,
              "train_batch_size": 8, "num_train_steps": 30, "num_warmup_steps": 3,
              "learning_rate": 0.005, "save_checkpoints_steps": 10, **flags}
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


def _free_port():
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _two_workers(args_for_worker):
    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    processes = []
    for index in range(2):
        env = dict(os.environ, PYTHONPATH=REPO, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        processes.append(subprocess.Popen([sys.executable, *args_for_worker], cwd=REPO, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
    outputs = [process.communicate(timeout=900) for process in processes]
    for process, (_, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr[-3000:]


# `slow` (four processes, about two minutes): the default suite keeps the in-process replica
# checks (tests/training/test_replica_step.py) and two-worker training (test_preemption.py).
@pytest.mark.slow
def test_every_topology_trains_like_one_device_with_dropout_on(tmp_path, synthetic_records):
    """The one input path under one device, 2 mirrored CPU devices and 2 workers, with XLA.

    Two input shards: each worker reads only its own file, and the batches are
    still those of one device."""
    files, _ = synthetic_records
    assert len(files) == 2
    config = _config_file(tmp_path)
    common = dict(num_train_steps=12, train_batch_size=16, save_checkpoints_steps=6,
                  input_shards=2)
    reference = run_script(*_args(config, files, str(tmp_path / "one"), strategy="one_device",
                                  **common))
    assert reference.returncode == 0, reference.stderr[-3000:]
    runs = {"one_device_xla": dict(strategy="one_device", jit_compile=True),
            "mirrored_xla": dict(strategy="mirrored", cpu_devices=2, jit_compile=True)}
    for name, flags in runs.items():
        result = run_script(*_args(config, files, str(tmp_path / name), **common, **flags))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "MirroredStrategy with 2 replica" in result.stderr or name != "mirrored_xla"
    _two_workers(_args(config, files, str(tmp_path / "workers_xla"), strategy="multi_worker",
                       jit_compile=True, **common))
    expected = _losses(tmp_path / "one")
    assert sorted(expected) == list(range(1, 13))
    for name in [*runs, "workers_xla"]:
        actual = _losses(tmp_path / name)
        assert sorted(actual) == list(range(1, 13)), name
        for step in expected:
            assert actual[step] == pytest.approx(expected[step], rel=1e-5), (name, step)
    # Only the chief writes: one checkpoint set, no per-worker files.
    assert sorted(p.name for p in (tmp_path / "workers_xla").glob("*.index")) == [
        "model.ckpt-12.index", "model.ckpt-6.index"]


# Slow tier (about 92 s on one device, a minute more on two mirrored devices, where each of
# the three runs is a process of its own), to keep the default suite within 15 minutes;
# test_preemption.py resumes a stopped run in the default suite.
@pytest.mark.slow
@pytest.mark.parametrize("devices", [{"strategy": "one_device"},
                                     {"strategy": "mirrored", "cpu_devices": 2}])
def test_killed_run_resumes_and_matches_an_uninterrupted_run(tmp_path, synthetic_records,
                                                             devices):
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    args = dict(num_train_steps=60, **devices)
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
    assert max(_losses(output_dir)) < 60

    resumed = run_script(*_args(config, files, str(output_dir), **args))
    assert resumed.returncode == 0, resumed.stderr
    assert "Resumed from" in resumed.stderr
    expected, actual = _losses(tmp_path / "reference"), _losses(output_dir)
    assert sorted(actual) == list(range(1, 61))  # no duplicated or missing log lines
    for step in range(1, 61):
        assert actual[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-6), step


@pytest.mark.parametrize("flags", [{"mixed_precision": "mixed_bfloat16"},
                                   {"mixed_precision": "mixed_float16", "optimizer": "adamw"},
                                   {"masked_lm_budget": 0.15, "steps_per_loop": 5}])
def test_precision_and_dynamic_masking_runs_complete(tmp_path, synthetic_records, flags):
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
    # The metrics, and possibly what the diagnostics found (a 20-step model's sentence head
    # may well answer one label).
    assert set(results["evaluations"][0]) - {"findings"} == {
        "step", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy",
        "sentence_order_loss", "loss"}
    first = results["evaluations"][0]
    assert first["loss"] == pytest.approx(first["masked_lm_loss"] + first["sentence_order_loss"])
    text = (tmp_path / "run" / "eval_results.txt").read_text()
    assert text.count("global_step = ") == 2 and "masked_lm_accuracy = " in text


# Slow tier (about 26 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
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


def _corrupt_mid_file(tmp_path, files):
    """40 records, one byte of the middle one flipped: training reads it in its first epoch."""
    import tensorflow as tf

    corrupt = tmp_path / "corrupt-data" / "train-00000-of-00001"
    corrupt.parent.mkdir()
    with tf.io.TFRecordWriter(str(corrupt)) as writer:
        for record in tf.data.TFRecordDataset(files[0]).take(40):
            writer.write(record.numpy())
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 2 + 100] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    return str(corrupt)


@pytest.mark.parametrize("problem", ["missing", "garbage", "lengths", "checkpoint", "vocab",
                                     "batch", "shards", "config_key", "corrupt_record"])
def test_a_mistake_ends_with_one_line_and_writes_nothing(tmp_path, synthetic_records, problem):
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    flags, expected = {}, ""
    if problem == "missing":
        files, expected = [str(tmp_path / "nothing-*.tfrecord")], "No input file matches"
    elif problem == "garbage":
        garbage = tmp_path / "garbage.tfrecord"
        garbage.write_bytes(os.urandom(2000))
        files, expected = [str(garbage)], "is corrupt (bad length header)"
    elif problem == "lengths":
        flags = {"max_seq_length": 32}
        expected = "--max_seq_length=32, but the data has max_seq_length=64"
    elif problem == "checkpoint":
        other = tiny_config(vocab_size=1200, hidden_size=48)
        write_checkpoint(model_weights(AlbertPretrainer(other)), other, str(tmp_path / "other"), "tf1")
        flags, expected = {"init_checkpoint": str(tmp_path / "other")}, "does not fit the config"
    elif problem == "vocab":
        config = _config_file(tmp_path, vocab_size=500)
        expected = "holds token ids up to"
    elif problem == "batch":
        flags, expected = {"train_batch_size": 0}, "--train_batch_size must be at least 1"
    elif problem == "shards":
        flags, expected = {"input_shards": 3}, "--input_shards=3 needs at least as many input files"
    elif problem == "config_key":
        config = _config_file(tmp_path, num_hiden_layers=3)
        expected = "unknown config key 'num_hiden_layers' (did you mean 'num_hidden_layers'?)"
    else:
        files = [_corrupt_mid_file(tmp_path, files)]
        expected = "record"
    output_dir = tmp_path / "run"
    result = run_script(*_args(config, files, str(output_dir), num_train_steps=20, **flags))
    assert_clean_failure(result, expected)
    if problem == "corrupt_record":
        # Found while training: the message names the file and the record.
        assert f"{files[0]}: record" in result.stderr and "corrupt" in result.stderr
        assert not (output_dir / "model.ckpt-10.index").exists()
    else:
        assert not output_dir.exists()


# Slow tier: about 30 s, moved to keep the default suite within 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_data_lengths_come_from_the_summary_and_the_output_is_quiet(tmp_path, synthetic_records):
    """In a process of its own: TensorFlow's native start-up noise is only seen there."""
    files, _ = synthetic_records
    # The original's habit: a glob that also matches the summary and documents files
    # written beside the records.
    pattern = os.path.join(os.path.dirname(files[0]), "train.tfrecord*")
    assert any(path.endswith(".summary.json") for path in glob.glob(pattern))
    result = run_script_process(*_args(_config_file(tmp_path), [pattern], str(tmp_path / "run"),
                                       num_train_steps=2, save_checkpoints_steps=2,
                                       do_eval=True, eval_file=pattern, max_eval_steps=1))
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "run" / "eval_results.json").exists()
    assert "max_seq_length=64, max_predictions_per_seq=10" in result.stderr
    # TensorFlow's GPU probe and checkpoint-sharding lines are not the run's output.
    assert "cuInit" not in result.stderr and "Sharding callback" not in result.stderr
    assert "Traceback" not in result.stderr


def test_help_keeps_the_examples_line_continuations():
    for script in ("run_pretraining.py", "create_pretraining_data.py", "convert_checkpoint.py"):
        result = run_script(script, "--helpshort")   # absl prints usage and exits
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 0, script   # absl's own status is 1: help is no failure
        assert " \\\n" in result.stdout, script
