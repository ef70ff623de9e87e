"""Two loopback workers: a lost worker, and workers that do not share --output_dir."""

import json
import signal
import time

import pytest

from scripts import run_script
from test_preemption import (COMMON, _assert_resumes_like_the_reference, _start,
                             _wait_for_steps, run_reference)
from test_run_pretraining import _args, _free_port


@pytest.fixture(scope="module")
def reference(tmp_path_factory, synthetic_records):
    return run_reference(tmp_path_factory, synthetic_records)


# How long a survivor may take to notice a lost peer and end (measured: 1.3 s on loopback).
LOST_WORKER_BOUND_SECONDS = 60


def _launch(args_per_worker):
    cluster = {"worker": [f"localhost:{_free_port()}" for _ in args_per_worker]}
    return [_start(args, {"TF_CONFIG": json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}})})
        for index, args in enumerate(args_per_worker)]


def _error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("ERROR:")]


# slow: four worker processes; the default suite keeps two-worker training and SIGTERM
@pytest.mark.slow
def test_a_lost_worker_ends_the_survivor_and_the_relaunch_resumes(tmp_path, reference):
    config, files, expected = reference
    output_dir = tmp_path / "workers"
    # A checkpoint every 10 steps, so the relaunch resumes from one.
    args = _args(config, files, str(output_dir), strategy="multi_worker",
                 **dict(COMMON, save_checkpoints_steps=10))
    chief, worker = _launch([args, args])
    _wait_for_steps(output_dir, [chief, worker], steps=12)
    worker.send_signal(signal.SIGKILL)
    killed_at = time.time()
    _, stderr = chief.communicate(timeout=LOST_WORKER_BOUND_SECONDS + 60)
    ended_after = time.time() - killed_at
    print(f"the survivor ended {ended_after:.1f} s after its peer was killed")
    assert chief.returncode not in (0, None)
    assert len(_error_lines(stderr)) == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert ended_after < LOST_WORKER_BOUND_SECONDS
    worker.wait()

    def relaunch(_):
        for process in _launch([args, args]):
            _, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr[-3000:]

    _assert_resumes_like_the_reference(args, output_dir, expected, relaunch)


# Slow tier: about 30 s, moved to keep the default suite within 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_workers_that_do_not_share_the_output_dir_are_refused(tmp_path, reference):
    config, files, _ = reference
    shared = tmp_path / "chief"
    # The chief's directory holds a checkpoint; the other worker's is empty.
    first = run_script(*_args(config, files, str(shared), **dict(COMMON, num_train_steps=5)))
    assert first.returncode == 0, first.stderr[-3000:]
    before = sorted(p.name for p in shared.iterdir())
    processes = _launch([
        _args(config, files, str(shared), strategy="multi_worker", **COMMON),
        _args(config, files, str(tmp_path / "elsewhere"), strategy="multi_worker", **COMMON)])
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 1, stderr[-3000:]
        errors = _error_lines(stderr)
        assert len(errors) == 1 and "same output directory" in errors[0], stderr[-3000:]
    assert sorted(p.name for p in shared.iterdir()) == before
    assert not (tmp_path / "elsewhere").exists() or not any((tmp_path / "elsewhere").iterdir())
