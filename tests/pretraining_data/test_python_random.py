"""Python's random.Random and mask_sequence in TensorFlow ops give Python's numbers exactly."""

import hashlib
import random

import numpy as np
import pytest
import tensorflow as tf

from albert.pretraining_data import python_random
from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary, mask_sequence
from albert.pretraining_data.masking_ops import mask_batch
from albert.pretraining_data.python_random import Generators

TEXTS = ["albert-dynamic-masking/12345/0", "albert-dynamic-masking/-3/4294967301",
         "albert-dynamic-masking/7/1099511627775", "a", "é" * 55 + "x"]
MODES = {"eager": lambda f: f, "graph": tf.function}


@pytest.mark.parametrize("mode", MODES)
def test_sha512_of_one_block_is_hashlibs(mode):
    texts = [b"", b"abc", bytes(range(111))]
    blocks = []
    for text in texts:  # FIPS 180-4 padding of a message that fits one block
        padded = text + b"\x80" + b"\0" * (111 - len(text)) + (8 * len(text)).to_bytes(16, "big")
        blocks.append(np.frombuffer(padded, ">u8").astype(np.uint64))
    digest = MODES[mode](python_random.sha512_one_block)(tf.constant(np.stack(blocks)))
    for text, words in zip(texts, digest.numpy()):
        assert words.astype(">u8").tobytes() == hashlib.sha512(text).digest()


@pytest.mark.parametrize("mode", MODES)
def test_the_generators_draw_what_python_seeded_with_the_same_text_draws(mode):
    def draws(texts):
        generators = Generators.seeded(texts)
        every = tf.ones(tf.shape(texts), tf.bool)

        def draw_word(i, state, index, words):
            generators.state, generators.index = state, index
            words = words.write(i, generators.uint32(every))
            return i + 1, generators.state, generators.index, words

        _, generators.state, generators.index, words = tf.while_loop(  # 700 words: one refill
            lambda i, *_: i < 700, draw_word,
            (0, generators.state, generators.index, tf.TensorArray(tf.uint64, size=700)))
        words = tf.transpose(words.stack())
        floats = generators.random(every)
        below = generators.below(tf.constant([2, 3, 30000, 1, 2**31], tf.int64), every)
        some = tf.constant([True, False, True, False, True])
        later = generators.random(some)  # inactive rows do not advance
        return words, floats, below, later, generators.random(every)

    words, floats, below, later, last = MODES[mode](draws)(tf.constant(TEXTS))
    for row, text in enumerate(TEXTS):
        rng = random.Random(text)
        assert words[row].numpy().tolist() == [rng.getrandbits(32) for _ in range(700)]
        assert floats[row].numpy() == rng.random()
        assert below[row].numpy() == rng._randbelow([2, 3, 30000, 1, 2**31][row])
        if row % 2 == 0:
            assert later[row].numpy() == rng.random()
        assert last[row].numpy() == rng.random()


def _batch(rows, size, seed):
    state = np.random.RandomState(seed)
    ids = np.zeros([rows, size], np.int32)
    starts = np.zeros([rows, size], bool)
    lengths = state.randint(3, size + 1, rows)
    for row, length in enumerate(lengths):
        first = state.randint(1, max(2, length - 2))
        sequence = ([2] + list(state.randint(5, 3000, first)) + [3]
                    + list(state.randint(5, 3000, size)))[:length - 1] + [3]
        ids[row, :length] = sequence
        starts[row, :length] = state.rand(length) < 0.6
    return ids, starts, lengths.astype(np.int32)


@pytest.mark.parametrize("config", [
    MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=10),
    MaskingConfig(masked_lm_prob=0.45, max_predictions_per_seq=20, favor_shorter_ngram=False),
    MaskingConfig(masked_lm_prob=0.2, max_predictions_per_seq=20, do_whole_word_mask=False,
                  ngram=1),
    MaskingConfig(masked_lm_prob=0.0)], ids=["default", "long_ngrams", "pieces", "none"])
def test_mask_batch_masks_every_row_as_mask_sequence_does(config):
    vocabulary = MaskingVocabulary(vocab_size=3000, mask_id=4, cls_id=2, sep_id=3)
    ids, starts, lengths = _batch(24, 48, seed=len(str(config)))
    texts = [f"albert-dynamic-masking/5/{row * 7919}" for row in range(len(ids))]

    @tf.function
    def masks(texts):
        return mask_batch(tf.constant(ids), tf.constant(starts), tf.constant(lengths),
                          Generators.seeded(texts), config, vocabulary)

    output, masked = (value.numpy() for value in masks(tf.constant(texts)))
    for row, length in enumerate(lengths):
        expected = mask_sequence(ids[row, :length].tolist(), starts[row, :length].tolist(),
                                 random.Random(texts[row]), config, vocabulary)
        assert output[row, :length].tolist() == expected.input_ids
        assert np.flatnonzero(masked[row]).tolist() == expected.masked_lm_positions
        assert (output[row, length:] == ids[row, length:]).all()
