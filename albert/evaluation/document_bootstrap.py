"""Intervals for sentence-task margins that treat a document's pairs as one cluster.

Held-out sentence pairs are cut from a few hundred documents, many pairs from
each; pairs of one document share topic and style, so a model's correctness
on them is correlated and an error that counts every pair as independent
(`chance.standard_error`) understates the uncertainty. Here the unit of
resampling is the document: a bootstrap draw takes as many documents as the
set has, with replacement, each with all of its pairs, and recomputes the
**margin** = accuracy − majority share (both on the drawn pairs). With several
seeds of one model the seeds are resampled too and the margin is their mean.

Everything works on per-document counts (pairs, correct answers, pairs with
label 1), so a draw is a few matrix products whatever the number of pairs.
"""

import dataclasses
from typing import List, Optional, Sequence, Tuple

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


def document_counts(documents: Sequence[int], labels: Sequence[int], predictions: Sequence[int],
                    all_documents: Optional[np.ndarray] = None) -> DocumentCounts:
    """Counts per document of one evaluation; `all_documents` fixes the document order (and
    includes documents with no pair here as zeros), so that counts of several evaluations on
    the same documents line up for paired draws."""
    documents = np.asarray(documents)
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if not len(documents) == len(labels) == len(predictions):
        raise InputError(f"{len(documents)} documents for {len(labels)} labels and "
                         f"{len(predictions)} predictions: the documents file does not match "
                         "the records")
    order = np.unique(documents) if all_documents is None else np.asarray(all_documents)
    index = np.searchsorted(order, documents)
    if np.any(index >= len(order)) or np.any(order[np.minimum(index, len(order) - 1)] != documents):
        raise InputError("a record's document is missing from the document list")
    size = len(order)
    return DocumentCounts(
        documents=order,
        pairs=np.bincount(index, minlength=size).astype(np.float64),
        correct=np.bincount(index, weights=labels == predictions, minlength=size),
        label_one=np.bincount(index, weights=labels == 1, minlength=size))


def _margins(pairs: np.ndarray, correct: np.ndarray, label_one: np.ndarray) -> np.ndarray:
    """Margin per row of already-weighted totals ([R, ...] summed over the last axis)."""
    total = pairs.sum(-1)
    ones = label_one.sum(-1)
    return correct.sum(-1) / total - np.maximum(ones, total - ones) / total


def margin_draws(evaluations: List[List[DocumentCounts]], resamples: int = RESAMPLES,
                 seed: int = BOOTSTRAP_SEED, same_seeds: bool = False) -> List[np.ndarray]:
    """Bootstrap draws of the margin of each evaluation, all from the same document draws.

    `evaluations[k]` lists the seeds of evaluation k (one DocumentCounts per seed, all on the
    same documents in the same order). Each draw resamples the documents once for every
    evaluation (paired draws: differences between evaluations are resampled consistently)
    and, where an evaluation has several seeds, its seeds; the draw's margin is the mean of
    the drawn seeds' margins. `same_seeds`: the evaluations are of the same seeds (one model
    at two checkpoints, say), so every evaluation draws the same seeds too. Returns one array
    of `resamples` margins per evaluation.
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
        per_seed = np.stack([
            _margins(weights * counts.pairs, weights * counts.correct, weights * counts.label_one)
            for counts in seeds], axis=1)                                      # [R, S]
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
    draws = margin_draws([seeds], resamples, seed)[0]
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
    }
