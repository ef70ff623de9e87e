"""Pretraining features: parsing with the schema, dynamic masking, the data contract."""

import dataclasses
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
from pretraining_records import MASK_FEATURES, original_ids, read_records, redraw

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


def _dynamic(records, masked_lm_prob=0.15, seed=5):
    contract = load_data_contract(records)
    ids = contract.special_ids
    return DynamicMasking(MaskingConfig(masked_lm_prob=masked_lm_prob,
                                        max_predictions_per_seq=PREDICTIONS),
                          MaskingVocabulary(contract.vocab_size, ids.mask, ids.cls, ids.sep), seed)


def _masked_runs(record):
    """Lengths of the runs of consecutive masked positions (spans, and spans that touch)."""
    masked = np.zeros(len(record["input_ids"]), bool)
    real = record["masked_lm_weights"] > 0
    masked[record["masked_lm_positions"][real]] = True
    edges = np.diff(np.concatenate([[0], masked.astype(int), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


# Slow tier (about 27 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_dynamic_masks_follow_the_masking_rules_and_change_each_read(records):
    """Budget, whole words, no position twice, 80/10/10, never [CLS], [SEP] or padding."""
    dynamic = _dynamic(records)
    ids = load_data_contract(records).special_ids
    stored = read_records(records[:1], SEQ, PREDICTIONS)
    assert len(stored) >= 1000
    positions = np.arange(len(stored))
    first = redraw(dynamic, stored, positions)
    again = redraw(dynamic, stored, positions)
    later = redraw(dynamic, stored, positions + 10**6)   # the same records read again later
    counts = {"mask": 0, "kept": 0, "random": 0}
    filled = 0
    for row, (record, drawn) in enumerate(zip(stored, first)):
        assert all(np.array_equal(drawn[k], again[row][k]) for k in drawn)
        original = original_ids(record)
        count = int(drawn["masked_lm_weights"].sum())
        assert np.all(drawn["masked_lm_weights"][count:] == 0)
        positions_drawn = drawn["masked_lm_positions"][:count]
        length = int(record["input_mask"].sum())
        budget = min(PREDICTIONS, max(1, round(length * 0.15)))
        assert count <= budget
        filled += count == budget
        assert np.all(np.diff(positions_drawn) > 0) and np.all(positions_drawn < length)
        assert list(drawn["masked_lm_ids"][:count]) == list(original[positions_drawn])
        unmasked = np.ones(SEQ, bool)
        unmasked[positions_drawn] = False
        assert np.array_equal(drawn["input_ids"][unmasked], original[unmasked])
        assert not {ids.cls, ids.sep} & set(original[positions_drawn].tolist())
        # Whole words: a masked piece's word is masked from its start piece to its end.
        starts = record["token_boundary"].astype(bool) | np.isin(original, [ids.cls, ids.sep])
        masked = ~unmasked
        for position in positions_drawn:
            word_end = position + 1
            while word_end < length and not starts[word_end]:
                word_end += 1
            word_start = position
            while word_start > 0 and not starts[word_start] and original[word_start - 1] not in (
                    ids.cls, ids.sep):
                word_start -= 1
            assert masked[word_start:word_end].all(), (row, position)
        shown = drawn["input_ids"][positions_drawn]
        labels = drawn["masked_lm_ids"][:count]
        counts["mask"] += int(np.sum(shown == ids.mask))
        counts["kept"] += int(np.sum((shown != ids.mask) & (shown == labels)))
        counts["random"] += int(np.sum((shown != ids.mask) & (shown != labels)))
    masked = sum(counts.values())
    assert counts["mask"] / masked == pytest.approx(0.8, abs=0.03)
    assert counts["kept"] / masked == pytest.approx(0.1, abs=0.03)
    assert filled / len(stored) > 0.99
    changed = sum(not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])
                  for a, b in zip(first, later))
    assert changed / len(stored) > 0.9  # fresh masks on every read


# Slow tier: about 30 s, moved to keep the default suite within 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_dynamic_masks_have_the_statistics_of_the_masks_written_at_creation(records):
    """The same records, masked by create_pretraining_data and redrawn in the pipeline: the
    count per record, where the masks fall and the span lengths agree within sampling error
    (about 57,700 masks each; two seeds of the redraw differ by up to 0.006 in a share, so
    the tolerances are about five standard errors of a difference)."""
    stored = read_records(records, SEQ, PREDICTIONS)
    redrawn = redraw(_dynamic(records), stored, np.arange(len(stored)))

    def statistics(rows):
        positions = np.concatenate([r["masked_lm_positions"][r["masked_lm_weights"] > 0]
                                    for r in rows])
        runs = np.concatenate([_masked_runs(r) for r in rows])
        return {"masks_per_record": len(positions) / len(rows),
                "position_shares": np.bincount(positions // 8, minlength=SEQ // 8) / len(positions),
                "run_shares": np.bincount(np.minimum(runs, 5), minlength=6)[1:] / len(runs)}

    static, dynamic = statistics(stored), statistics(redrawn)
    assert static["masks_per_record"] > 8
    assert dynamic["masks_per_record"] == pytest.approx(static["masks_per_record"], abs=0.05)
    np.testing.assert_allclose(dynamic["position_shares"], static["position_shares"], atol=0.015)
    np.testing.assert_allclose(dynamic["run_shares"], static["run_shares"], atol=0.025)
    # The measures can tell masks apart: the first visited words, not random ones, would not
    # pass (their positions crowd the start).
    assert static["position_shares"][:2].sum() < 0.35


def test_a_records_masks_depend_on_its_stream_position_only(records):
    """Not on the batch it is read in, its place there, or the records beside it: masks are
    equal for every topology and on resume, which read the same positions in other batches."""
    dynamic = _dynamic(records, seed=1)
    stored = read_records(records[:1], SEQ, PREDICTIONS)[:16]
    positions = np.array([0, 9, 10, 99_999, 2**32 + 5, 2**40 - 1, 123_456_789_012, 77] * 2)
    whole = redraw(dynamic, stored, positions)
    halves = (redraw(dynamic, stored[8:], positions[8:], batch_size=3)
              + redraw(dynamic, stored[:8], positions[:8], batch_size=5))
    for a, b in zip(whole, halves[8:] + halves[:8]):
        assert all(np.array_equal(a[k], b[k]) for k in MASK_FEATURES)
    other_seed = redraw(_dynamic(records, seed=2), stored, positions)
    other_positions = redraw(dynamic, stored, positions + 1)
    for other in (other_seed, other_positions):
        assert sum(not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])
                   for a, b in zip(whole, other)) >= 14


