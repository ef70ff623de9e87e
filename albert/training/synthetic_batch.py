"""A pretraining batch of random tokens, for the speed and memory measurements.

It has every feature the record parser hands the training step, with the
record's shapes, so a timed step does the same work as one on real data. The
token values do not change the time of a step; they are random so that no
cache or shortcut can favour one implementation.
"""

import numpy as np

from albert.modeling.encoder import DROPOUT_SEEDS

# Ids 0-4 are the special tokens of ALBERT's vocabulary; ordinary tokens come after.
FIRST_ORDINARY_ID = 5
MASK_ID = 4


def synthetic_batch(config, batch_size: int, seq_length: int, predictions: int,
                    seed: int = 0) -> dict:
    """`predictions` distinct positions per row (never the first or last) are masked as the
    data does: the input shows [MASK] there and the labels hold the original tokens.
    The second half of each row is segment B."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(FIRST_ORDINARY_ID, config.vocab_size, (batch_size, seq_length)).astype("int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq_length - 1), predictions,
                                             replace=False) for _ in range(batch_size)]), axis=1)
    labels = np.take_along_axis(ids, positions, axis=1)
    masked = ids.copy()
    np.put_along_axis(masked, positions, MASK_ID, axis=1)
    type_ids = np.zeros_like(ids)
    type_ids[:, seq_length // 2:] = 1
    return {"input_word_ids": masked, "input_mask": np.ones_like(ids), "input_type_ids": type_ids,
            "masked_lm_positions": positions.astype("int32"), "masked_lm_ids": labels,
            "masked_lm_weights": np.ones(positions.shape, "float32"),
            "next_sentence_labels": rng.integers(0, 2, (batch_size, 1)).astype("int32"),
            DROPOUT_SEEDS: rng.integers(0, 2 ** 31 - 1, batch_size).astype("int32")}
