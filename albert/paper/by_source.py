"""Held-out margins split by where each document came from (a post-hoc breakdown).

The larger corpus's held-out text can mix sources: its 300 news articles, then
(with `--heldout_documents` above 300) nodes of the Python documentation, in
that order in `heldout.txt`, as the corpus manifest's `heldout_sources` counts
them. A random-next-sentence negative pairs a segment with one from any other
held-out document, so on a mixed set most of a news article's negatives are
technical prose, a contrast of topic and style that a model can use without
having learnt sentence coherence. Splitting a run's per-document counts by
source shows how much of an NSP margin that contrast carries.

    python -m albert.paper by-source --corpus_manifest=large/manifest.json \
        --results=runs/sop/result.json,runs/sop-seed2/result.json --output=sop-by-source.json

Each source's margin is its accuracy minus that source's own majority share,
with a document-bootstrap interval over the source's documents (and the seeds
pooled when several results of one cell are given), as
`albert.evaluation.document_bootstrap.margin_summary` computes for a whole set.
The breakdown was not among the criteria fixed before the runs: it describes,
it does not test.
"""

from typing import Dict, List, Tuple

import numpy as np

from albert.errors import InputError
from albert.evaluation.document_bootstrap import RESAMPLES, DocumentCounts, margin_summary

SENTENCE_SETS = "documents"   # the per-document counts of a result's intrinsic section


def heldout_source_ranges(manifest: dict) -> List[Tuple[str, int, int]]:
    """(source, first document, end) in held-out file order, from a corpus manifest."""
    sources = manifest.get("heldout_sources")
    if not sources:
        raise InputError("the corpus manifest has no heldout_sources: the held-out text is of "
                         "one source (built before held-out sources were recorded, or with "
                         "--heldout_documents=300)")
    ranges, start = [], 0
    for source, count in sources.items():
        ranges.append((source, start, start + int(count)))
        start += int(count)
    return ranges


def _seed_counts(result: dict, sentence_set: str) -> DocumentCounts:
    counts = result["intrinsic"][SENTENCE_SETS][sentence_set]
    return DocumentCounts(**{field: np.asarray(values) for field, values in counts.items()})


def _subset(counts: DocumentCounts, keep: np.ndarray) -> DocumentCounts:
    return DocumentCounts(documents=counts.documents[keep], pairs=counts.pairs[keep],
                          correct=counts.correct[keep], label_one=counts.label_one[keep])


def margins_by_source(results: List[dict], manifest: dict,
                      resamples: int = RESAMPLES) -> Dict[str, Dict[str, dict]]:
    """{sentence set: {source: margin_summary}} of one cell's results (its seeds, pooled)."""
    for result in results:
        if SENTENCE_SETS not in result.get("intrinsic", {}):
            raise InputError(f"{result.get('run_name', 'a result')} has no per-document counts "
                             "(a result.json written before records knew their documents)")
    ranges = heldout_source_ranges(manifest)
    breakdown = {}
    for sentence_set in results[0]["intrinsic"][SENTENCE_SETS]:
        seeds = [_seed_counts(result, sentence_set) for result in results]
        if any(not np.array_equal(seed.documents, seeds[0].documents) for seed in seeds):
            raise InputError(f"{sentence_set}: the results were evaluated on different "
                             "documents, so they are not seeds of one cell on one held-out set")
        documents = seeds[0].documents
        if documents.size and documents.max() >= ranges[-1][2]:
            raise InputError(f"{sentence_set}: document {int(documents.max())} is beyond the "
                             f"manifest's {ranges[-1][2]} held-out documents: not this corpus")
        breakdown[sentence_set] = {}
        for source, start, end in ranges:
            keep = (documents >= start) & (documents < end)
            if np.any(keep):
                breakdown[sentence_set][source] = margin_summary(
                    [_subset(seed, keep) for seed in seeds], resamples)
    return breakdown


def format_markdown(breakdown: Dict[str, Dict[str, dict]]) -> str:
    lines = ["| set | source | documents | pairs | accuracy | majority share | margin "
             "[95 % document interval] |", "|---|---|---|---|---|---|---|"]
    for sentence_set, sources in breakdown.items():
        for source, summary in sources.items():
            low, high = summary["margin_ci95"]
            lines.append(f"| {sentence_set} | {source} | {summary['documents']} | "
                         f"{summary['pairs']} | {summary['accuracy'] * 100:.1f} | "
                         f"{summary['majority_share'] * 100:.1f} | "
                         f"{summary['margin'] * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}] |")
    return "\n".join(lines) + "\n"