def test_the_input_pipeline_draws_the_masks_in_graph_ops(records):
    """No Python in the graph: the pipeline runs on any TensorFlow input host."""
    contract = load_data_contract(records)
    dynamic = _dynamic(records, masked_lm_prob=0.2, seed=31)
    parser = PretrainingParser(contract.schema, dynamic)
    positions = tf.range(2**40, 2**40 + 64, dtype=tf.int64)
    dataset = tf.data.TFRecordDataset(records[:1]).batch(64).take(1)
    dataset = dataset.map(lambda batch: parser(batch, positions))
    graph = tf.compat.v1.GraphDef.FromString(
        tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy())
    function_ops = {op.op for function in graph.library.function for op in function.node_def}
    assert "StatelessWhile" in function_ops or "While" in function_ops  # the masks are in it
    assert not function_ops & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}, function_ops
    features = next(iter(dataset))
    stored = read_records(records[:1], SEQ, PREDICTIONS)[:64]
    expected = redraw(dynamic, stored, positions.numpy())
    for name, feature in zip(MASK_FEATURES, ("input_word_ids", "masked_lm_positions",
                                             "masked_lm_ids", "masked_lm_weights")):
        np.testing.assert_array_equal(features[feature].numpy(),
                                      np.stack([r[name] for r in expected]))


