import random

import pytest

from albert.pretraining_data.masking import (MaskingConfig, MaskingStatistics, MaskingVocabulary,
                                 mask_sequence, word_candidates)

VOCABULARY = MaskingVocabulary(vocab_size=1000, mask_id=4, cls_id=2, sep_id=3)


def _sequence(words, rng):
    """[CLS] words [SEP] words [SEP] with `words` pieces per side; returns ids and start flags."""
    ids, starts = [2], [True]
    for side in range(2):
        for _ in range(words):
            pieces = rng.choice([1, 1, 1, 2, 3])
            for piece in range(pieces):
                ids.append(rng.randint(13, 999))
                starts.append(piece == 0)
        ids.append(3)
        starts.append(True)
    return ids, starts


def test_candidates_group_word_pieces_and_skip_special_tokens():
    ids = [2, 10, 11, 12, 3, 13, 14, 3]
    starts = [True, True, False, True, True, False, True, True]
    candidates, boundary = word_candidates(ids, starts, VOCABULARY, whole_word=True)
    # Piece 13 continues the word before [SEP]: spans may cross [SEP] (as the original).
    assert candidates == [[1, 2], [3, 5], [6]]
    assert boundary == [1, 1, 0, 1, 1, 0, 1, 1]
    single, _ = word_candidates(ids, starts, VOCABULARY, whole_word=False)
    assert single == [[1], [2], [3], [5], [6]]


def test_budget_uses_round_half_to_even():
    rng = random.Random(0)
    ids = [2] + [20] * 28 + [3]   # 30 tokens: 30 * 0.15 = 4.5 -> 4
    starts = [True] * 30
    masked = mask_sequence(ids, starts, rng, MaskingConfig(), VOCABULARY)
    assert len(masked.masked_lm_positions) == 4
    ids = [2] + [20] * 48 + [3]   # 50 tokens: 7.5 -> 8, capped by max_predictions_per_seq
    masked = mask_sequence(ids, [True] * 50, rng, MaskingConfig(max_predictions_per_seq=6), VOCABULARY)
    assert len(masked.masked_lm_positions) == 6


def test_nothing_is_masked_when_masked_lm_prob_is_zero():
    ids, starts = _sequence(10, random.Random(1))
    masked = mask_sequence(ids, starts, random.Random(2), MaskingConfig(masked_lm_prob=0), VOCABULARY)
    assert masked.input_ids == ids and masked.masked_lm_positions == []


def test_whole_words_are_masked_together():
    rng = random.Random(3)
    config = MaskingConfig()
    for _ in range(200):
        ids, starts = _sequence(20, rng)
        masked = mask_sequence(ids, starts, rng, config, VOCABULARY)
        candidates, _ = word_candidates(ids, starts, VOCABULARY, whole_word=True)
        positions = set(masked.masked_lm_positions)
        for word in candidates:
            assert positions.isdisjoint(word) or positions.issuperset(word)
        assert masked.masked_lm_positions == sorted(masked.masked_lm_positions)
        assert [ids[p] for p in masked.masked_lm_positions] == masked.masked_lm_ids
        assert all(ids[p] not in (2, 3) for p in masked.masked_lm_positions)


def test_distributions_over_many_sequences():
    rng = random.Random(4)
    config = MaskingConfig(max_predictions_per_seq=20)
    statistics = MaskingStatistics.empty(3)
    for _ in range(6000):
        ids, starts = _sequence(rng.randint(20, 60), rng)
        mask_sequence(ids, starts, rng, config, VOCABULARY, statistics)
    drawn = statistics.drawn_ngram
    for observed, expected in zip(drawn, (6 / 11, 3 / 11, 2 / 11)):
        assert observed / sum(drawn) == pytest.approx(expected, abs=0.02)
    masked = statistics.replaced_by_mask + statistics.kept + statistics.replaced_by_random
    assert statistics.replaced_by_mask / masked == pytest.approx(0.8, abs=0.02)
    assert statistics.kept / masked == pytest.approx(0.1, abs=0.02)
    assert statistics.replaced_by_random / masked == pytest.approx(0.1, abs=0.02)


def test_longer_ngrams_are_favoured_when_asked():
    assert MaskingConfig(favor_shorter_ngram=False).cumulative_ngram_probabilities() == pytest.approx(
        [2 / 11, 5 / 11, 1.0])
    assert MaskingConfig(ngram=1).cumulative_ngram_probabilities() == [1.0]


def test_same_seed_same_masks():
    ids, starts = _sequence(30, random.Random(5))
    first = mask_sequence(ids, starts, random.Random(9), MaskingConfig(), VOCABULARY)
    second = mask_sequence(ids, starts, random.Random(9), MaskingConfig(), VOCABULARY)
    assert first == second
