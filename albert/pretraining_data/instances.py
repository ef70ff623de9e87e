"""Pretraining instances from documents: segment pairs, sentence order, truncation.

A document is a list of segments (one per input line), each a list of token
ids. The original's rules and the distributions of its draws are kept
(target lengths, split points, label balance, random-document partners,
truncation sides, masks); its single random stream per run is split into
named streams per document and dupe round (`InstanceStreams`):

* `plan`: the target length, the split points and the labels, which depend
  on the document alone;
* `partner(k)`: which random document gives pair k its segment B, and where
  in it B starts;
* `instance(k)`: pair k's truncation and masks, then its shuffle key.

So a document's pairs are planned before any other document is read, the
partner documents they name can be fetched in a second step (a join, when
the corpus is spread over machines), and each pair is finished from its own
tokens: the bytes are the same whichever way the partners were fetched.
"""

import dataclasses
import random
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
    shuffle_key: int = 0            # the record's place in the written order (64 bits)


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


class InstanceStreams:
    """The random streams of one document in one dupe round (see the module docstring),
    each a `random.Random` seeded with `name` and the stream's own suffix."""

    def __init__(self, name: str):
        self.name = name
        self.plan = random.Random(name)

    def partner(self, number: int) -> random.Random:
        return random.Random(f"{self.name}/partner/{number}")

    def instance(self, number: int) -> random.Random:
        return random.Random(f"{self.name}/instance/{number}")


@dataclasses.dataclass
class PlannedPair:
    """Pair `number` of a document before its partner is read and before masking."""

    number: int
    tokens_a: List[int]
    tokens_b: List[int]          # empty while a random document's tokens are still to come
    is_random_next: bool
    random_document: bool
    target_b_length: int = 0     # with random_document: B takes at least this many tokens


def plan_pairs(document: Sequence[Sequence[int]], rng, config: InstanceConfig) -> List[PlannedPair]:
    """The pairs of one pass over `document`, in the original's rules and draw order.

    One target length per document (the full `max_seq_length - 3`, or with
    `short_seq_prob` a random one); segments are gathered until the target
    is reached; A is a random prefix of the chunk. A one-segment chunk, or
    with `random_next_sentence` a coin flip, takes B from a random other
    document (label 1; `partner_tokens` fills it) and puts the unused
    segments back; otherwise B is the rest of the chunk, swapped with A on a
    coin flip in sentence-order mode (label 1). QUIRK kept by default: a
    one-segment chunk always gets a random-document negative, even in
    sentence-order mode (`single_segment_random_document=False` skips such
    chunks instead).
    """
    max_num_tokens = config.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    pairs: List[PlannedPair] = []
    chunk: List[Sequence[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        chunk.append(segment)
        chunk_length += len(segment)
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [token for part in chunk[:a_end] for token in part]
            if len(chunk) == 1 and not config.single_segment_random_document:
                chunk, chunk_length = [], 0
                i += 1
                continue
            if len(chunk) == 1 or (config.random_next_sentence and rng.random() < 0.5):
                pairs.append(PlannedPair(len(pairs), tokens_a, [], True, True,
                                         target_seq_length - len(tokens_a)))
                i -= len(chunk) - a_end  # put the unused segments back
            else:
                tokens_b = [token for part in chunk[a_end:] for token in part]
                swapped = not config.random_next_sentence and rng.random() < 0.5
                if swapped:
                    tokens_a, tokens_b = tokens_b, tokens_a
                pairs.append(PlannedPair(len(pairs), tokens_a, tokens_b, swapped, False))
            chunk = []
            chunk_length = 0
        i += 1
    return pairs


def choose_partner(rng, document_index: int, num_documents: int) -> int:
    """The random document of a pair: uniform over the corpus, another than the pair's own
    (up to 10 tries, as the original; a corpus of one document gives its own)."""
    for _ in range(10):
        partner = rng.randint(0, num_documents - 1)
        if partner != document_index:
            break
    return partner


def partner_tokens(rng, partner: Sequence[Sequence[int]], target_b_length: int) -> List[int]:
    """B from the partner document: whole segments from a random one on, until the target.
    `rng` is the pair's partner stream after `choose_partner`."""
    tokens: List[int] = []
    for j in range(rng.randint(0, len(partner) - 1), len(partner)):
        tokens.extend(partner[j])
        if len(tokens) >= target_b_length:
            break
    return tokens


def finish_pair(pair: PlannedPair, rng, config: InstanceConfig, vocabulary: MaskingVocabulary,
                start_piece: Sequence[bool], masking_statistics: Optional[MaskingStatistics] = None,
                statistics: Optional[InstanceStatistics] = None,
                cumulative: Optional[Sequence[float]] = None) -> TrainingInstance:
    """The instance of a planned pair whose B is known: truncated, masked and given its
    shuffle key, all from `rng`, the pair's instance stream."""
    tokens_a, tokens_b = list(pair.tokens_a), list(pair.tokens_b)
    truncate_seq_pair(tokens_a, tokens_b, config.max_seq_length - 3, rng)
    cls_id, sep_id = vocabulary.cls_id, vocabulary.sep_id
    tokens = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    is_start = [start_piece[token] for token in tokens]
    masked = mask_sequence(tokens, is_start, rng, config.masking, vocabulary, masking_statistics,
                           cumulative or config.masking.cumulative_ngram_probabilities())
    if statistics is not None:
        statistics.instances += 1
        statistics.label_one += pair.is_random_next
        statistics.random_document_negatives += pair.random_document
        statistics.tokens += len(tokens)
        statistics.max_token_id = max(statistics.max_token_id, max(masked.input_ids))
    return TrainingInstance(masked.input_ids, segment_ids, masked.token_boundary,
                            masked.masked_lm_positions, masked.masked_lm_ids,
                            pair.is_random_next, pair.random_document, rng.getrandbits(64))


def create_instances_from_document(documents: Sequence[Sequence[Sequence[int]]],
                                   document_index: int, streams: InstanceStreams,
                                   config: InstanceConfig, vocabulary: MaskingVocabulary,
                                   start_piece: Sequence[bool],
                                   masking_statistics: Optional[MaskingStatistics] = None,
                                   statistics: Optional[InstanceStatistics] = None,
                                   ) -> List[TrainingInstance]:
    """All instances of one pass over `documents[document_index]`, with the whole corpus at
    hand for the random-document partners (`plan_pairs`, then each pair's partner, then
    `finish_pair`)."""
    cumulative = config.masking.cumulative_ngram_probabilities()
    instances = []
    for pair in plan_pairs(documents[document_index], streams.plan, config):
        if pair.random_document:
            rng = streams.partner(pair.number)
            partner = documents[choose_partner(rng, document_index, len(documents))]
            pair.tokens_b = partner_tokens(rng, partner, pair.target_b_length)
        instances.append(finish_pair(pair, streams.instance(pair.number), config, vocabulary,
                                     start_piece, masking_statistics, statistics, cumulative))
    return instances
