"""The pre-registered criteria of Table 3 (albert.paper.preregistrations.TABLE3) and of the
dropout runs (TABLE8), and `python -m albert.paper criteria --table=3|8`, on
stand-in per-document counts and evaluation journals written as the runs' files."""

import dataclasses
import json
import os

import pytest

from albert.paper.difference_criteria import judge, read_runs
from albert.paper.preregistrations import ALL, DROPOUT_MODEL, NONE, TABLE3, TABLE8
from albert.paper.preregistrations import WITH_DROPOUT as WITH
from albert.paper.preregistrations import WITHOUT_DROPOUT as WITHOUT
from albert.paper.tables import TABLES
from test_paper_table4_criteria import SEED_SHIFT, write_result

RESAMPLES = 1000


def label(strategy, embedding):
    return f"sharing={strategy}, E={embedding}"


E = ("64", "128", "256", "768")
# The paper's pattern in MLM accuracy: not-shared gains with E, all-shared peaks at E=128 and
# changes less with E than not-shared.
PAPER = {**{label(NONE, e): value for e, value in zip(E, (0.15, 0.16, 0.17, 0.20))},
         **{label(ALL, e): value for e, value in zip(E, (0.13, 0.15, 0.14, 0.14))}}
TRAINED_E = {"64": 10, "128": 21, "256": 42, "768": 128}   # the cpu scale's


def _table3_seeds(cell, new_seeds=(1, 2)):
    return (1, 2, 3) if cell.endswith("E=768") else new_seeds


def _write_table3(output_dir, accuracies, new_seeds=(1, 2)):
    """Every pre-registered Table 3 run (E=768: seeds 1-3, the others `new_seeds`), at
    accuracies[cell] (a number plus the seed's shift, or {seed: number})."""
    cells = {cell.label: cell for cell in TABLES[3].cells}
    for cell, accuracy in accuracies.items():
        for seed in _table3_seeds(cell, new_seeds):
            value = accuracy[seed] if isinstance(accuracy, dict) else accuracy + SEED_SHIFT[seed]
            write_result(output_dir, cell, cells[cell].run_name, seed, value,
                         albert_config={"embedding_size": TRAINED_E[cell.split("E=")[1]]})


def _judged3(output_dir, accuracies, **kwargs):
    _write_table3(output_dir, accuracies, **kwargs)
    return judge(TABLE3, read_runs(TABLE3, str(output_dir)), RESAMPLES)


def _passes(result):
    return {key: entry["passes"] for key, entry in result["criteria"].items()}


def test_table3_criteria_pass_on_the_papers_pattern(tmp_path):
    result = _judged3(tmp_path, PAPER)
    assert result["complete"] and result["missing_runs"] == []
    assert result["seeds"] == {"E=64": 2, "E=128": 2, "E=256": 2, "E=768": 3}
    assert _passes(result) == dict.fromkeys("abcd", True)
    a, b, c, d = (result["criteria"][key] for key in "abcd")
    assert a["differences"] == ["not-shared: E=128 − E=64", "not-shared: E=256 − E=128",
                                "not-shared: E=768 − E=256"]
    assert b["peak"] == "E=128" and b["outcome"] == "peak at E=128"
    assert all(numbers["passes"] for numbers in a["numbers"] + b["numbers"])
    # Each number is the difference of the cells' seed means (E=768's three, E=256's two) ...
    cells = result["cells"]
    top = a["numbers"][2]
    assert top["value"] == pytest.approx(cells[label(NONE, "768")]["accuracy"]
                                         - cells[label(NONE, "256")]["accuracy"])
    assert len(cells[label(NONE, "768")]["seed_accuracies"]) == 3
    # ... and a seed's own difference compares only cells that have that seed.
    assert sorted(top["seed_differences"]) == ["1", "2"]
    assert top["seed_differences"]["2"] == pytest.approx(
        cells[label(NONE, "768")]["seed_accuracies"]["2"]
        - cells[label(NONE, "256")]["seed_accuracies"]["2"])
    assert c["differences"] == ["E=768 − E=64: not-shared − all-shared"]
    assert len(c["runs"]) == 10
    (gap,) = c["numbers"]
    assert gap["value"] == pytest.approx(
        top["value"] + a["numbers"][0]["value"] + a["numbers"][1]["value"]
        - (cells[label(ALL, "768")]["accuracy"] - cells[label(ALL, "64")]["accuracy"]))
    assert gap["one_sided_lower95"] > 0 and sorted(gap["seed_differences"]) == ["1", "2"]
    assert len(d["agree"]) == 7 and all(d["agree"].values())
    # Beside the criteria, not judged: the sharing cost at each E (E=768's with three seeds).
    others = {entry["difference"]: entry for entry in result["differences"]
              if not entry["criterion"]}
    assert sorted(others["E=768: not-shared − all-shared"]["seed_differences"]) == ["1", "2", "3"]
    assert "all-shared: E=768 − E=256" in others and len(result["differences"]) == 14
    assert cells[label(ALL, "64")]["trained_embedding_size"] == 10


