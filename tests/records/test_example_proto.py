import random

import numpy as np
import pytest
import tensorflow as tf

from albert.pretraining_data.instance_encoding import serialize_instance
from albert.records.example_proto import encode_example
from albert.pretraining_data.instances import TrainingInstance
from albert.pretraining_data.schema import PretrainingSchema
from albert.records.tfrecord import TFRecordWriter, count_records, find_corruption, iter_records


def _tensorflow_bytes(features):
    feature = {}
    for name, (kind, values) in features.items():
        if kind == "int64":
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        else:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True)


def test_bytes_equal_tensorflow_deterministic_serialisation():
    rng = random.Random(0)
    for _ in range(50):
        features = {
            "input_ids": ("int64", [rng.randint(0, 300000) for _ in range(rng.randint(0, 40))]),
            "b_negative": ("int64", [rng.randint(-5, 5) for _ in range(3)]),
            "weights": ("float", [rng.choice([0.0, 1.0, 0.5, -2.25]) for _ in range(rng.randint(0, 9))]),
            "next_sentence_labels": ("int64", [rng.randint(0, 1)]),
            "input_mask": ("int64", [rng.randint(0, 127) for _ in range(rng.randint(0, 40))]),
        }
        assert encode_example(features) == _tensorflow_bytes(features)
    # A payload longer than the varint table (its length is encoded in three bytes).
    features = {"input_ids": ("int64", [rng.randint(0, 30000) for _ in range(40000)])}
    assert encode_example(features) == _tensorflow_bytes(features)


def test_the_schema_is_the_original_record_layout():
    # The original's pretraining records, spelled out: this pins the one
    # schema module that the writer, the reader and the other tests use.
    assert PretrainingSchema(12, 4).features() == {
        "input_ids": ("int64", 12), "input_mask": ("int64", 12), "segment_ids": ("int64", 12),
        "token_boundary": ("int64", 12), "masked_lm_positions": ("int64", 4),
        "masked_lm_ids": ("int64", 4), "masked_lm_weights": ("float", 4),
        "next_sentence_labels": ("int64", 1)}
    assert "token_boundary" not in PretrainingSchema(12, 4).features(with_token_boundary=False)


def test_instance_records_parse_with_the_schema():
    instance = TrainingInstance(
        input_ids=[2, 40, 4, 41, 3, 50, 51, 3], segment_ids=[0, 0, 0, 0, 0, 1, 1, 1],
        token_boundary=[1, 1, 1, 0, 1, 1, 0, 1], masked_lm_positions=[2, 6],
        masked_lm_ids=[45, 51], is_random_next=True, random_document=False)
    record = serialize_instance(instance, max_seq_length=12, max_predictions_per_seq=4)
    spec = PretrainingSchema(12, 4).tf_feature_spec()
    parsed = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
    np.testing.assert_array_equal(parsed["input_ids"], [2, 40, 4, 41, 3, 50, 51, 3, 0, 0, 0, 0])
    np.testing.assert_array_equal(parsed["input_mask"], [1] * 8 + [0] * 4)
    np.testing.assert_array_equal(parsed["segment_ids"], [0] * 5 + [1] * 3 + [0] * 4)
    np.testing.assert_array_equal(parsed["token_boundary"], [1, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_positions"], [2, 6, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_ids"], [45, 51, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_weights"], [1.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(parsed["next_sentence_labels"], [1])


def test_tfrecord_files_written_without_tensorflow_read_back_with_crc_checks(tmp_path):
    records = [b"", b"x", bytes(range(256)) * 40]
    writer = TFRecordWriter(str(tmp_path / "r.tfrecord"))
    for record in records:
        writer.write(record)
    writer.close()
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as reference:
        for record in records:
            reference.write(record)
    assert (tmp_path / "r.tfrecord").read_bytes() == (tmp_path / "tf.tfrecord").read_bytes()
    dataset = tf.data.TFRecordDataset(str(tmp_path / "r.tfrecord"))
    assert [r.numpy() for r in dataset] == records
    # TensorFlow's own reader verifies the CRCs: a flipped data byte is an error.
    data = bytearray((tmp_path / "r.tfrecord").read_bytes())
    data[-6] ^= 0xFF
    (tmp_path / "bad.tfrecord").write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(tmp_path / "bad.tfrecord")))


def test_records_are_counted_and_a_corruption_is_located(tmp_path):
    writer = TFRecordWriter(str(tmp_path / "r.tfrecord"))
    for index in range(7):
        writer.write(bytes([index]) * (100 + index))
    writer.close()
    path = str(tmp_path / "r.tfrecord")
    assert count_records(path) == 7
    assert [len(r) for r in iter_records(path)] == [100 + i for i in range(7)]
    assert find_corruption([path]) is None
    data = bytearray((tmp_path / "r.tfrecord").read_bytes())
    offset = sum(12 + 100 + i + 4 for i in range(4)) + 12 + 50   # inside record 4's data
    data[offset] ^= 0xFF
    (tmp_path / "bad.tfrecord").write_bytes(bytes(data))
    assert find_corruption([path, str(tmp_path / "bad.tfrecord")]) == (
        f"{tmp_path / 'bad.tfrecord'}: record 4 is corrupt (data checksum mismatch)")
    (tmp_path / "cut.tfrecord").write_bytes(bytes(data[:offset]))
    assert "record 4 is truncated" in find_corruption([str(tmp_path / "cut.tfrecord")])
