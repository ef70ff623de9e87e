"""Metrics of word tagging: word accuracy, and entity precision, recall and F1 as conlleval
counts them.

Entities are maximal chunks of one type read from IOB1, IOB2 (BIO), IOE and BIOES tags by
conlleval's rules (as the `seqeval` package's default mode reads them). A chunk ends before
`O`, before `B-` or `S-`, before a tag of another type, and after `E-` or `S-`. A chunk starts
at `B-` or `S-`, and also at `I-` or `E-` that follows `O`, another type, `E-` or `S-`. An
entity counts as correct only when both its span and its type match a gold entity. Tags
without a `X-` prefix (`O`, or a plain `PER`) are read as `O` when they are `O`, and otherwise
as `I-` of their own type.
"""

from typing import Dict, List, Sequence, Set, Tuple

import numpy as np

Entity = Tuple[str, int, int]  # (type, first word, last word), words counted across sentences


def _split(tag: str) -> Tuple[str, str]:
    if tag == "O" or not tag:
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES":
        return tag[0], tag[2:]
    return "I", tag


def _ends(previous: str, tag: str, previous_type: str, tag_type: str) -> bool:
    """Whether a chunk ends after the previous word (conlleval's endOfChunk)."""
    if previous in ("E", "S"):
        return True
    if previous in ("B", "I"):
        return tag in ("B", "S", "O") or tag_type != previous_type
    return False


def _starts(previous: str, tag: str, previous_type: str, tag_type: str) -> bool:
    """Whether a chunk starts at this word (conlleval's startOfChunk)."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E"):
        return previous in ("E", "S", "O") or tag_type != previous_type
    return False


def entities(sentences: Sequence[Sequence[str]]) -> Set[Entity]:
    """The chunks of tagged sentences; word positions count through all sentences in order."""
    found: Set[Entity] = set()
    position = 0
    for sentence in sentences:
        previous, previous_type, start = "O", "", None
        for index, tag in enumerate([*sentence, "O"]):   # a final O closes the last chunk
            prefix, tag_type = _split(tag)
            if start is not None and _ends(previous, prefix, previous_type, tag_type):
                found.add((previous_type, position + start, position + index - 1))
                start = None
            if _starts(previous, prefix, previous_type, tag_type):
                start = index
            previous, previous_type = prefix, tag_type
        position += len(sentence)
    return found


def is_chunk_tagging(tags: Sequence[str]) -> bool:
    """Whether a tag set is a chunk scheme (every tag `O` or prefixed B-, I-, E-, S-)."""
    return all(tag == "O" or (len(tag) > 2 and tag[0] in "BIES" and tag[1] == "-")
               for tag in tags) and any(tag != "O" for tag in tags)


def _prf(correct: int, predicted: int, gold: int) -> Dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": gold}


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """{"overall": {precision, recall, f1, support}, "<type>": {...}, ...} (micro over types)."""
    gold_entities, predicted_entities = entities(gold), entities(predicted)
    scores = {"overall": _prf(len(gold_entities & predicted_entities), len(predicted_entities),
                              len(gold_entities))}
    for kind in sorted({e[0] for e in gold_entities | predicted_entities}):
        gold_kind = {e for e in gold_entities if e[0] == kind}
        predicted_kind = {e for e in predicted_entities if e[0] == kind}
        scores[kind] = _prf(len(gold_kind & predicted_kind), len(predicted_kind), len(gold_kind))
    return scores


def tagging_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                    baseline: Sequence[Sequence[str]], loss: float) -> Dict[str, float]:
    """Flat metrics of one evaluation: word accuracy; entity P/R/F1 overall and per type
    (chunk tag sets only); each beside the baseline's (`baseline`: each word's commonest
    training tag)."""
    flat_gold = [tag for sentence in gold for tag in sentence]
    flat_predicted = [tag for sentence in predicted for tag in sentence]
    flat_baseline = [tag for sentence in baseline for tag in sentence]
    metrics = {"word_accuracy": float(np.mean([g == p for g, p in zip(flat_gold, flat_predicted)])),
               "baseline_word_accuracy": float(np.mean([g == b for g, b in
                                                        zip(flat_gold, flat_baseline)])),
               "eval_loss": loss}
    if is_chunk_tagging(sorted(set(flat_gold) | set(flat_predicted))):
        scores = entity_scores(gold, predicted)
        for kind, values in scores.items():
            for name in ("precision", "recall", "f1"):
                metrics[f"{name}_{kind}" if kind != "overall" else f"entity_{name}"] = values[name]
        metrics["baseline_entity_f1"] = entity_scores(gold, baseline)["overall"]["f1"]
    return metrics


def confusion(gold: Sequence[str], predicted: Sequence[str], tags: Sequence[str]) -> List[List[int]]:
    """counts[true tag][predicted tag] over words."""
    index = {tag: i for i, tag in enumerate(tags)}
    counts = np.zeros((len(tags), len(tags)), np.int64)
    for g, p in zip(gold, predicted):
        counts[index[g], index[p]] += 1
    return counts.tolist()
