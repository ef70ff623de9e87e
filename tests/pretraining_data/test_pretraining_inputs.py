"""Pretraining features: parsing with the schema, dynamic masking, the data contract."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert.pretraining_data.instances import InstanceConfig
from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary
from albert.pretraining_data.creation import DataConfig, create_pretraining_data
from albert.pretraining_data.inputs import DynamicMasking, PretrainingParser
from albert.pretraining_data.schema import (PretrainingSchema, expand_record_patterns,
                                            load_data_contract)
from albert.errors import InputError
from pretraining_records import read_records

SEQ, PREDICTIONS = 64, 10


@pytest.fixture(scope="module")
def records(tmp_path_factory, synthetic_corpus):
    corpus, model = synthetic_corpus
    directory = tmp_path_factory.mktemp("records")
    config = DataConfig(instance=InstanceConfig(max_seq_length=SEQ, masking=MaskingConfig(
        max_predictions_per_seq=PREDICTIONS)), spm_model_file=model, dupe_factor=2)
    create_pretraining_data(corpus, str(directory / "data.tfrecord@3"), config, show_progress=False)
    return sorted(str(p) for p in directory.glob("data.tfrecord-*"))


def _parse(files, parser, count=400):
    dataset = tf.data.TFRecordDataset(files).take(count).enumerate().batch(count)
    positions, batch = next(iter(dataset))
    return {k: v.numpy() for k, v in parser(batch, positions).items()}


def test_the_summary_is_the_contract_of_the_files(records, synthetic_corpus):
    from albert.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(synthetic_corpus[1])
    contract = load_data_contract(records)
    assert (contract.max_seq_length, contract.max_predictions_per_seq) == (SEQ, PREDICTIONS)
    assert contract.vocab_size == tokenizer.vocab_size == 1200
    assert (contract.special_ids.cls, contract.special_ids.sep, contract.special_ids.mask) == (
        tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
    assert contract.has_token_boundary
    assert contract.record_counts == [sum(1 for _ in tf.data.TFRecordDataset(f)) for f in records]
    largest = max(int(r["input_ids"].max()) for r in read_records(records, SEQ, PREDICTIONS))
    assert contract.max_token_id == largest


def test_a_record_glob_leaves_out_the_files_written_beside_the_records(records):
    directory = os.path.dirname(records[0])
    side_files = sorted(glob.glob(os.path.join(directory, "data.tfrecord.*")))
    assert [os.path.basename(p) for p in side_files] == ["data.tfrecord.documents.npz",
                                                         "data.tfrecord.summary.json"]
    pattern = os.path.join(directory, "data.tfrecord*")
    assert expand_record_patterns(pattern) == records
    assert load_data_contract(expand_record_patterns(pattern)).record_counts == \
        load_data_contract(records).record_counts
    # Named explicitly, a file is taken as given (and refused as a record file).
    assert expand_record_patterns(side_files[1]) == [side_files[1]]


def test_files_without_a_summary_are_described_from_their_records(tmp_path, records):
    legacy = tmp_path / "legacy.tfrecord"
    spec = PretrainingSchema(SEQ, PREDICTIONS).features(with_token_boundary=False)
    with tf.io.TFRecordWriter(str(legacy)) as writer:
        for record in tf.data.TFRecordDataset(records[0]).take(25):
            example = tf.train.Example.FromString(record.numpy())
            del example.features.feature["token_boundary"]
            assert set(example.features.feature) == set(spec)
            writer.write(example.SerializeToString())
    contract = load_data_contract([str(legacy)])
    assert contract.record_counts == [25]
    assert not contract.has_token_boundary and contract.special_ids is None
    # Records without token_boundary parse when masks are not redrawn.
    features = _parse([str(legacy)], PretrainingParser(contract.schema), count=25)
    assert features["input_word_ids"].shape == (25, SEQ) and "token_boundary" not in features


def test_a_stale_or_mixed_contract_is_refused(tmp_path, records):
    summary = json.loads(open(records[0].rsplit("-", 3)[0] + ".summary.json").read())
    assert summary["max_seq_length"] == SEQ
    stale = tmp_path / "data.summary.json"
    copy = tmp_path / "data-00000-of-00001"
    copy.write_bytes(open(records[0], "rb").read())
    stale.write_text(json.dumps(dict(summary, max_seq_length=128,
                                     record_counts={copy.name: 1})))
    with pytest.raises(InputError, match="says max_seq_length = 128, but the records"):
        load_data_contract([str(copy)])
    corrupt = tmp_path / "corrupt.tfrecord"
    corrupt.write_bytes(b"\x00\x01garbage" * 50)
    with pytest.raises(InputError, match="corrupt"):
        load_data_contract([str(corrupt)])


def test_parsed_features_are_the_model_inputs(records):
    features = _parse(records[:1], PretrainingParser(PretrainingSchema(SEQ, PREDICTIONS)))
    assert set(features) == {"input_word_ids", "input_mask", "input_type_ids",
                             "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                             "next_sentence_labels"}
    assert features["input_word_ids"].dtype == np.int32
    assert features["masked_lm_weights"].dtype == np.float32


def test_dynamic_masks_follow_the_creation_algorithm_and_change_each_read(records):
    contract = load_data_contract(records)
    ids = contract.special_ids
    masking = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=PREDICTIONS)
    vocabulary = MaskingVocabulary(contract.vocab_size, ids.mask, ids.cls, ids.sep)
    dynamic = DynamicMasking(masking, vocabulary, seed=5)
    stored = read_records(records[:1], SEQ, PREDICTIONS)
    assert len(stored) >= 1000
    counts = {"mask": 0, "kept": 0, "random": 0}
    filled = 0
    for row, record in enumerate(stored):
        args = [record[k] for k in ("input_ids", "input_mask", "token_boundary",
                                    "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")]
        original = args[0].copy()
        real = args[5] > 0
        original[args[3][real]] = args[4][real]
        first = dynamic.remask(row, *args)
        second = dynamic.remask(row + 10**6, *args)   # the same record read again later
        assert all(np.array_equal(a, b) for a, b in zip(first, dynamic.remask(row, *args)))
        new_ids, positions, labels, weights = first
        count = int(weights.sum())
        length = int(args[1].sum())
        budget = min(PREDICTIONS, max(1, round(length * 0.15)))
        assert count <= budget
        filled += count == budget
        assert list(labels[:count]) == list(original[positions[:count]])
        unmasked = np.ones(len(new_ids), bool)
        unmasked[positions[:count]] = False
        assert np.array_equal(new_ids[unmasked], original[unmasked])
        assert not {ids.cls, ids.sep} & set(original[positions[:count]].tolist())
        shown = new_ids[positions[:count]]
        counts["mask"] += int(np.sum(shown == ids.mask))
        counts["kept"] += int(np.sum((shown != ids.mask) & (shown == labels[:count])))
        counts["random"] += int(np.sum((shown != ids.mask) & (shown != labels[:count])))
        if row < 50:
            assert not np.array_equal(first[1], second[1])  # fresh masks on every read
    masked = sum(counts.values())
    assert counts["mask"] / masked == pytest.approx(0.8, abs=0.03)
    assert counts["kept"] / masked == pytest.approx(0.1, abs=0.03)
    assert filled / len(stored) > 0.99


def test_dynamic_masking_in_the_parser_is_seeded_by_stream_position(records):
    contract = load_data_contract(records)
    ids = contract.special_ids
    vocabulary = MaskingVocabulary(contract.vocab_size, ids.mask, ids.cls, ids.sep)

    def masks(seed, offset=0):
        parser = PretrainingParser(contract.schema, DynamicMasking(
            MaskingConfig(max_predictions_per_seq=PREDICTIONS), vocabulary, seed))
        batch = next(iter(tf.data.TFRecordDataset(records[:1]).batch(16)))
        return parser(batch, tf.range(offset, offset + 16, dtype=tf.int64))["masked_lm_positions"]

    assert np.array_equal(masks(1), masks(1))
    assert not np.array_equal(masks(1), masks(2))
    assert not np.array_equal(masks(1), masks(1, offset=1000))


def test_the_input_pipeline_draws_the_masks_of_the_python_definition_in_graph_ops(records):
    """Dynamic masks in TensorFlow ops: no Python in the graph, the masks of `remask`."""
    contract = load_data_contract(records)
    ids = contract.special_ids
    vocabulary = MaskingVocabulary(contract.vocab_size, ids.mask, ids.cls, ids.sep)
    dynamic = DynamicMasking(MaskingConfig(masked_lm_prob=0.2, max_predictions_per_seq=PREDICTIONS),
                             vocabulary, seed=31)
    parser = PretrainingParser(contract.schema, dynamic)
    # Positions past 2**32 and of every digit count exercise the seeding of the generator.
    positions = tf.constant([0, 9, 10, 99_999, 2**32 + 5, 2**40 - 1, 123_456_789_012, 77] * 8,
                            tf.int64)
    dataset = tf.data.TFRecordDataset(records[:1]).batch(64).take(1)
    dataset = dataset.map(lambda batch: parser(batch, positions))
    graph = tf.compat.v1.GraphDef.FromString(
        tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy())
    function_ops = {op.op for function in graph.library.function for op in function.node_def}
    assert "StatelessWhile" in function_ops or "While" in function_ops  # the masks are in it
    assert not function_ops & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}, function_ops
    features = next(iter(dataset))
    stored = read_records(records[:1], SEQ, PREDICTIONS)[:64]
    for row, record in enumerate(stored):
        expected = dynamic.remask(
            int(positions[row]), *(record[k] for k in (
                "input_ids", "input_mask", "token_boundary", "masked_lm_positions",
                "masked_lm_ids", "masked_lm_weights")))
        actual = [features[name][row].numpy() for name in (
            "input_word_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")]
        for want, got in zip(expected, actual):
            np.testing.assert_array_equal(got, want)


def test_stored_masks_repeated_or_out_of_range_are_undone_alike_in_ops_and_python():
    """A record from another tool may repeat a stored position (the last label wins) or
    store one past the sequence (ignored): the graph ops and `remask` agree on both."""
    ids = np.array([[2, 11, 4, 12, 4, 13, 3, 14, 15, 3, 0, 0]], np.int32)
    features = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                "token_boundary": np.ones_like(ids),
                "masked_lm_positions": np.array([[2, 4, 2, 20]], np.int32),
                "masked_lm_ids": np.array([[30, 31, 32, 33]], np.int32),
                "masked_lm_weights": np.ones([1, 4], np.float32)}
    dynamic = DynamicMasking(MaskingConfig(masked_lm_prob=0.3, max_predictions_per_seq=4),
                             MaskingVocabulary(100, 4, 2, 3), seed=1)
    for position in range(5):
        drawn = dynamic(dict(features), tf.constant([position], tf.int64))
        expected = dynamic.remask(position, *(features[name][0] for name in (
            "input_ids", "input_mask", "token_boundary", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights")))
        for name, want in zip(("input_ids", "masked_lm_positions", "masked_lm_ids",
                               "masked_lm_weights"), expected):
            np.testing.assert_array_equal(drawn[name][0].numpy(), want)
        # Position 2 was restored to its last stored label (32), not to 30 + 32.
        restored = np.where(drawn["masked_lm_weights"][0].numpy() > 0,
                            drawn["masked_lm_ids"][0].numpy(), -1)
        assert 62 not in restored and 30 not in restored