def test_stored_masks_repeated_or_out_of_range_are_undone_before_masking_again():
    """A record from another tool may repeat a stored position (the last label wins) or
    store one past the sequence (ignored)."""
    ids = np.array([[2, 11, 4, 12, 4, 13, 3, 14, 15, 3, 0, 0]], np.int32)
    features = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                "token_boundary": np.ones_like(ids),
                "masked_lm_positions": np.array([[2, 4, 2, 20]], np.int32),
                "masked_lm_ids": np.array([[30, 31, 32, 33]], np.int32),
                "masked_lm_weights": np.ones([1, 4], np.float32)}
    dynamic = DynamicMasking(MaskingConfig(masked_lm_prob=0.3, max_predictions_per_seq=4),
                             MaskingVocabulary(100, 4, 2, 3), seed=1)
    original = np.array([2, 11, 32, 12, 31, 13, 3, 14, 15, 3, 0, 0])
    seen = set()
    for position in range(40):
        drawn = dynamic(dict(features), tf.constant([position], tf.int64))
        drawn = {name: drawn[name][0].numpy() for name in MASK_FEATURES}
        count = int(drawn["masked_lm_weights"].sum())
        assert count == 3  # round(10 * 0.3)
        chosen = drawn["masked_lm_positions"][:count]
        np.testing.assert_array_equal(drawn["masked_lm_ids"][:count], original[chosen])
        unmasked = np.setdiff1d(np.arange(12), chosen)
        np.testing.assert_array_equal(drawn["input_ids"][unmasked], original[unmasked])
        seen.update(chosen.tolist())
    assert seen == {1, 2, 3, 4, 5, 7, 8}  # every real piece but [CLS] and [SEP]


def test_masks_drawn_on_the_fly_use_the_span_settings_the_data_was_made_with(tmp_path,
                                                                            synthetic_corpus):
    """--ngram / --favor_shorter_ngram / --do_whole_word_mask of create_pretraining_data go
    into the summary, and run_pretraining.py --masked_lm_budget draws its masks with them."""
    from albert.config import AlbertConfig
    from albert.tasks.pretraining import PretrainingTask

    corpus, model = synthetic_corpus
    made_with = MaskingConfig(max_predictions_per_seq=PREDICTIONS, ngram=2,
                              favor_shorter_ngram=False, do_whole_word_mask=False)
    config = DataConfig(instance=InstanceConfig(max_seq_length=SEQ, masking=made_with),
                        spm_model_file=model, dupe_factor=1)
    output = str(tmp_path / "bigrams.tfrecord")
    create_pretraining_data(corpus, output, config, show_progress=False)
    contract = load_data_contract([output])
    assert contract.masking == {"ngram": 2, "favor_shorter_ngram": False,
                                "do_whole_word_mask": False}
    task = PretrainingTask(config=AlbertConfig(vocab_size=1200), train_data=contract,
                           masked_lm_budget=0.2)
    assert task._dynamic_masking().masking == MaskingConfig(
        masked_lm_prob=0.2, max_predictions_per_seq=PREDICTIONS, ngram=2,
        favor_shorter_ngram=False, do_whole_word_mask=False)
    # Files made with other span settings: fine for the masks they carry, refused for masks
    # drawn on the fly (which settings would they follow?).
    other = str(tmp_path / "defaults.tfrecord")
    create_pretraining_data(corpus, other, dataclasses.replace(
        config, instance=InstanceConfig(max_seq_length=SEQ, masking=MaskingConfig(
            max_predictions_per_seq=PREDICTIONS))), show_progress=False)
    mixed = load_data_contract([output, other])
    assert mixed.masking_conflict and "ngram" in mixed.masking_conflict
    with pytest.raises(InputError, match="the input files disagree"):
        PretrainingTask(config=AlbertConfig(vocab_size=1200), train_data=mixed,
                        masked_lm_budget=0.2)._dynamic_masking()
    # Records from before the summary recorded them: the defaults.
    summary_path = output + ".summary.json"
    summary = json.load(open(summary_path))
    del summary["masking"]
    with open(summary_path, "w") as handle:
        json.dump(summary, handle)
    old = PretrainingTask(config=AlbertConfig(vocab_size=1200),
                          train_data=load_data_contract([output]), masked_lm_budget=0.2)
    assert old._dynamic_masking().masking == MaskingConfig(masked_lm_prob=0.2,
                                                           max_predictions_per_seq=PREDICTIONS)
