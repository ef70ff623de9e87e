"""Table 4's pre-registered criteria (albert.paper.preregistrations.TABLE4) and `python -m
albert.paper criteria --table=4`, on stand-in per-document counts written as the runs'
result.json files."""

import json
import os
import zlib

import numpy as np
import pytest

from albert.paper.criteria import run_directory
from albert.paper.reproduce import MASKED_LM_DOCUMENTS
from albert.paper.difference_criteria import judge, read_runs
from albert.paper.difference_verdicts import NO_ORDER, PAPERS_ORDER, REVERSE
from albert.paper.preregistrations import ALL, ATTENTION, FFN, NONE, TABLE4
from albert.paper.preregistrations import table4_label as label
from albert.paper.tables import TABLES

DOCUMENTS, TOKENS = 300, 200
# Each document's own difficulty, the same for every model (so that paired draws matter).
DIFFICULTY = np.random.default_rng(0).uniform(-0.08, 0.08, DOCUMENTS)
# The paper's pattern in MLM accuracy: sharing costs at E=768 (not-shared above all-shared),
# hardly at E=128, and sharing the FFN costs more than sharing attention.
PAPER = {label("768", ALL): 0.20, label("768", ATTENTION): 0.24, label("768", FFN): 0.22,
         label("768", NONE): 0.25, label("128", ALL): 0.15, label("128", FFN): 0.15,
         label("128", NONE): 0.155}
SEED_SHIFT = {1: 0.002, 2: 0.0, 3: -0.002}


def write_result(output_dir, cell, run, seed, accuracy, steps=6000, **fields):
    """A finished run's result.json (runs/<run>[-seed<k>]/) with masked tokens and correct
    predictions per held-out document at `accuracy` (equal accuracies and seeds give equal
    counts), and any other `fields`; returns the run's directory."""
    directory = run_directory(str(output_dir), run, seed)
    rng = np.random.default_rng(zlib.crc32(f"{seed} {accuracy:.6f}".encode()))
    tokens = np.full(DOCUMENTS, TOKENS)
    correct = rng.binomial(tokens, np.clip(accuracy + DIFFICULTY, 0, 1))
    result = {"cell": cell, "run_name": run, "random_seed": seed,
              "intrinsic": {"MLM acc": float(correct.sum() / tokens.sum()),
                            MASKED_LM_DOCUMENTS: {"documents": list(range(DOCUMENTS)),
                                                  "tokens": tokens.tolist(),
                                                  "correct": correct.tolist()}},
              "commands": [f"python run_pretraining.py --num_train_steps={steps} --do_train"],
              **fields}
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "result.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return directory


def _write_run(output_dir, cell, seed, accuracy, steps=6000):
    run = {found.label: found for found in TABLES[4].cells}[cell].run_name
    write_result(output_dir, cell, run, seed, accuracy, steps)


def _write_runs(output_dir, accuracies, seeds=(1, 2, 3)):
    """Every pre-registered run (E=768 cells: `seeds`, E=128 cells: seed 1), at
    accuracies[cell] (a number, or {seed: number}) plus the seed's shift."""
    for cell, accuracy in accuracies.items():
        for seed in (seeds if cell.startswith("E=768") else (1,)):
            value = accuracy[seed] if isinstance(accuracy, dict) else accuracy + SEED_SHIFT[seed]
            _write_run(output_dir, cell, seed, value)


def _judged(output_dir, accuracies, **kwargs):
    _write_runs(output_dir, accuracies, **kwargs)
    return judge(TABLE4, read_runs(TABLE4, str(output_dir)), resamples=1000)


def _failing(result):
    return sorted(key for key, entry in result["criteria"].items() if not entry["passes"])


def test_table4_criteria_pass_on_the_papers_pattern(tmp_path):
    result = _judged(tmp_path, PAPER)
    assert result["complete"] and result["missing_runs"] == []
    assert ({key: entry["passes"] for key, entry in result["criteria"].items()}
            == dict.fromkeys("abcd", True))
    a, b, c = (result["criteria"][key] for key in "abc")
    assert c["outcome"] == PAPERS_ORDER
    # Each number is the difference of the cells' seed means; each seed's own difference
    # pairs the runs of one seed number (the E=128 cells' one seed stands for every seed).
    cells = result["cells"]
    assert a["value"] == pytest.approx(cells[label("768", NONE)]["accuracy"]
                                       - cells[label("768", ALL)]["accuracy"])
    assert sorted(a["seed_differences"]) == ["1", "2", "3"]
    small_gap = (cells[label("128", NONE)]["seed_accuracies"]["1"]
                 - cells[label("128", ALL)]["seed_accuracies"]["1"])
    assert b["seed_differences"]["2"] == pytest.approx(a["seed_differences"]["2"] - small_gap)
    assert a["ci95"][0] < a["one_sided_lower95"] < a["value"] < a["ci95"][1]
    assert len(b["runs"]) == 8 and len(result["criteria"]["d"]["runs"]) == 14
    # Beside the criteria: the other differences (the E=128 cells' among them), not judged.
    names = [entry["difference"] for entry in result["differences"]]
    assert "E=128: shared-FFN − all-shared" in names and "not-shared: E=768 − E=128" in names
    assert len(names) == 3 + 4 + 3 + 3  # (a)-(c), other E=768 pairs, E=128 pairs, across E


