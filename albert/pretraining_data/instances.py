"""Pretraining instances from documents: segment pairs, sentence order, truncation.

A document is a list of segments (one per input line), each a list of token
ids. The draw order of the original is kept, so the distributions (target
lengths, split points, label balance, truncation sides) are the original's.
"""

import dataclasses
from typing import List, Optional, Sequence

from albert.pretraining_data.masking import (MaskingConfig, MaskingStatistics, MaskingVocabulary,
                                 mask_sequence)


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    max_seq_length: int = 512
    short_seq_prob: float = 0.1
    # False: sentence-order prediction (ALBERT); True: BERT's next-sentence prediction.
    random_next_sentence: bool = False
    # QUIRK of the original, kept by default: a chunk of one segment gets B
    # from a random document, labelled 1, in both modes (in sentence-order mode
    # an NSP-style pair; in next-sentence mode a forced negative that lifts the
    # label-1 share above the coin's 0.5). False skips such chunks, so every
    # pair is a real sentence-order pair, or a fair coin flip in NSP mode.
    single_segment_random_document: bool = True
    masking: MaskingConfig = MaskingConfig()


@dataclasses.dataclass
class TrainingInstance:
    input_ids: List[int]            # [CLS] A [SEP] B [SEP], after masking, unpadded
    segment_ids: List[int]
    token_boundary: List[int]
    masked_lm_positions: List[int]
    masked_lm_ids: List[int]
    is_random_next: bool            # stored as next_sentence_labels: 1 = swapped / random
    random_document: bool           # B came from another document (NSP-style negative)


@dataclasses.dataclass
class InstanceStatistics:
    instances: int = 0
    label_one: int = 0
    random_document_negatives: int = 0
    tokens: int = 0  # non-padding tokens of all instances
    max_token_id: int = 0  # largest id written (masking's random replacements included)

    def merge(self, other: "InstanceStatistics") -> None:
        self.instances += other.instances
        self.label_one += other.label_one
        self.random_document_negatives += other.random_document_negatives
        self.tokens += other.tokens
        self.max_token_id = max(self.max_token_id, other.max_token_id)


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int, rng) -> None:
    """Trims the longer list (B on ties) from the front or back at random until they fit."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def create_instances_from_document(documents: Sequence[Sequence[Sequence[int]]], document_index: int,
                                   rng, config: InstanceConfig, vocabulary: MaskingVocabulary,
                                   start_piece: Sequence[bool],
                                   masking_statistics: Optional[MaskingStatistics] = None,
                                   statistics: Optional[InstanceStatistics] = None,
                                   ) -> List[TrainingInstance]:
    """All instances of one pass over `documents[document_index]`.

    Rules, in the original's order: one target length per document (the full
    `max_seq_length - 3`, or with `short_seq_prob` a random one); segments are
    gathered until the target is reached; A is a random prefix of the chunk.
    A one-segment chunk, or with `random_next_sentence` a coin flip, takes B
    from a random other document (label 1) and puts the unused segments
    back; otherwise B is the rest of the chunk, swapped with A on a coin flip
    in sentence-order mode (label 1) — QUIRK kept by default: a one-segment
    chunk always gets a random-document negative, even in sentence-order mode
    (`single_segment_random_document=False` skips such chunks instead).
    """
    document = documents[document_index]
    max_num_tokens = config.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    cls_id, sep_id = vocabulary.cls_id, vocabulary.sep_id
    cumulative = config.masking.cumulative_ngram_probabilities()

    instances = []
    chunk: List[Sequence[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        chunk.append(segment)
        chunk_length += len(segment)
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [token for part in chunk[:a_end] for token in part]
                tokens_b: List[int] = []
                random_document = False
                if len(chunk) == 1 and not config.single_segment_random_document:
                    chunk, chunk_length = [], 0
                    i += 1
                    continue
                if len(chunk) == 1 or (config.random_next_sentence and rng.random() < 0.5):
                    is_random_next = random_document = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_index = rng.randint(0, len(documents) - 1)
                        if random_index != document_index:
                            break
                    other = documents[random_index]
                    for j in range(rng.randint(0, len(other) - 1), len(other)):
                        tokens_b.extend(other[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    i -= len(chunk) - a_end  # put the unused segments back
                elif not config.random_next_sentence and rng.random() < 0.5:
                    is_random_next = True
                    tokens_b = [token for part in chunk[a_end:] for token in part]
                    tokens_a, tokens_b = tokens_b, tokens_a
                else:
                    is_random_next = False
                    tokens_b = [token for part in chunk[a_end:] for token in part]
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)

                tokens = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                is_start = [start_piece[token] for token in tokens]
                masked = mask_sequence(tokens, is_start, rng, config.masking, vocabulary,
                                       masking_statistics, cumulative)
                instances.append(TrainingInstance(
                    masked.input_ids, segment_ids, masked.token_boundary,
                    masked.masked_lm_positions, masked.masked_lm_ids, is_random_next,
                    random_document))
                if statistics is not None:
                    statistics.instances += 1
                    statistics.label_one += is_random_next
                    statistics.random_document_negatives += random_document
                    statistics.tokens += len(tokens)
                    statistics.max_token_id = max(statistics.max_token_id, max(masked.input_ids))
            chunk = []
            chunk_length = 0
        i += 1
    return instances
