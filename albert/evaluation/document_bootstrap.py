"""Intervals for held-out accuracies that treat a document's records as one cluster.

Held-out records are cut from a few hundred documents, many from each; records
of one document share topic and style, so a model's correctness on them is
correlated and an error that counts every record as independent
(`chance.standard_error`) understates the uncertainty. Here the unit of
resampling is the document: a bootstrap draw takes as many documents as the
set has, with replacement, each with all of its records, and recomputes the
statistic on the drawn records:

- for a sentence task (`DocumentCounts`), the **margin** = accuracy − majority
  share (both on the drawn pairs);
- for the masked LM (`MaskedTokenCounts`), the accuracy over the drawn masked
  tokens.

With several seeds of one model the seeds are resampled too and the statistic
is their mean. Evaluations on the same documents are drawn together (paired),
so a difference between two of them (two cells, two steps) gets its interval
from the same document draws.

Everything works on per-document counts, so a draw is a few matrix products
whatever the number of records.
"""

import dataclasses
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from albert.errors import InputError

RESAMPLES = 10_000
BOOTSTRAP_SEED = 20200401


@dataclasses.dataclass(frozen=True)
class DocumentCounts:
    """Per document (in `documents` order): pairs, correct answers, pairs labelled 1."""

    documents: np.ndarray
    pairs: np.ndarray
    correct: np.ndarray
    label_one: np.ndarray

    @property
    def total_pairs(self) -> int:
        return int(self.pairs.sum())

    def margin(self) -> float:
        return float(_margins(self.pairs[None], self.correct[None], self.label_one[None])[0])

    def accuracy(self) -> float:
        return float(self.correct.sum() / self.pairs.sum())

    def majority_share(self) -> float:
        ones = self.label_one.sum()
        return float(max(ones, self.pairs.sum() - ones) / self.pairs.sum())

    def statistic(self) -> float:
        return self.margin()

    def resampled(self, weights: np.ndarray) -> np.ndarray:
        """The margin under each row of document weights [R, D]."""
        return _margins(weights * self.pairs, weights * self.correct, weights * self.label_one)


@dataclasses.dataclass(frozen=True)
class MaskedTokenCounts:
    """Per document (in `documents` order): masked tokens, correctly predicted ones."""

    documents: np.ndarray
    tokens: np.ndarray
    correct: np.ndarray

    @property
    def total_tokens(self) -> int:
        return int(self.tokens.sum())

    def accuracy(self) -> float:
        return float(self.correct.sum() / self.tokens.sum())

    def statistic(self) -> float:
        return self.accuracy()

    def resampled(self, weights: np.ndarray) -> np.ndarray:
        """The accuracy under each row of document weights [R, D]."""
        return (weights * self.correct).sum(-1) / (weights * self.tokens).sum(-1)


