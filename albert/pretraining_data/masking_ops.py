"""`mask_sequence` (albert.pretraining_data.masking) in TensorFlow ops, for a batch at once.

Dynamic masking draws each record's masks with `random.Random(seed text)`
(`python_random` reproduces that generator in ops). This module runs the same
algorithm on every row of a batch in step: the candidate words, the
Fisher–Yates shuffle of their order (Python's `shuffle`), then the walk over
the shuffled words (n-gram length, shrinking to the budget, overlap check,
and per piece 80% `[MASK]` / 10% kept / 10% random id). A row takes part in a
draw only where the Python code would draw, so every row consumes its
generator exactly as `mask_sequence` does and gets the same masks.
"""

import tensorflow as tf

from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary
from albert.pretraining_data.python_random import Generators


def _candidates(token_ids, is_word_start, length, vocabulary: MaskingVocabulary,
                whole_word: bool):
    """Per position: is it a piece of a candidate word, and which (`word_candidates`)."""
    size = tf.shape(token_ids)[1]
    real = tf.range(size)[None, :] < length[:, None]
    piece = real & (token_ids != vocabulary.cls_id) & (token_ids != vocabulary.sep_id)
    pieces_before = tf.cumsum(tf.cast(piece, tf.int32), axis=1, exclusive=True)
    starts = piece
    if whole_word:
        starts = piece & (is_word_start | (pieces_before == 0))
    word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
    words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    # pieces_in_words_before[c]: pieces of the candidate words before word c (c ≤ size).
    first_position = tf.searchsorted(tf.cumsum(tf.cast(starts, tf.int32), axis=1),
                                     tf.tile(tf.range(1, size + 2)[None, :],
                                             [tf.shape(token_ids)[0], 1]), side="left")
    pieces_with_total = tf.concat(
        [pieces_before, tf.reduce_sum(tf.cast(piece, tf.int32), axis=1, keepdims=True)], axis=1)
    pieces_in_words_before = tf.gather(pieces_with_total, first_position, batch_dims=1)
    return piece, word, words, pieces_in_words_before


def _shuffled_order(generators: Generators, words, size):
    """`rng.shuffle(list(range(words)))` for every row, as int32 `[B, size]`.

    Fisher–Yates from the end: step `i` swaps `order[i]` with `order[j]`,
    `j = _randbelow(i + 1)`, which draws again while its draw is too large.
    Each row keeps its own `i` and draws one word per iteration, so a row
    that rejects a draw simply stays at its step.
    """
    rows = tf.shape(words)[0]
    order = tf.tile(tf.range(size)[None, :], [rows, 1])
    columns = tf.range(size)[None, :]

    def draw(step, order, state, index):
        generators.state, generators.index = state, index
        active = step >= 1
        limit = tf.cast(step + 1, tf.int64)
        j = generators.draw_below(limit, active)
        accepted = active & (j < limit)
        j = tf.cast(j, tf.int32)
        at_step = tf.gather(order, tf.maximum(step, 0), batch_dims=1)
        at_j = tf.gather(order, tf.minimum(j, size - 1), batch_dims=1)
        swapped = tf.where(columns == step[:, None], at_j[:, None],
                           tf.where(columns == j[:, None], at_step[:, None], order))
        order = tf.where(accepted[:, None], swapped, order)
        return step - tf.cast(accepted, tf.int32), order, generators.state, generators.index

    _, order, generators.state, generators.index = tf.while_loop(
        lambda step, *_: tf.reduce_any(step >= 1), draw,
        (words - 1, order, generators.state, generators.index))
    return order


def mask_batch(token_ids, is_word_start, length, generators: Generators,
               config: MaskingConfig, vocabulary: MaskingVocabulary):
    """The masks `mask_sequence` draws for each row (int32 ids `[B, S]`, bool word starts,
    int32 real lengths `[B]`). Returns (masked ids, bool `[B, S]` marking masked positions)."""
    if config.masked_lm_prob == 0:
        return token_ids, tf.zeros_like(token_ids, tf.bool)
    size = tf.shape(token_ids)[1]
    columns = tf.range(size)[None, :]
    piece, word_of, words, pieces_before_word = _candidates(
        token_ids, is_word_start, length, vocabulary, config.do_whole_word_mask)
    budget = tf.minimum(config.max_predictions_per_seq, tf.maximum(1, tf.cast(
        tf.round(tf.cast(length, tf.float64) * config.masked_lm_prob), tf.int32)))
    cumulative = config.cumulative_ngram_probabilities()
    order = _shuffled_order(generators, words, size)

    def pieces_of(first, count):  # pieces of words [first, first + count), clipped at the end
        end = tf.minimum(first + count, size)
        return (tf.gather(pieces_before_word, end, batch_dims=1)
                - tf.gather(pieces_before_word, first, batch_dims=1))

    def visit(t, output, masked, covered, state, index):
        generators.state, generators.index = state, index
        count = tf.reduce_sum(tf.cast(masked, tf.int32), axis=1)
        active = (t < words) & (count < budget)
        word = order[:, t]
        draw = generators.random(active)
        ngram = 1 + tf.add_n([tf.cast(draw >= c, tf.int32) for c in cumulative[:-1]] +
                             [tf.zeros_like(word)])
        # Shrink the span until it fits the budget (it may still not fit at one word).
        span = tf.ones_like(word)
        for n in range(2, len(cumulative) + 1):
            span = tf.where((n <= ngram) & (count + pieces_of(word, n) <= budget), n, span)
        in_span_word = (columns >= word[:, None]) & (columns < (word + span)[:, None])
        overlaps = tf.reduce_any(in_span_word & covered, axis=1)
        accepted = active & (count + pieces_of(word, span) <= budget) & ~overlaps
        covered = covered | (in_span_word & accepted[:, None])
        span_positions = piece & (word_of >= word[:, None]) & (word_of < (word + span)[:, None])
        span_positions &= accepted[:, None]
        rank = tf.cumsum(tf.cast(span_positions, tf.int32), axis=1) - 1
        span_pieces = tf.reduce_sum(tf.cast(span_positions, tf.int32), axis=1)

        def replace(q, output, state, index):
            generators.state, generators.index = state, index
            here = q < span_pieces
            position = span_positions & (rank == q)
            to_mask = generators.random(here) < 0.8
            second = here & ~to_mask
            to_random = second & (generators.random(second) >= 0.5)
            random_id = tf.cast(generators.below(vocabulary.vocab_size, to_random), tf.int32)
            new = tf.where(to_mask, vocabulary.mask_id, tf.where(to_random, random_id, -1))
            output = tf.where(position & (new >= 0)[:, None], new[:, None], output)
            return q + 1, output, generators.state, generators.index

        _, output, state, index = tf.while_loop(
            lambda q, *_: q < tf.reduce_max(span_pieces), replace,
            (tf.constant(0), output, generators.state, generators.index))
        return t + 1, output, masked | span_positions, covered, state, index

    _, output, masked, _, generators.state, generators.index = tf.while_loop(
        lambda t, output, masked, covered, *_: tf.reduce_any(
            (t < words) & (tf.reduce_sum(tf.cast(masked, tf.int32), axis=1) < budget)),
        visit,
        (tf.constant(0), token_ids, tf.zeros_like(token_ids, tf.bool),
         tf.zeros_like(token_ids, tf.bool), generators.state, generators.index))
    return output, masked
