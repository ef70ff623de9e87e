"""The pretraining input pipeline: sharding, record checks, dynamic masking."""


import numpy as np
import pytest

from albert.data.inputs import DynamicMasking, check_record_files, pretraining_dataset
from albert.data.instances import InstanceConfig
from albert.data.masking import MaskingConfig, MaskingVocabulary
from albert.data.pretraining_data import DataConfig, create_pretraining_data
from albert.errors import InputError

SEQ, PREDICTIONS = 64, 10


@pytest.fixture(scope="module")
def records(tmp_path_factory, synthetic_corpus):
    corpus, model = synthetic_corpus
    directory = tmp_path_factory.mktemp("records")
    config = DataConfig(instance=InstanceConfig(max_seq_length=SEQ, masking=MaskingConfig(
        max_predictions_per_seq=PREDICTIONS)), spm_model_file=model, dupe_factor=2)
    create_pretraining_data(corpus, str(directory / "data.tfrecord@3"), config, show_progress=False)
    return sorted(str(p) for p in directory.glob("data.tfrecord-*"))


def _take(dataset, batches):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(batches)]


def test_worker_shards_together_equal_the_single_process_batches(records):
    whole = _take(pretraining_dataset(records, SEQ, PREDICTIONS, 8, True, seed=3), 5)
    shards = [_take(pretraining_dataset(records, SEQ, PREDICTIONS, 4, True, seed=3, num_shards=2,
                                        shard_index=i), 5) for i in range(2)]
    for step in range(5):
        union = np.concatenate([shards[0][step]["input_word_ids"], shards[1][step]["input_word_ids"]])
        assert sorted(map(tuple, union)) == sorted(map(tuple, whole[step]["input_word_ids"]))


def test_training_order_is_a_function_of_the_seed(records):
    first = _take(pretraining_dataset(records, SEQ, PREDICTIONS, 8, True, seed=3), 3)
    again = _take(pretraining_dataset(records, SEQ, PREDICTIONS, 8, True, seed=3), 3)
    other = _take(pretraining_dataset(records, SEQ, PREDICTIONS, 8, True, seed=4), 3)
    assert all(np.array_equal(a["input_word_ids"], b["input_word_ids"]) for a, b in zip(first, again))
    assert not all(np.array_equal(a["input_word_ids"], b["input_word_ids"]) for a, b in zip(first, other))
    assert set(first[0]) == {"input_word_ids", "input_mask", "input_type_ids", "token_boundary",
                             "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                             "next_sentence_labels"}
    assert first[0]["input_word_ids"].dtype == np.int32


def test_record_checks_name_the_problem(tmp_path, records):
    check_record_files(records, SEQ, PREDICTIONS)
    with pytest.raises(InputError, match=r"input_ids has 64 values but --max_seq_length gives 128"):
        check_record_files(records, 128, PREDICTIONS)
    with pytest.raises(InputError, match=r"masked_lm_positions has 10 values but "
                                         r"--max_predictions_per_seq gives 20"):
        check_record_files(records, SEQ, 20)
    corrupt = tmp_path / "corrupt.tfrecord"
    corrupt.write_bytes(b"\x00\x01garbage" * 50)
    with pytest.raises(InputError, match="not a readable TFRecord file"):
        check_record_files([str(corrupt)], SEQ, PREDICTIONS)
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="holds no records"):
        check_record_files([str(empty)], SEQ, PREDICTIONS)


def test_dynamic_masks_follow_the_creation_algorithm_and_change_each_read(records):
    masking = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=PREDICTIONS)
    vocabulary = MaskingVocabulary(vocab_size=1200, mask_id=4, cls_id=2, sep_id=3)
    dynamic = DynamicMasking(masking, vocabulary, seed=5)
    stored = _take(pretraining_dataset(records[:1], SEQ, PREDICTIONS, 64, False), 200)
    stored = {k: np.concatenate([b[k] for b in stored]) for k in stored[0]}
    assert len(stored["input_mask"]) >= 1000
    counts = {"mask": 0, "kept": 0, "random": 0}
    filled = total = 0
    for row in range(len(stored["input_mask"])):
        args = [stored[k][row] for k in ("input_word_ids", "input_mask", "token_boundary",
                                         "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")]
        original = args[0].copy()
        real = args[5] > 0
        original[args[3][real]] = args[4][real]
        first = dynamic.remask(row, *args)
        second = dynamic.remask(row + 10**6, *args)   # the same record read again later
        ids, positions, labels, weights = first
        count = int(weights.sum())
        length = int(args[1].sum())
        budget = min(PREDICTIONS, max(1, round(length * 0.15)))
        assert count <= budget
        filled += count == budget
        total += 1
        assert list(labels[:count]) == list(original[positions[:count]])
        unmasked = np.ones(len(ids), bool)
        unmasked[positions[:count]] = False
        assert np.array_equal(ids[unmasked], original[unmasked])
        shown = ids[positions[:count]]
        counts["mask"] += int(np.sum(shown == 4))
        counts["kept"] += int(np.sum((shown != 4) & (shown == labels[:count])))
        counts["random"] += int(np.sum((shown != 4) & (shown != labels[:count])))
        if row < 50:
            assert not np.array_equal(first[1], second[1])  # fresh masks on every read
    masked = sum(counts.values())
    assert counts["mask"] / masked == pytest.approx(0.8, abs=0.03)
    assert counts["kept"] / masked == pytest.approx(0.1, abs=0.03)
    assert filled / total > 0.99


def test_dynamic_masking_in_the_pipeline_is_seeded_by_stream_position(records):
    masking = MaskingConfig(max_predictions_per_seq=PREDICTIONS)
    vocabulary = MaskingVocabulary(vocab_size=1200, mask_id=4, cls_id=2, sep_id=3)
    def batches(seed):
        return _take(pretraining_dataset(records, SEQ, PREDICTIONS, 8, True, seed=3,
                                         dynamic_masking=DynamicMasking(masking, vocabulary, seed)), 3)
    a, b, c = batches(1), batches(1), batches(2)
    assert all(np.array_equal(x["masked_lm_positions"], y["masked_lm_positions"]) for x, y in zip(a, b))
    assert not all(np.array_equal(x["masked_lm_positions"], y["masked_lm_positions"]) for x, y in zip(a, c))
