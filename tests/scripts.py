"""Runs the repository's scripts in a subprocess, as a user would."""

import os
import subprocess
import sys

from conftest import REPO


def run_script(*args, env=None, timeout=600):
    """Runs `python <args>` from the repository root; returns the CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, full_env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, *args], cwd=REPO, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def assert_clean_failure(result, *fragments):
    """A user mistake: non-zero exit, one ERROR line naming the problem, no traceback."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "ERROR:" in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
