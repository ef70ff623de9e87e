"""The official SQuAD v1.1 and v2.0 scores, written out from their definitions.

Answers are normalised (lower-cased; every ASCII punctuation character
removed; the words `a`, `an`, `the` replaced by spaces; whitespace collapsed).
Exact match compares the normalised strings; F1 is the bag-of-tokens overlap
of the normalised whitespace tokens. A question scores the best over its gold
answers; totals are means × 100.

v1.1 (`evaluate_v1`): `exact_match`, `f1`; an empty prediction or gold scores
F1 0. v2.0 (`evaluate_v2`): unanswerable questions have the single gold `""`;
if either side has no tokens F1 is 1 when both are empty, else 0. With
no-answer probabilities (`na_probs`), a question whose probability exceeds
`na_prob_thresh` (1.0) counts as answered "no answer" whatever its text, and
`best_exact` / `best_f1` with their thresholds report the best cut-off.
"""

import collections
import re
import string
from typing import Dict, List, Optional

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> List[str]:
    return normalize_answer(text).split() if text else []


def _overlap_f1(prediction_tokens: List[str], gold_tokens: List[str]) -> float:
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0
    precision = 1.0 * same / len(prediction_tokens)
    recall = 1.0 * same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def f1_v1(prediction: str, gold: str) -> float:
    return _overlap_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def f1_v2(prediction: str, gold: str) -> float:
    gold_tokens, prediction_tokens = answer_tokens(gold), answer_tokens(prediction)
    if not gold_tokens or not prediction_tokens:
        return int(gold_tokens == prediction_tokens)
    return _overlap_f1(prediction_tokens, gold_tokens)


def exact(prediction: str, gold: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(gold))


def _questions(dataset: list):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset: list, predictions: Dict[str, str], warn=None) -> Dict[str, float]:
    """`{"exact_match", "f1"}` of the official v1.1 script; `dataset` is the JSON's `data`.

    A question without a prediction scores 0 (and is reported through `warn`).
    """
    exact_total = f1_total = total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            if warn:
                warn(f"Unanswered question {qa['id']} will receive score 0.")
            continue
        golds = [answer["text"] for answer in qa["answers"]]
        prediction = predictions[qa["id"]]
        # (the official script stops on a question without answers; it scores 0 here)
        exact_total += max((exact(prediction, gold) for gold in golds), default=0)
        f1_total += max((f1_v1(prediction, gold) for gold in golds), default=0)
    return {"exact_match": 100.0 * exact_total / total, "f1": 100.0 * f1_total / total}


def has_gold_answers(dataset: list) -> bool:
    """Whether any question of `dataset` has a gold answer (a test file has none)."""
    return any(qa.get("answers") for qa in _questions(dataset))


def has_answer(dataset: list) -> Dict[str, bool]:
    return {qa["id"]: bool(qa["answers"]) for qa in _questions(dataset)}


def raw_scores_v2(dataset: list, predictions: Dict[str, str], warn=None):
    """({qid: exact}, {qid: f1}) for the questions that have a prediction."""
    exact_scores, f1_scores = {}, {}
    for qa in _questions(dataset):
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qa["id"] not in predictions:
            if warn:
                warn(f"Missing prediction for {qa['id']}")
            continue
        prediction = predictions[qa["id"]]
        exact_scores[qa["id"]] = max(exact(prediction, gold) for gold in golds)
        f1_scores[qa["id"]] = max(f1_v2(prediction, gold) for gold in golds)
    return exact_scores, f1_scores


def apply_no_answer_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else score
            for qid, score in scores.items()}


def _mean_scores(exact_scores, f1_scores, qids=None):
    qids = list(exact_scores) if not qids else qids
    total = len(qids)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact_scores[k] for k in qids) / total),
        ("f1", 100.0 * sum(f1_scores[k] for k in qids) / total),
        ("total", total)])


def best_threshold(predictions, scores, na_probs, qid_to_has_ans):
    """(best score × 100, its threshold): questions at or below the threshold answered."""
    current = best = sum(1 for qid in qid_to_has_ans if not qid_to_has_ans[qid])
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            difference = scores[qid]
        else:
            difference = -1 if predictions[qid] else 0
        current += difference
        if current > best:
            best, threshold = current, na_probs[qid]
    return 100.0 * best / len(scores), threshold


def evaluate_v2(dataset: list, predictions: Dict[str, str],
                na_probs: Optional[Dict[str, float]] = None, na_prob_thresh: float = 1.0,
                warn=None) -> Dict[str, float]:
    """The official v2.0 output: exact, f1, total, HasAns_*, NoAns_*, and with `na_probs`
    best_exact(_thresh), best_f1(_thresh)."""
    given = na_probs is not None
    na_probs = na_probs if given else {qid: 0.0 for qid in predictions}
    qid_to_has_ans = has_answer(dataset)
    has_ans = [qid for qid, value in qid_to_has_ans.items() if value]
    no_ans = [qid for qid, value in qid_to_has_ans.items() if not value]
    exact_raw, f1_raw = raw_scores_v2(dataset, predictions, warn)
    exact_scores = apply_no_answer_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_scores = apply_no_answer_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    result = _mean_scores(exact_scores, f1_scores)
    for prefix, qids in (("HasAns", has_ans), ("NoAns", no_ans)):
        if qids:
            for key, value in _mean_scores(exact_scores, f1_scores, qids).items():
                result[f"{prefix}_{key}"] = value
    if given:
        result["best_exact"], result["best_exact_thresh"] = best_threshold(
            predictions, exact_raw, na_probs, qid_to_has_ans)
        result["best_f1"], result["best_f1_thresh"] = best_threshold(
            predictions, f1_raw, na_probs, qid_to_has_ans)
    return dict(result)


def is_version_2(document: dict) -> bool:
    """Whether a SQuAD JSON is v2.0 (its version, or any `is_impossible` question)."""
    if str(document.get("version", "")).lstrip("v").startswith("2"):
        return True
    return any("is_impossible" in qa for qa in _questions(document.get("data", [])))
