"""The README's Python snippets run as written (a user pastes them first)."""

import os
import re

from conftest import REPO


def _python_blocks(path):
    with open(path, encoding="utf-8") as handle:
        return re.findall(r"```python\n(.*?)```", handle.read(), flags=re.DOTALL)


def test_the_readmes_python_snippets_run_from_the_repository_root(monkeypatch):
    blocks = _python_blocks(os.path.join(REPO, "README.md"))
    assert blocks, "the README has no Python snippet"
    monkeypatch.chdir(REPO)
    for block in blocks:
        namespace = {}
        exec(compile(block, "README.md", "exec"), namespace)   # noqa: S102 - our own README
    # The last snippet builds base from its config and runs it on one 4-piece sequence.
    outputs = namespace["outputs"]
    assert tuple(outputs["sequence_output"].shape) == (1, 4, 768)
    assert tuple(outputs["pooled_output"].shape) == (1, 768)
    assert len(outputs["encoder_outputs"]) == 12
