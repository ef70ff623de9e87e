import dataclasses
import random

from albert.pretraining_data.instances import (InstanceConfig, InstanceStreams,
                                               create_instances_from_document, truncate_seq_pair)
from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary

VOCABULARY = MaskingVocabulary(vocab_size=100, mask_id=4, cls_id=2, sep_id=3)
START = [True] * 100
NO_MASKING = MaskingConfig(masked_lm_prob=0)


def test_truncation_trims_the_longer_side_from_either_end():
    rng = random.Random(0)
    fronts = backs = 0
    for _ in range(200):
        a, b = list(range(10)), list(range(100, 104))
        truncate_seq_pair(a, b, 9, rng)
        assert len(a) + len(b) == 9 and b == [100, 101, 102, 103]
        fronts += a[0] != 0
        backs += a[-1] != 9
    assert fronts > 20 and backs > 20
    a, b = [1, 2, 3], [4, 5, 6]
    truncate_seq_pair(a, b, 5, random.Random(1))
    assert len(a) == 3 and len(b) == 2  # B is trimmed on ties


def test_layout_and_sentence_order_labels():
    config = InstanceConfig(max_seq_length=64, short_seq_prob=0, masking=NO_MASKING)
    documents = [[[10, 11], [12, 13, 14]], [[20], [21]]]
    seen = set()
    for seed in range(40):
        instance, = create_instances_from_document(
            documents, 0, InstanceStreams(f"test/{seed}"), config, VOCABULARY, START)
        if instance.is_random_next:  # swapped: B A
            assert instance.input_ids == [2, 12, 13, 14, 3, 10, 11, 3]
            assert instance.segment_ids == [0, 0, 0, 0, 0, 1, 1, 1]
        else:                        # in order: A B
            assert instance.input_ids == [2, 10, 11, 3, 12, 13, 14, 3]
            assert instance.segment_ids == [0, 0, 0, 0, 1, 1, 1, 1]
        assert instance.token_boundary == [1] * 8
        assert not instance.random_document
        seen.add(instance.is_random_next)
    assert seen == {True, False}


def test_one_segment_chunks_take_a_random_document_unless_disabled():
    documents = [[[10, 11, 12]], [[20, 21], [22]]]
    config = InstanceConfig(max_seq_length=64, short_seq_prob=0, masking=NO_MASKING)
    instance, = create_instances_from_document(documents, 0, InstanceStreams("test/0"), config,
                                               VOCABULARY, START)
    assert instance.is_random_next and instance.random_document  # the original's quirk
    assert instance.input_ids[:5] == [2, 10, 11, 12, 3]
    assert set(instance.input_ids[5:-1]) <= {20, 21, 22}
    skipping = InstanceConfig(max_seq_length=64, short_seq_prob=0, masking=NO_MASKING,
                              single_segment_random_document=False)
    assert create_instances_from_document(documents, 0, InstanceStreams("test/0"), skipping,
                                          VOCABULARY, START) == []
    next_sentence = InstanceConfig(max_seq_length=64, short_seq_prob=0, masking=NO_MASKING,
                                   random_next_sentence=True)
    instance, = create_instances_from_document(documents, 0, InstanceStreams("test/0"),
                                               next_sentence, VOCABULARY, START)
    assert instance.is_random_next and instance.random_document
    assert create_instances_from_document(
        documents, 0, InstanceStreams("test/0"),
        dataclasses.replace(next_sentence, single_segment_random_document=False),
        VOCABULARY, START) == []


def test_next_sentence_mode_never_swaps_and_puts_unused_segments_back():
    documents = [[[10, 11], [12, 13]], [[20], [21]], [[30], [31]]]
    config = InstanceConfig(max_seq_length=64, short_seq_prob=0, random_next_sentence=True,
                            masking=NO_MASKING)
    labels = set()
    for seed in range(60):
        instances = create_instances_from_document(
            documents, 0, InstanceStreams(f"test/{seed}"), config, VOCABULARY, START)
        first = instances[0]
        labels.add(first.is_random_next)
        if first.is_random_next:
            # B came from another document; the unused segment [12, 13] was put
            # back and becomes the next chunk (one segment: random B again).
            assert first.random_document and first.input_ids[1:4] == [10, 11, 3]
            assert set(first.input_ids[4:-1]) <= {20, 21, 30, 31}
            second, = instances[1:]
            assert second.random_document and second.input_ids[1:4] == [12, 13, 3]
        else:
            assert instances == [first]
            assert first.input_ids == [2, 10, 11, 3, 12, 13, 3]
    assert labels == {True, False}