@pytest.mark.parametrize("departure, accuracies, failing, peak", [
    ("all-shared gains with E too (the small E a bottleneck)",
     {label(ALL, e): value for e, value in zip(E, (0.14, 0.15, 0.16, 0.17))}, ["b"], "E=768"),
    ("not-shared E=256 below E=128", {label(NONE, "256"): 0.15}, ["a"], "E=128"),
    ("all-shared changes more with E than not-shared", {label(ALL, "64"): 0.08}, ["c"], "E=128"),
    ("one not-shared E=128 seed below E=64",
     {label(NONE, "128"): {1: 0.17, 2: 0.14}, label(NONE, "256"): 0.18}, ["a", "d"], "E=128"),
])
def test_table3_criteria_fail_exactly_the_criterion_a_departure_breaks(
        tmp_path, departure, accuracies, failing, peak):
    result = _judged3(tmp_path, {**PAPER, **accuracies})
    assert sorted(key for key, value in _passes(result).items() if not value) == failing, departure
    b = result["criteria"]["b"]
    assert b["peak"] == peak and b["outcome"] == f"peak at {peak}"
    if "d" in failing:
        agree = result["criteria"]["d"]["agree"]
        assert [key for key, value in agree.items() if not value] == [
            "(a) not-shared: E=128 − E=64"]


def test_table3_criteria_on_partial_runs_are_not_yet_judged_never_passed_or_failed(tmp_path):
    # Seed 1 of every cell, and E=768's three (the runs' first sitting): nothing judged.
    result = _judged3(tmp_path, PAPER, new_seeds=(1,))
    assert not result["complete"] and len(result["missing_runs"]) == 6
    for key, entry in result["criteria"].items():
        assert entry["status"] == "not yet judged" and entry["passes"] is None, key
        assert "provisional" in entry, key
    assert result["criteria"]["b"]["provisional"]["peak"] == "E=128"
    assert "outcome" not in result["criteria"]["b"]
    assert result["cells"][label(NONE, "64")]["missing_seeds"] == [2]
    # Every run but not-shared E=64 seed 2: (b) judged; (a), (c) and (d) wait for it.
    _write_table3(tmp_path, PAPER)
    cell = {cell.label: cell for cell in TABLES[3].cells}[label(NONE, "64")]
    os.remove(os.path.join(tmp_path, "runs", f"{cell.run_name}-seed2", "result.json"))
    result = judge(TABLE3, read_runs(TABLE3, str(tmp_path)), RESAMPLES)
    assert result["missing_runs"] == ["sharing=not-shared, E=64, seed 2"]
    assert _passes(result) == {"a": None, "b": True, "c": None, "d": None}
    assert result["criteria"]["a"]["missing"] == ["sharing=not-shared, E=64, seed 2"]
    # (a)'s differences that have their runs are there, provisionally.
    assert [numbers["difference"] for numbers in result["criteria"]["a"]["provisional"]["numbers"]
            ] == ["not-shared: E=128 − E=64", "not-shared: E=256 − E=128",
                  "not-shared: E=768 − E=256"]


