"""Table 11's pre-registered criteria (albert.paper.preregistrations.TABLE11) and `python -m
albert.paper criteria --table=11`, on stand-in per-document counts written as the runs'
result.json files."""

import json
import os

import pytest

from albert.paper.__main__ import main
from albert.paper.difference_criteria import judge, read_runs
from albert.paper.preregistrations import DEPTHS, TABLE11
from test_paper_table4_criteria import SEED_SHIFT, write_result

# The paper's shape: steep gains first, then levelling off.
PAPERS_SHAPE = {1: 0.12, 2: 0.17, 4: 0.20, 8: 0.215, 12: 0.218}
PARAMETERS = 1_250_176
RUN_NAMES = {cell.label: cell.run_name for cell in TABLE11.cells}


def label(depth):
    return f"layers={depth}"


def run_name(depth):
    """The run directory the design reads for a depth."""
    return RUN_NAMES[label(depth)]


def _write_runs(output_dir, accuracies, seeds=(1, 2, 3), parameters=None):
    for depth, accuracy in accuracies.items():
        for seed in seeds:
            write_result(output_dir, label(depth), run_name(depth), seed,
                         accuracy + SEED_SHIFT[seed],
                         parameters=(parameters or {}).get(depth, PARAMETERS))


def _verdicts(result):
    return {key: entry["passes"] for key, entry in result["criteria"].items()}


def test_the_papers_shape_passes_every_criterion(tmp_path):
    _write_runs(tmp_path, PAPERS_SHAPE)
    result = judge(TABLE11, read_runs(TABLE11, str(tmp_path)), resamples=1000)
    assert result["complete"] and _verdicts(result) == {key: True for key in "abcde"}
    assert [entry["difference"] for entry in result["criteria"]["a"]["differences"]] == [
        "A2 − A1", "A4 − A2", "A8 − A4"]


def test_no_gain_past_four_layers_and_a_growing_model_fail(tmp_path):
    flat = {**PAPERS_SHAPE, 8: 0.20, 12: 0.20}
    _write_runs(tmp_path, flat, parameters={12: PARAMETERS + 1})
    verdicts = _verdicts(judge(TABLE11, read_runs(TABLE11, str(tmp_path)), resamples=1000))
    assert verdicts["a"] is False and verdicts["c"] is False and verdicts["d"] is False
    assert verdicts["b"] is True


def test_a_missing_depth_leaves_its_criteria_unjudged(tmp_path, capsys):
    _write_runs(tmp_path, {depth: PAPERS_SHAPE[depth] for depth in DEPTHS if depth != 12})
    output = tmp_path / "criteria.json"
    assert main(["criteria", "--table=11", f"--output_dir={tmp_path}", f"--output={output}",
                 "--resamples=200"]) == 0
    result = json.loads(output.read_text())
    assert not result["complete"] and result["criteria"]["a"]["passes"] is True
    assert result["criteria"]["c"]["passes"] is None and result["criteria"]["e"]["passes"] is None
    assert "not yet judged" in capsys.readouterr().out


@pytest.mark.parametrize("depth, directory", [(1, "base-L3-H768-E768-all-shared-SOP-dropout0.1"),
                                              (4, "base-L12-H768-E768-all-shared-SOP-dropout0.1"),
                                              (12, "base-L36-H768-E768-all-shared-SOP-dropout0.1")])
def test_each_depth_reads_the_runs_reproduce_writes(depth, directory):
    assert run_name(depth) == directory  # 4 layers: Table 4's own runs


def test_figure1_from_layer_1_adds_its_criteria_and_leaves_the_4_layer_judgement_as_committed(
        tmp_path, capsys):
    import shutil

    from conftest import REPO

    committed = os.path.join(REPO, "docs", "paper", "cpu-large-figure1")
    for name in os.listdir(committed):
        if name.startswith("base-") and name.endswith(".json"):
            shutil.copy(os.path.join(committed, name), tmp_path / name)
    as_written = tmp_path / "criteria.json"
    assert main(["criteria", "--table=1", f"--figure_dir={tmp_path}",
                 f"--output={as_written}"]) == 0
    with open(os.path.join(committed, "criteria.json"), "rb") as handle:
        assert as_written.read_bytes() == handle.read()  # the 4-layer verdict, byte for byte
    as_written.unlink()
    (tmp_path / "criteria.md").unlink()
    assert main(["criteria", "--table=1", f"--figure_dir={tmp_path}", f"--output={as_written}",
                 "--from_layer=1"]) == 0
    result = json.loads(as_written.read_text())
    assert result["from_layer"] == 1 and set(result["criteria"]) == {"a", "b", "c"}
    seed1 = result["criteria"]["a"]["seeds"]["1"]["l2_distance"]
    values = result["runs"]["all-shared, seed 1"]["l2_distance"]
    assert seed1["all-shared"] == pytest.approx(sum(abs(b - a) for a, b in
                                                    zip(values[1:], values[2:])))
    assert "l ≥ 2" in capsys.readouterr().out
    assert main(["criteria", "--table=11", "--output_dir=x", "--output=y.json",
                 "--from_layer=1"]) == 1
