"""Whole-word n-gram masking in TensorFlow ops, for a batch at once, on the stateless RNG.

The walk is `mask_sequence`'s (albert.pretraining_data.masking): the candidate
words in a random order, for each an n-gram length drawn with p ∝ 1/n, shrunk
until it fits the budget, skipped if it still does not or overlaps a masked
position, and each piece of an accepted span `[MASK]` (80 %), kept (10 %) or a
uniformly random id (10 %). Only the source of randomness differs: every
number a row uses is drawn up front by `tf.random.stateless_uniform` from the
row's own seed, so a row's masks depend on (seed, row key, tokens) and on
nothing else — not on the batch it sits in, the sequence length it is padded
to, or what was drawn before it.

Per row, position (or candidate word, or visit) `j` owns three uniforms and
one random id, drawn as `[length, 3]` and `[length]` so that the numbers of
`j` do not depend on the padded length:

* `[j, 0]`: the sort key of candidate word `j` (the visiting order is the
  argsort of the keys, a uniformly random permutation);
* `[j, 1]`: the n-gram length drawn at the `j`-th visit;
* `[j, 2]`: the replacement of position `j` when it is masked;
* the id `j`: the random id of position `j` when it is replaced by one.

The version below is recorded in a run's `data_order.json`: a run resumed with
masks drawn another way would mix two definitions.
"""

import tensorflow as tf

from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary

MASKING_VERSION = "stateless-whole-word-ngram-1"


def row_draws(seed: int, row_keys, length, vocab_size: int):
    """Every random number each row needs: uniforms `[B, length, 3]`, ids `[B, length]`.

    Row `b` is seeded by `(seed, row_keys[b])` (int64 keys, e.g. the stream
    position); the ids are drawn from an independent split of that seed.
    """
    def one_row(key):
        float_seed, id_seed = tf.unstack(tf.random.experimental.stateless_split(
            tf.stack([tf.constant(seed, tf.int64), key]), num=2))
        uniforms = tf.random.stateless_uniform([length, 3], float_seed)
        ids = tf.random.stateless_uniform([length], id_seed, minval=0, maxval=vocab_size,
                                          dtype=tf.int32)
        return uniforms, ids

    return tf.map_fn(one_row, tf.cast(row_keys, tf.int64),
                     fn_output_signature=(tf.float32, tf.int32))


def _candidates(token_ids, is_word_start, length, vocabulary: MaskingVocabulary,
                whole_word: bool):
    """`word_candidates` for a batch: per position, is it a maskable piece and of which word;
    per row, how many words; per word index c (0..size), the pieces of the words before c."""
    size = tf.shape(token_ids)[1]
    real = tf.range(size)[None, :] < length[:, None]
    piece = real & (token_ids != vocabulary.cls_id) & (token_ids != vocabulary.sep_id)
    pieces_before = tf.cumsum(tf.cast(piece, tf.int32), axis=1, exclusive=True)
    starts = piece
    if whole_word:
        # A word starts at a start piece, or at the first piece when none came before.
        starts = piece & (is_word_start | (pieces_before == 0))
    words_so_far = tf.cumsum(tf.cast(starts, tf.int32), axis=1)
    word = words_so_far - 1
    words = words_so_far[:, -1]
    first_position = tf.searchsorted(words_so_far,
                                     tf.tile(tf.range(1, size + 2)[None, :],
                                             [tf.shape(token_ids)[0], 1]), side="left")
    pieces_with_total = tf.concat(
        [pieces_before, tf.reduce_sum(tf.cast(piece, tf.int32), axis=1, keepdims=True)], axis=1)
    pieces_before_word = tf.gather(pieces_with_total, first_position, batch_dims=1)
    return piece, word, words, pieces_before_word


def mask_batch(token_ids, is_word_start, length, seed: int, row_keys,
               config: MaskingConfig, vocabulary: MaskingVocabulary):
    """Masks every row (int32 ids `[B, S]`, bool word starts, int32 real lengths `[B]`,
    int64 `row_keys` `[B]`). Returns (masked ids, bool `[B, S]` marking the masked positions)."""
    if config.masked_lm_prob == 0:
        return token_ids, tf.zeros_like(token_ids, tf.bool)
    size = tf.shape(token_ids)[1]
    piece, word_of, words, pieces_before_word = _candidates(
        token_ids, is_word_start, length, vocabulary, config.do_whole_word_mask)
    # min(max_predictions, max(1, round(length · prob))); tf.round halves to even, as Python.
    budget = tf.minimum(config.max_predictions_per_seq, tf.maximum(1, tf.cast(
        tf.round(tf.cast(length, tf.float64) * config.masked_lm_prob), tf.int32)))
    uniforms, random_ids = row_draws(seed, row_keys, size, vocabulary.vocab_size)

    columns = tf.range(size)[None, :]
    keys = tf.where(columns < words[:, None], uniforms[:, :, 0], 2.0)  # non-words sort last
    order = tf.cast(tf.argsort(keys, axis=1, stable=True), tf.int32)   # word visited at t
    cumulative = config.cumulative_ngram_probabilities()
    max_ngram = len(cumulative)
    ngrams = 1 + tf.add_n([tf.cast(uniforms[:, :, 1] >= c, tf.int32) for c in cumulative[:-1]]
                          + [tf.zeros_like(token_ids)])
    # pieces[:, t, k - 1]: the pieces of the k words from the one visited at t (fewer words
    # near the end), for k = 1..max_ngram; everything the walk reads is gathered here.
    first = tf.gather(pieces_before_word, order, batch_dims=1)
    pieces = tf.stack([tf.gather(pieces_before_word, tf.minimum(order + k, size), batch_dims=1)
                       - first for k in range(1, max_ngram + 1)], axis=2)
    spans = tf.range(1, max_ngram + 1)[None, :]

    def visit(t, covered, count):
        """Visit t of every row; `covered` marks the masked words (max_ngram past the end)."""
        active = (t < words) & (count < budget)
        word = order[:, t]
        pieces_by_span = pieces[:, t, :]
        # The longest span up to the drawn n-gram that fits the budget, else one word
        # (which is then skipped if it does not fit either).
        fits = (spans <= ngrams[:, t, None]) & (count[:, None] + pieces_by_span <= budget[:, None])
        span = tf.maximum(1, tf.reduce_max(tf.where(fits, spans, 0), axis=1))
        span_pieces = tf.gather(pieces_by_span, span - 1, batch_dims=1)
        overlaps = tf.reduce_any(tf.gather(covered, word[:, None] + spans - 1, batch_dims=1)
                                 & (spans <= span[:, None]), axis=1)
        accepted = active & (count + span_pieces <= budget) & ~overlaps
        in_span = (word_columns >= word[:, None]) & (word_columns < (word + span)[:, None])
        return (t + 1, covered | (in_span & accepted[:, None]),
                count + tf.where(accepted, span_pieces, 0))

    word_columns = tf.range(size + max_ngram)[None, :]
    _, covered, _ = tf.while_loop(
        lambda t, covered, count: tf.reduce_any((t < words) & (count < budget)), visit,
        (tf.constant(0), tf.zeros([tf.shape(token_ids)[0], size + max_ngram], tf.bool),
         tf.zeros_like(words)))
    masked = piece & tf.gather(covered, tf.maximum(word_of, 0), batch_dims=1)
    replacement = uniforms[:, :, 2]
    shown = tf.where(replacement < 0.8, vocabulary.mask_id,
                     tf.where(replacement < 0.9, token_ids, random_ids))
    return tf.where(masked, shown, token_ids), masked
