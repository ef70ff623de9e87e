"""SIGTERM (preemption) saves a checkpoint at the step reached; the same command resumes exactly."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from scripts import run_script
from test_run_pretraining import _args, _config_file, _free_port, _losses

STEPS = 40
# Checkpoints only at the end: what a preempted run keeps is the preemption's own checkpoint.
COMMON = dict(num_train_steps=STEPS, save_checkpoints_steps=1000)


def _logged_steps(output_dir):
    path = output_dir / "train_log.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _start(args, env=None):
    return subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=REPO, **(env or {})))


def _wait_for_steps(output_dir, processes, steps=5, timeout=300):
    deadline = time.time() + timeout
    while _logged_steps(output_dir) < steps:
        assert time.time() < deadline, "the run did not start training"
        ended = [p for p in processes if p.poll() is not None]
        assert not ended, f"the run ended before the signal: {ended[0].stderr.read()[-3000:]}"
        time.sleep(0.05)


def _assert_preempted(process, output_dir):
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("Preempted:")]
    assert len(lines) == 1, stderr[-3000:]
    step = int(lines[0].split("SIGTERM at step ")[1].split(":")[0])
    assert 0 < step < STEPS
    assert (output_dir / f"model.ckpt-{step}.index").exists()
    assert f"model.ckpt-{step}" in lines[0]
    return step


def run_reference(tmp_path_factory, synthetic_records):
    """An uninterrupted one-device run of these settings: (config file, record files,
    {step: loss})."""
    files, _ = synthetic_records
    root = tmp_path_factory.mktemp("reference_run")
    config = _config_file(root)
    result = run_script(*_args(config, files, str(root / "reference"), **COMMON))
    assert result.returncode == 0, result.stderr[-3000:]
    return config, files, _losses(root / "reference")


@pytest.fixture(scope="module")
def reference(tmp_path_factory, synthetic_records):
    return run_reference(tmp_path_factory, synthetic_records)


def _assert_resumes_like_the_reference(args, output_dir, expected, launch=run_script):
    launch(args)
    actual = _losses(output_dir)
    assert sorted(actual) == list(range(1, STEPS + 1))
    for s in range(1, STEPS + 1):
        assert actual[s] == pytest.approx(expected[s], rel=1e-5, abs=1e-6), s


# The mirrored topology is `slow`: the default suite keeps one device and two workers.
@pytest.mark.parametrize("topology", [{}, pytest.param({"strategy": "mirrored", "cpu_devices": 2},
                                                       marks=pytest.mark.slow)])
def test_sigterm_saves_the_step_reached_and_the_same_command_resumes(tmp_path, reference,
                                                                    topology):
    config, files, expected = reference
    output_dir = tmp_path / "run"
    args = _args(config, files, str(output_dir), **COMMON, **topology)
    process = _start(args)
    _wait_for_steps(output_dir, [process])
    process.send_signal(signal.SIGTERM)
    _assert_preempted(process, output_dir)

    def resume(arguments):
        result = run_script(*arguments)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Resumed from" in result.stderr

    _assert_resumes_like_the_reference(args, output_dir, expected, resume)


@pytest.mark.slow  # ~45-65 s on 2 cores: kept out of the 15-minute default suite
def test_sigterm_to_one_worker_stops_both_at_the_same_step(tmp_path, reference):
    config, files, expected = reference
    output_dir = tmp_path / "workers"
    args = _args(config, files, str(output_dir), strategy="multi_worker", **COMMON)

    def launch_workers():
        cluster = {"worker": [f"localhost:{_free_port()}", f"localhost:{_free_port()}"]}
        return [_start(args, {"TF_CONFIG": json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})})
            for index in range(2)]

    workers = launch_workers()
    _wait_for_steps(output_dir, workers)
    workers[1].send_signal(signal.SIGTERM)   # the non-chief only
    outcomes = [worker.wait(timeout=120) for worker in workers]
    assert outcomes == [143, 143], (outcomes, _logged_steps(output_dir))
    steps = {_assert_preempted(worker, output_dir) for worker in workers}
    assert len(steps) == 1

    def resume(_):
        relaunched = launch_workers()
        for worker in relaunched:
            _, stderr = worker.communicate(timeout=300)
            assert worker.returncode == 0, stderr[-3000:]

    _assert_resumes_like_the_reference(args, output_dir, expected, resume)
