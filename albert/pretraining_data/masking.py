"""Whole-word n-gram masking, exactly the original's algorithm, on token ids.

The same function masks instances when pretraining data is created and, from
the stored `token_boundary`, when masks are drawn on the fly during
pretraining (`--masked_lm_budget`), so both follow one rule.

Every random decision comes from the `random.Random` passed in. The original
drew the n-gram length from NumPy's global, unseeded generator, so its output
could not be reproduced (FIX); here the draw is one `rng.random()` compared
with the cumulative n-gram probabilities.
"""

import dataclasses
from typing import List, Optional, Sequence


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """The original's masking flags."""

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True

    def cumulative_ngram_probabilities(self) -> List[float]:
        """p(n) ∝ 1/n for n = 1..ngram (reversed unless favor_shorter_ngram), cumulated."""
        weights = [1.0 / n for n in range(1, self.ngram + 1)]
        if not self.favor_shorter_ngram:
            weights.reverse()
        total = sum(weights)
        cumulative, running = [], 0.0
        for weight in weights:
            running += weight / total
            cumulative.append(running)
        cumulative[-1] = 1.0
        return cumulative


@dataclasses.dataclass(frozen=True)
class MaskingVocabulary:
    """What masking needs to know about the vocabulary, by id."""

    vocab_size: int  # random replacements draw uniformly from ids [0, vocab_size)
    mask_id: int
    cls_id: int
    sep_id: int


@dataclasses.dataclass
class MaskingStatistics:
    """Counts accumulated over many calls (for the data summary and the tests)."""

    drawn_ngram: List[int]      # index n-1: times n was drawn
    masked_span_words: List[int]  # index k-1: accepted spans of k words
    replaced_by_mask: int = 0
    kept: int = 0
    replaced_by_random: int = 0
    budget_filled: int = 0      # sequences whose masked count reached the budget
    sequences: int = 0

    @classmethod
    def empty(cls, ngram: int) -> "MaskingStatistics":
        return cls(drawn_ngram=[0] * ngram, masked_span_words=[0] * ngram)

    def merge(self, other: "MaskingStatistics") -> None:
        self.drawn_ngram = [a + b for a, b in zip(self.drawn_ngram, other.drawn_ngram)]
        self.masked_span_words = [a + b for a, b in zip(self.masked_span_words, other.masked_span_words)]
        self.replaced_by_mask += other.replaced_by_mask
        self.kept += other.kept
        self.replaced_by_random += other.replaced_by_random
        self.budget_filled += other.budget_filled
        self.sequences += other.sequences


@dataclasses.dataclass
class MaskedSequence:
    input_ids: List[int]          # after masking
    masked_lm_positions: List[int]  # ascending
    masked_lm_ids: List[int]        # original ids at those positions
    token_boundary: List[int]


def word_candidates(token_ids: Sequence[int], is_word_start: Sequence[bool],
                    vocabulary: MaskingVocabulary, whole_word: bool):
    """Groups positions into maskable words; returns (candidates, token_boundary).

    `[CLS]`/`[SEP]` get boundary 1 and are never candidates. With whole-word
    masking a non-start piece joins the previous word (across `[SEP]`, as in
    the original); otherwise every piece is its own candidate.
    """
    candidates: List[List[int]] = []
    boundary = [0] * len(token_ids)
    cls_id, sep_id = vocabulary.cls_id, vocabulary.sep_id
    for position, token_id in enumerate(token_ids):
        if token_id == cls_id or token_id == sep_id:
            boundary[position] = 1
            continue
        start = is_word_start[position]
        if whole_word and candidates and not start:
            candidates[-1].append(position)
        else:
            candidates.append([position])
            if start:
                boundary[position] = 1
    return candidates, boundary


def mask_sequence(token_ids: Sequence[int], is_word_start: Sequence[bool], rng,
                  config: MaskingConfig, vocabulary: MaskingVocabulary,
                  statistics: Optional[MaskingStatistics] = None,
                  cumulative: Optional[Sequence[float]] = None) -> MaskedSequence:
    """Masks one sequence (`[CLS] A [SEP] B [SEP]`, no padding).

    Budget `min(max_predictions_per_seq, max(1, round(len · masked_lm_prob)))`
    pieces (Python's round half to even); candidate words in shuffled order;
    for each, an n-gram length n drawn with p ∝ 1/n, shrunk until it fits the
    budget, skipped if it still does not or overlaps a covered position; each
    piece of an accepted span becomes `[MASK]` (80%), stays (10%) or becomes
    a uniformly random id (10%), decided per piece.
    """
    candidates, boundary = word_candidates(token_ids, is_word_start, vocabulary,
                                           config.do_whole_word_mask)
    output = list(token_ids)
    if config.masked_lm_prob == 0:
        return MaskedSequence(output, [], [], boundary)
    budget = min(config.max_predictions_per_seq,
                 max(1, int(round(len(token_ids) * config.masked_lm_prob))))
    cumulative = cumulative or config.cumulative_ngram_probabilities()
    max_ngram = len(cumulative)

    # Shuffling word indices permutes exactly as shuffling the original's list
    # of per-word n-gram candidate sets (shuffle depends on length only).
    order = list(range(len(candidates)))
    rng.shuffle(order)

    random = rng.random
    covered = set()
    masked = []  # (position, original id)
    for word in order:
        if len(masked) >= budget:
            break
        draw = random()
        n = 1
        while n < max_ngram and draw >= cumulative[n - 1]:
            n += 1
        if statistics is not None:
            statistics.drawn_ngram[n - 1] += 1
        words = n
        positions = [p for candidate in candidates[word:word + words] for p in candidate]
        while len(masked) + len(positions) > budget and words > 1:
            words -= 1
            positions = [p for candidate in candidates[word:word + words] for p in candidate]
        if len(masked) + len(positions) > budget:
            continue
        if any(position in covered for position in positions):
            continue
        if statistics is not None:
            # A slice near the end may hold fewer words than asked for.
            statistics.masked_span_words[len(candidates[word:word + words]) - 1] += 1
        for position in positions:
            covered.add(position)
            if random() < 0.8:
                output[position] = vocabulary.mask_id
                if statistics is not None:
                    statistics.replaced_by_mask += 1
            elif random() < 0.5:
                if statistics is not None:
                    statistics.kept += 1
            else:
                output[position] = rng.randint(0, vocabulary.vocab_size - 1)
                if statistics is not None:
                    statistics.replaced_by_random += 1
            masked.append((position, token_ids[position]))
    masked.sort()
    if statistics is not None:
        statistics.sequences += 1
        statistics.budget_filled += len(masked) == budget
    return MaskedSequence(output, [p for p, _ in masked], [t for _, t in masked], boundary)