def test_table3_criteria_command_writes_json_markdown_plot_and_replaces_only_partial_ones(
        tmp_path, capsys):
    from albert.paper.__main__ import main

    runs, judged = tmp_path / "runs-dir", tmp_path / "judged"
    judged.mkdir()
    _write_table3(runs, PAPER, new_seeds=(1,))
    arguments = ["criteria", "--table=3", f"--output_dir={runs}", f"--resamples={RESAMPLES}",
                 f"--output={judged / 'criteria.json'}", f"--plot={judged / 'differences.png'}"]
    assert main(arguments) == 0
    assert not json.loads((judged / "criteria.json").read_text())["complete"]
    markdown = (judged / "criteria.md").read_text()
    assert "provisional, not a verdict" in markdown and "**Partial**" in markdown
    assert markdown in capsys.readouterr().out
    assert (judged / "differences.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The second seeds arrive: the partial judgement's files are replaced by the complete one.
    _write_table3(runs, PAPER)
    assert main(arguments) == 0
    assert json.loads((judged / "criteria.json").read_text())["complete"]
    assert ("| (b) | all-shared peaks at E=128 | passes: peak at E=128 |"
            in (judged / "criteria.md").read_text())
    capsys.readouterr()
    # ... which is never overwritten.
    assert main(arguments) == 1
    assert "holds a complete judgement" in capsys.readouterr().err
    # A run whose recorded seed is not its directory's, a run of another length, another
    # table's flag: one error line each.
    again = [*arguments[:-2], f"--output={judged / 'again.json'}"]
    cell = {cell.label: cell for cell in TABLES[3].cells}[label(ALL, "64")]
    write_result(runs, cell.label, cell.run_name, 2, 0.13)
    result_path = runs / "runs" / f"{cell.run_name}-seed2" / "result.json"
    result_path.write_text(result_path.read_text().replace('"random_seed": 2', '"random_seed": 1'))
    for extra, message in [([], "random seed is 1, not 2"),
                           (["--final_step=12000"], "trained to step 6000, not --final_step=12000"),
                           (["--early_step=3000"], "--early_step is not Table 3's"),
                           (["--seeds=0"], "--seeds must be at least 1")]:
        assert main([*again, *extra]) == 1
        error = capsys.readouterr().err
        assert error.startswith("ERROR:") and message in error and error.count("\n") == 1, error
    assert not (judged / "again.json").exists()


# ------------------------------------------------------------------------------ dropout

STEPS = (1000, 2000, 3000, 4000, 5000, 6000)


def _curve(final, offsets=None):
    """Held-out MLM accuracy at each evaluation, rising to `final` (plus offsets by step)."""
    return {step: final - 0.02 * (6000 - step) / 1000 + (offsets or {}).get(step, 0.0)
            for step in STEPS}


def _write_dropout(output_dir, accuracies, seeds=(1, 2, 3), curves=None):
    """Both cells' runs: result.json at accuracies[cell] ({seed: number}), and its evaluation
    journal (curves[cell][seed], else a curve rising to the same accuracy)."""
    model = {cell.label: cell for cell in TABLES[4].cells}[DROPOUT_MODEL]
    runs = {WITH: model.run_name, WITHOUT: dataclasses.replace(model, dropout=0.0).run_name}
    assert runs[WITHOUT].endswith("-dropout0")
    for cell, accuracy in accuracies.items():
        for seed in seeds:
            directory = write_result(output_dir, cell, runs[cell], seed, accuracy[seed])
            curve = (curves or {}).get(cell, {}).get(seed) or _curve(accuracy[seed])
            os.makedirs(os.path.join(directory, "pretraining"), exist_ok=True)
            with open(os.path.join(directory, "pretraining", "eval_results.json"), "w",
                      encoding="utf-8") as handle:
                json.dump({"evaluations": [{"step": step, "masked_lm_accuracy": value,
                                            "masked_lm_loss": 5.0}
                                           for step, value in sorted(curve.items())],
                           "best": None, "layout": ["pretraining", "masked_lm_accuracy"]},
                          handle)


WITH_DROPOUT = {seed: 0.22 for seed in (1, 2, 3)}
NO_DROPOUT = {seed: 0.235 for seed in (1, 2, 3)}


def _judged8(output_dir, accuracies, **kwargs):
    _write_dropout(output_dir, accuracies, **kwargs)
    return judge(TABLE8, read_runs(TABLE8, str(output_dir)), RESAMPLES)


def test_dropout_criteria_pass_when_removing_dropout_raises_accuracy(tmp_path):
    result = _judged8(tmp_path, {WITH: WITH_DROPOUT, WITHOUT: NO_DROPOUT})
    assert result["complete"] and _passes(result) == dict.fromkeys("abc", True)
    a, b, c = (result["criteria"][key] for key in "abc")
    cells = result["cells"]
    assert a["value"] == pytest.approx(cells[WITHOUT]["accuracy"] - cells[WITH]["accuracy"])
    assert a["one_sided_lower95"] > 0 and sorted(a["seed_differences"]) == ["1", "2", "3"]
    # (b): the runs' own evaluations from 2,000 steps on, no-dropout − dropout per seed.
    assert b["steps"] == [2000, 3000, 4000, 5000, 6000]
    assert b["mean_differences"]["4000"] == pytest.approx(0.015)
    assert c["seed_differences"] == a["seed_differences"]
    assert set(result["evaluations"]) == {f"{cell}, seed {seed}" for cell in (WITH, WITHOUT)
                                          for seed in (1, 2, 3)}


@pytest.mark.parametrize("departure, without, curves, failing", [
    ("dropout helps (the reverse)", {seed: 0.205 for seed in (1, 2, 3)}, None, ["a", "b", "c"]),
    ("no dropout behind early in training", NO_DROPOUT,
     {seed: _curve(0.235, {2000: -0.05}) for seed in (1, 2, 3)}, ["b"]),
    ("one seed below with dropout", {1: 0.27, 2: 0.27, 3: 0.21}, None, ["c"]),
])
def test_dropout_criteria_fail_exactly_the_criterion_a_departure_breaks(
        tmp_path, departure, without, curves, failing):
    result = _judged8(tmp_path, {WITH: WITH_DROPOUT, WITHOUT: without},
                      curves=curves and {WITHOUT: curves})
    assert sorted(key for key, value in _passes(result).items() if not value) == failing, departure


def test_dropout_criteria_on_partial_runs_are_not_yet_judged(tmp_path):
    # Only Table 4's runs with dropout: no difference yet, nothing judged.
    result = _judged8(tmp_path, {WITH: WITH_DROPOUT})
    assert result["missing_runs"] == [f"{WITHOUT}, seed {seed}" for seed in (1, 2, 3)]
    assert _passes(result) == dict.fromkeys("abc", None)
    assert all("provisional" not in entry for entry in result["criteria"].values())
    assert result["differences"] == [] and list(result["cells"]) == [WITH]
    # The first run without dropout: provisional numbers from seed 1's pair.
    _write_dropout(tmp_path, {WITHOUT: NO_DROPOUT}, seeds=(1,))
    result = judge(TABLE8, read_runs(TABLE8, str(tmp_path)), RESAMPLES)
    assert _passes(result) == dict.fromkeys("abc", None) and len(result["missing_runs"]) == 2
    b = result["criteria"]["b"]["provisional"]
    assert list(b["seed_differences"]) == ["1"] and b["mean_differences"]["6000"] > 0
    assert list(result["criteria"]["c"]["provisional"]["seed_differences"]) == ["1"]
    assert result["criteria"]["a"]["provisional"]["value"] > 0


def test_dropout_criteria_command_writes_its_files_and_refuses_a_run_without_an_evaluation(
        tmp_path, capsys):
    from albert.paper.__main__ import main

    runs, judged = tmp_path / "runs-dir", tmp_path / "judged"
    judged.mkdir()
    _write_dropout(runs, {WITH: WITH_DROPOUT, WITHOUT: NO_DROPOUT}, seeds=(1, 2))
    arguments = ["criteria", "--table=8", f"--output_dir={runs}", f"--resamples={RESAMPLES}",
                 f"--output={judged / 'criteria.json'}", f"--plot={judged / 'curves.png'}"]
    assert main(arguments) == 0
    partial = json.loads((judged / "criteria.json").read_text())
    assert not partial["complete"] and partial["seeds"] == 3
    assert (judged / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Seed 1 without dropout was stopped and resumed at step 2,400: an evaluation there too,
    # off the schedule the other runs share, and left out of (b).
    resumed = {**_curve(NO_DROPOUT[1]), 2400: 0.0}
    _write_dropout(runs, {WITH: WITH_DROPOUT, WITHOUT: NO_DROPOUT}, curves={WITHOUT: {1: resumed}})
    assert main(arguments) == 0
    assert 2400 not in json.loads((judged / "criteria.json").read_text())["criteria"]["b"]["steps"]
    markdown = (judged / "criteria.md").read_text()
    assert "| (a) | removing dropout raises held-out MLM accuracy at the end | passes |" in markdown
    assert "| 4,000 | 18.00 | 19.50 | +1.50 |" in markdown
    capsys.readouterr()
    assert main(arguments) == 1
    assert "holds a complete judgement" in capsys.readouterr().err
    # A finished run whose journal lacks an evaluation the others have is refused.
    _write_dropout(runs, {WITHOUT: NO_DROPOUT}, seeds=(3,),
                   curves={WITHOUT: {3: {step: value for step, value in _curve(0.235).items()
                                         if step != 4000}}})
    assert main([*arguments[:-2], f"--output={judged / 'again.json'}"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("ERROR:") and "no evaluation at step 4000" in error
