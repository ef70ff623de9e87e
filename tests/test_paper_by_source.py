"""`python -m albert.paper by-source`: held-out margins split by document source."""

import json

import pytest

from albert.errors import InputError
from albert.paper.__main__ import main
from albert.paper.by_source import heldout_source_ranges, margins_by_source

MANIFEST = {"heldout_sources": {"lee_background": 3, "python_doc": 4}}


def _result(correct):
    """A result.json's intrinsic section: 7 documents of 10 pairs, 5 labelled 1 each."""
    documents = list(range(7))
    counts = {"documents": documents, "pairs": [10] * 7, "correct": correct,
              "label_one": [5] * 7}
    return {"run_name": "sop", "intrinsic": {"documents": {"NSP acc": counts}}}


def test_sources_follow_the_held_out_file_order():
    assert heldout_source_ranges(MANIFEST) == [("lee_background", 0, 3), ("python_doc", 3, 7)]
    with pytest.raises(InputError, match="heldout_sources"):
        heldout_source_ranges({"heldout_documents": 300})


def test_each_source_gets_its_own_margin_and_interval():
    # News documents always right, Python nodes at chance: the whole set's margin hides both.
    breakdown = margins_by_source([_result([10, 10, 10, 5, 5, 5, 5])], MANIFEST, resamples=500)
    news, python = breakdown["NSP acc"]["lee_background"], breakdown["NSP acc"]["python_doc"]
    assert (news["documents"], news["pairs"], python["documents"], python["pairs"]) == \
        (3, 30, 4, 40)
    assert news["margin"] == pytest.approx(0.5) and news["margin_ci95"] == [0.5, 0.5]
    assert python["margin"] == pytest.approx(0.0)
    assert python["margin_ci95"][0] <= 0.0 <= python["margin_ci95"][1]


def test_seeds_of_one_cell_are_pooled():
    first, second = _result([10, 10, 10, 5, 5, 5, 5]), _result([6, 6, 6, 5, 5, 5, 5])
    pooled = margins_by_source([first, second], MANIFEST, resamples=500)
    assert pooled["NSP acc"]["lee_background"]["margin"] == pytest.approx((0.5 + 0.1) / 2)
    assert pooled["NSP acc"]["lee_background"]["seeds"] == 2


def test_results_from_another_corpus_are_refused():
    result = _result([5] * 7)
    result["intrinsic"]["documents"]["NSP acc"]["documents"] = list(range(3, 10))
    with pytest.raises(InputError, match="beyond the manifest"):
        margins_by_source([result], MANIFEST, resamples=10)


def test_the_command_writes_once_and_refuses_to_overwrite(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    (tmp_path / "result.json").write_text(json.dumps(_result([10, 10, 10, 5, 5, 5, 5])))
    arguments = ["by-source", f"--corpus_manifest={tmp_path / 'manifest.json'}",
                 f"--results={tmp_path / 'result.json'}", f"--output={tmp_path / 'out.json'}",
                 "--resamples=200"]
    assert main(arguments) == 0
    written = json.loads((tmp_path / "out.json").read_text())
    assert written["post_hoc"] is True
    assert set(written["margins_by_source"]["NSP acc"]) == {"lee_background", "python_doc"}
    assert "| NSP acc | lee_background | 3 | 30 | 100.0 | 50.0 | +50.0" in capsys.readouterr().out
    before = (tmp_path / "out.json").read_text()
    assert main(arguments) == 1
    assert capsys.readouterr().err.startswith("ERROR: --output=")
    assert (tmp_path / "out.json").read_text() == before
