"""The device step under every strategy: float16 loss scaling that all replicas agree on."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO
from overflow_step import INITIAL_SCALE, run_overflow_step
from test_run_pretraining import _free_port

HERE = os.path.dirname(__file__)


def _assert_skipped_everywhere(result):
    """The overflowing step was skipped on every replica: weights as before, scale halved."""
    for variable, before in zip(result["weights"], result["before"]):
        for replica_value in variable:
            np.testing.assert_array_equal(np.array(replica_value), np.array(before))
    assert result["loss_scale"] == INITIAL_SCALE / 2
    assert result["iterations"] == 1  # a skipped step still counts


def test_an_overflow_on_one_mirrored_replica_skips_the_step_on_both():
    cpus = [device.name for device in tf.config.list_logical_devices("CPU")]
    assert len(cpus) >= 2, "conftest splits the CPU into two logical devices"
    result = run_overflow_step(tf.distribute.MirroredStrategy(cpus[:2]))
    _assert_skipped_everywhere(result)


# Slow tier (about 26 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_an_overflow_on_one_worker_skips_the_step_on_both_without_a_hang(tmp_path):
    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    processes, outputs = [], []
    for index in range(2):
        output = tmp_path / f"worker-{index}.json"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, HERE]), TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        processes.append(subprocess.Popen([sys.executable, os.path.join(HERE, "overflow_step.py"),
                                           str(output)], cwd=REPO, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True))
        outputs.append(output)
    try:
        errors = [process.communicate(timeout=180)[1] for process in processes]
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
        pytest.fail("the workers hung on a step that overflowed on one of them")
    for process, stderr in zip(processes, errors):
        assert process.returncode == 0, stderr[-3000:]
    results = [json.loads(output.read_text()) for output in outputs]
    for result in results:
        _assert_skipped_everywhere(result)
    assert results[0]["weights"] == results[1]["weights"]
