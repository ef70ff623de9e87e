"""The official SQuAD scores on crafted cases, worked out by hand; the evaluate command."""

import json

import pytest

from albert.evaluation import squad_metrics as m
from scripts import assert_clean_failure, run_script


def _dataset(*questions):
    """One paragraph holding (id, [gold texts]) questions."""
    return [{"paragraphs": [{"context": "c", "qas": [
        {"id": qid, "answers": [{"text": text, "answer_start": 0} for text in golds]}
        for qid, golds in questions]}]}]


def test_normalisation():
    assert m.normalize_answer("The  Cat, an a-Team!") == "cat ateam"
    assert m.normalize_answer("theatre") == "theatre"  # whole words only
    assert m.normalize_answer("«Zoë»") == "«zoë»"  # ASCII punctuation only
    assert m.normalize_answer("A") == ""


def test_v1_exact_and_f1():
    data = _dataset(("a", ["the big red barn", "red barn"]), ("b", ["1,204 km"]),
                    ("c", ["Paris"]), ("d", ["x"]))
    result = m.evaluate_v1(data, {"a": "big barn", "b": "1204 km", "c": ""}, warn=None)
    # a: vs "big red barn": p=2/2, r=2/3 -> 0.8; vs "red barn": p=1/2 r=1/2 -> 0.5; max 0.8.
    # b: "1204 km" equals "1204 km" after removing the comma -> exact 1, f1 1.
    # c: empty prediction -> 0. d: missing -> 0 (still counted).
    assert result["exact_match"] == pytest.approx(100 * 1 / 4)
    assert result["f1"] == pytest.approx(100 * (0.8 + 1) / 4)


def test_v2_empty_answers_and_the_na_prob_threshold_quirk():
    data = _dataset(("has1", ["the river"]), ("has2", ["canal"]), ("no1", []), ("no2", []))
    predictions = {"has1": "river", "has2": "", "no1": "", "no2": "a canal"}
    # raw: has1 exact 1 f1 1; has2 0/0 (empty vs tokens); no1 1/1 (both empty); no2 0/0.
    result = m.evaluate_v2(data, predictions)
    assert result["exact"] == pytest.approx(50.0) and result["f1"] == pytest.approx(50.0)
    assert result["HasAns_total"] == 2 and result["NoAns_exact"] == pytest.approx(50.0)
    assert "best_f1" not in result
    # With no-answer probabilities above 1.0, a question counts as "no answer" whatever its
    # text: has1 (2.5) loses its correct answer, no2 (1.5) becomes correct.
    na_probs = {"has1": 2.5, "has2": 0.2, "no1": -3.0, "no2": 1.5}
    result = m.evaluate_v2(data, predictions, na_probs)
    assert result["exact"] == pytest.approx(50.0)  # has2 0, has1 0, no1 1, no2 1
    assert result["HasAns_exact"] == 0.0 and result["NoAns_exact"] == 100.0
    # best threshold: answer the questions with na_prob <= t. Sorted: no1(-3), has2(.2),
    # no2(1.5), has1(2.5); start at 2 (all no-answers right): no1 answered "" -> +0 = 2;
    # has2 -> +0 = 2; no2 answered "a canal" -> -1 = 1; has1 -> +1 = 2. Never above 2.
    assert result["best_f1"] == pytest.approx(50.0) and result["best_f1_thresh"] == 0.0
    better = dict(na_probs, has1=-5.0)
    result = m.evaluate_v2(data, predictions, better)
    assert result["best_exact"] == pytest.approx(75.0)
    assert result["best_exact_thresh"] == -5.0


def test_evaluate_command(tmp_path):
    data = {"version": "v2.0", "data": _dataset(("q1", ["the river"]), ("q2", []))}
    (tmp_path / "data.json").write_text(json.dumps(data))
    (tmp_path / "pred.json").write_text(json.dumps({"q1": "River", "q2": ""}))
    (tmp_path / "na.json").write_text(json.dumps({"q1": 0.1, "q2": 0.9}))
    result = run_script("-m", "albert.squad", "evaluate", str(tmp_path / "data.json"),
                        str(tmp_path / "pred.json"), f"--na_prob_file={tmp_path / 'na.json'}")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["exact"] == 100.0 and printed["total"] == 2
    assert {"HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"} <= set(printed)

    v1 = {"version": "1.1", "data": _dataset(("q1", ["the river"]))}
    (tmp_path / "v1.json").write_text(json.dumps(v1))
    result = run_script("-m", "albert.squad", "evaluate", str(tmp_path / "v1.json"),
                        str(tmp_path / "pred.json"))
    assert json.loads(result.stdout) == {"exact_match": 100.0, "f1": 100.0}

    (tmp_path / "bad.json").write_text("{")
    assert_clean_failure(run_script("-m", "albert.squad", "evaluate", str(tmp_path / "v1.json"),
                                    str(tmp_path / "bad.json")), "not valid JSON")