def _document_index(documents: np.ndarray, records: int,
                    all_documents: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """(document order, each record's index in it)."""
    if len(documents) != records:
        raise InputError(f"{len(documents)} documents for {records} records: the documents "
                         "file does not match the records")
    order = np.unique(documents) if all_documents is None else np.asarray(all_documents)
    index = np.searchsorted(order, documents)
    if np.any(index >= len(order)) or np.any(order[np.minimum(index, len(order) - 1)] != documents):
        raise InputError("a record's document is missing from the document list")
    return order, index


def document_counts(documents: Sequence[int], labels: Sequence[int], predictions: Sequence[int],
                    all_documents: Optional[np.ndarray] = None) -> DocumentCounts:
    """Counts per document of one evaluation; `all_documents` fixes the document order (and
    includes documents with no pair here as zeros), so that counts of several evaluations on
    the same documents line up for paired draws."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if len(labels) != len(predictions):
        raise InputError(f"{len(labels)} labels for {len(predictions)} predictions")
    order, index = _document_index(np.asarray(documents), len(labels), all_documents)
    size = len(order)
    return DocumentCounts(
        documents=order,
        pairs=np.bincount(index, minlength=size).astype(np.float64),
        correct=np.bincount(index, weights=labels == predictions, minlength=size),
        label_one=np.bincount(index, weights=labels == 1, minlength=size))


def masked_token_counts(documents: Sequence[int], tokens: Sequence[float],
                        correct: Sequence[float],
                        all_documents: Optional[np.ndarray] = None) -> MaskedTokenCounts:
    """Masked tokens and correct predictions per document, from per-record counts (a record's
    masked-LM weights summed, and summed where the prediction is right)."""
    tokens, correct = np.asarray(tokens, np.float64), np.asarray(correct, np.float64)
    if len(tokens) != len(correct):
        raise InputError(f"{len(tokens)} token counts for {len(correct)} correct counts")
    order, index = _document_index(np.asarray(documents), len(tokens), all_documents)
    return MaskedTokenCounts(documents=order,
                             tokens=np.bincount(index, weights=tokens, minlength=len(order)),
                             correct=np.bincount(index, weights=correct, minlength=len(order)))


def _margins(pairs: np.ndarray, correct: np.ndarray, label_one: np.ndarray) -> np.ndarray:
    """Margin per row of already-weighted totals ([R, ...] summed over the last axis)."""
    total = pairs.sum(-1)
    ones = label_one.sum(-1)
    return correct.sum(-1) / total - np.maximum(ones, total - ones) / total


Counts = Union[DocumentCounts, MaskedTokenCounts]


def document_draws(evaluations: List[List[Counts]], resamples: int = RESAMPLES,
                   seed: int = BOOTSTRAP_SEED, same_seeds: bool = False) -> List[np.ndarray]:
    """Bootstrap draws of each evaluation's statistic (a sentence margin or a masked-LM
    accuracy), all from the same document draws.

    `evaluations[k]` lists the seeds of evaluation k (one counts object per seed, all on the
    same documents in the same order). Each draw resamples the documents once for every
    evaluation (paired draws: differences between evaluations are resampled consistently)
    and, where an evaluation has several seeds, its seeds; the draw's statistic is the mean
    over the drawn seeds. `same_seeds`: the evaluations are of the same seeds (one model at
    two checkpoints, say), so every evaluation draws the same seeds too. Returns one array of
    `resamples` values per evaluation.
    """
    reference = evaluations[0][0].documents
    for seeds in evaluations:
        for counts in seeds:
            if not np.array_equal(counts.documents, reference):
                raise InputError("paired intervals need evaluations on the same documents")
    rng = np.random.default_rng(seed)
    size = len(reference)
    # How often each document is drawn in each resample: [R, D].
    weights = rng.multinomial(size, np.full(size, 1.0 / size), size=resamples).astype(np.float64)
    if same_seeds and len({len(seeds) for seeds in evaluations}) > 1:
        raise InputError("draws of the same seeds need the same number of seeds everywhere")
    shared_choice = None
    draws = []
    for seeds in evaluations:
        per_seed = np.stack([counts.resampled(weights) for counts in seeds], axis=1)  # [R, S]
        if len(seeds) > 1:
            chosen = shared_choice
            if chosen is None:
                chosen = rng.integers(0, len(seeds), size=(resamples, len(seeds)))
                shared_choice = chosen if same_seeds else None
            per_seed = np.take_along_axis(per_seed, chosen, axis=1)
        draws.append(per_seed.mean(axis=1))
    return draws


def interval(draws: np.ndarray, level: float = 0.95) -> Tuple[float, float]:
    """Two-sided percentile interval of bootstrap draws."""
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def one_sided_lower(draws: np.ndarray, level: float = 0.95) -> float:
    """The lower bound of a one-sided percentile interval (its (1 - level) quantile)."""
    return float(np.percentile(draws, (1 - level) * 100))


def margin_summary(seeds: List[DocumentCounts], resamples: int = RESAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> dict:
    """The fields `python -m albert.paper evaluate` reports for one set: documents, pairs,
    margin (mean over seeds), its two-sided 95 % document-bootstrap interval, its one-sided
    95 % lower bound, and the naive standard error (pairs as independent)."""
    draws = document_draws([seeds], resamples, seed)[0]
    pairs = seeds[0].total_pairs
    accuracy = float(np.mean([counts.accuracy() for counts in seeds]))
    return {
        "documents": int(np.count_nonzero(seeds[0].pairs)),
        "pairs": pairs,
        "accuracy": accuracy,
        "majority_share": seeds[0].majority_share(),
        "margin": float(np.mean([counts.margin() for counts in seeds])),
        "margin_ci95": list(interval(draws)),
        "margin_one_sided_lower95": one_sided_lower(draws),
        "naive_standard_error": float(np.sqrt(accuracy * (1 - accuracy) / (pairs * len(seeds)))),
        "seeds": len(seeds),
        # Differ only where seeds were evaluated on records made again from changed text.
        "seed_pairs": [counts.total_pairs for counts in seeds],
    }


def masked_lm_summary(seeds: List[MaskedTokenCounts], resamples: int = RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> dict:
    """Masked-LM accuracy (mean over seeds) with its two-sided 95 % document-bootstrap
    interval, the documents and masked tokens it rests on, and the naive standard error
    (every masked token independent)."""
    draws = document_draws([seeds], resamples, seed)[0]
    tokens = seeds[0].total_tokens
    accuracy = float(np.mean([counts.accuracy() for counts in seeds]))
    return {
        "documents": int(np.count_nonzero(seeds[0].tokens)),
        "masked_tokens": tokens,
        "accuracy": accuracy,
        "accuracy_ci95": list(interval(draws)),
        "naive_standard_error": float(np.sqrt(accuracy * (1 - accuracy) / (tokens * len(seeds)))),
        "seeds": len(seeds),
        "seed_masked_tokens": [counts.total_tokens for counts in seeds],
    }


def difference_summary(first: List[Counts], second: List[Counts], resamples: int = RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> dict:
    """`first` − `second` (means over each one's seeds: two cells, say) on the same documents,
    with its two-sided 95 % interval from paired document draws (each one's seeds drawn on
    their own)."""
    first_draws, second_draws = document_draws([first, second], resamples, seed)
    difference = (float(np.mean([counts.statistic() for counts in first]))
                  - float(np.mean([counts.statistic() for counts in second])))
    return {"difference": difference,
            "difference_ci95": list(interval(first_draws - second_draws))}