@pytest.mark.parametrize("departure, accuracies, failing, order", [
    ("all-shared above not-shared at E=768", {label("768", ALL): 0.25, label("768", NONE): 0.24},
     ["a", "b"], PAPERS_ORDER),
    ("sharing costs as much at E=128", {label("128", NONE): 0.21}, ["b"], PAPERS_ORDER),
    ("the first run's sub-block order", {label("768", ATTENTION): 0.22, label("768", FFN): 0.24},
     ["c"], REVERSE),
    ("the sub-blocks level", {label("768", ATTENTION): 0.23, label("768", FFN): 0.23},
     ["c", "d"], NO_ORDER),
    ("one not-shared seed below all-shared",
     {label("768", NONE): {1: 0.26, 2: 0.26, 3: 0.195}}, ["d"], PAPERS_ORDER),
])
def test_table4_criteria_fail_exactly_the_criterion_a_departure_breaks(
        tmp_path, departure, accuracies, failing, order):
    result = _judged(tmp_path, {**PAPER, **accuracies})
    assert _failing(result) == failing, departure
    assert result["criteria"]["c"]["outcome"] == order
    if "d" in failing:
        agree = result["criteria"]["d"]["agree"]
        assert [key for key, value in agree.items() if not value] == (
            ["c"] if order == NO_ORDER else ["a", "b"])


def test_table4_criteria_on_partial_runs_are_not_yet_judged_never_passed_or_failed(tmp_path):
    # Every cell's seed 1 only (the runs' first sitting): nothing judged, all provisional.
    result = _judged(tmp_path, PAPER, seeds=(1,))
    assert not result["complete"] and len(result["missing_runs"]) == 8
    for key, entry in result["criteria"].items():
        assert entry["status"] == "not yet judged" and entry["passes"] is None, key
        assert "provisional" in entry
    assert "E=768, strategy=all-shared, seed 2" in result["criteria"]["a"]["missing"]
    assert result["cells"][label("768", ALL)]["missing_seeds"] == [2, 3]
    # The differences of E=128 cells alone have all their runs.
    assert {entry["difference"]: entry["provisional"] for entry in result["differences"]} == {
        entry["difference"]: "768" in entry["difference"] for entry in result["differences"]}
    # Every run but E=128 not-shared: (a) and (c) judged, (b) and (d) wait for it.
    _write_runs(tmp_path, PAPER)
    not_shared = {cell.label: cell for cell in TABLES[4].cells}[label("128", NONE)]
    (tmp_path / "runs" / not_shared.run_name / "result.json").unlink()
    result = judge(TABLE4, read_runs(TABLE4, str(tmp_path)), resamples=1000)
    assert result["missing_runs"] == ["E=128, strategy=not-shared, seed 1"]
    status = {key: entry["passes"] for key, entry in result["criteria"].items()}
    assert status == {"a": True, "b": None, "c": True, "d": None}
    assert result["criteria"]["b"]["missing"] == ["E=128, strategy=not-shared, seed 1"]
    assert "provisional" not in result["criteria"]["b"]  # a cell with no run: no number
    assert result["criteria"]["d"]["provisional"]["agree"] == {"a": True, "c": True}


def test_table4_criteria_command_writes_json_markdown_plot_and_replaces_only_partial_ones(
        tmp_path, capsys):
    from albert.paper.__main__ import main

    runs, judged = tmp_path / "runs-dir", tmp_path / "judged"
    judged.mkdir()
    _write_runs(runs, PAPER, seeds=(1, 2))
    arguments = ["criteria", "--table=4", f"--output_dir={runs}", "--resamples=500",
                 f"--output={judged / 'criteria.json'}", f"--plot={judged / 'differences.png'}"]
    assert main(arguments) == 0
    partial = json.loads((judged / "criteria.json").read_text())
    assert not partial["complete"] and partial["seeds"] == {"E=768": 3, "E=128": 1}
    markdown = (judged / "criteria.md").read_text()
    assert ("| (a) | sharing everything costs MLM accuracy at E=768 | not yet judged: missing "
            "runs E=768, strategy=all-shared, seed 3; E=768, strategy=not-shared, seed 3 |"
            in markdown)
    assert "provisional, not a verdict" in markdown and "**Partial**" in markdown
    assert (judged / "differences.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The third seeds arrive: the partial judgement's files are replaced by the complete one.
    _write_runs(runs, PAPER)
    assert main(arguments) == 0
    complete = json.loads((judged / "criteria.json").read_text())
    assert complete["complete"] and complete["criteria"]["a"]["passes"] is True
    assert "| (c) | the paper's sub-block order" in (judged / "criteria.md").read_text()
    assert "passes: the paper's order" in capsys.readouterr().out
    # ... which is never overwritten; nor is a file the command did not write.
    assert main(arguments) == 1
    assert "holds a complete judgement" in capsys.readouterr().err
    (judged / "other.md").write_text("notes")
    assert main([*arguments[:-2], f"--output={judged / 'other.json'}"]) == 1
    assert "other.md exists" in capsys.readouterr().err
    # Runs of another length, and Table 5's flags, are refused with one error line.
    _write_run(runs, label("768", ALL), 1, 0.2, steps=12000)
    assert main([*arguments[:-2], f"--output={judged / 'again.json'}"]) == 1
    assert "trained to step 12000, not --final_step=6000" in capsys.readouterr().err
    assert main([*arguments[:-2], "--early_step=3000", f"--output={judged / 'again.json'}"]) == 1
    assert "Table 5's" in capsys.readouterr().err
