import random

import numpy as np
import tensorflow as tf

from albert.data.example_encoding import encode_example, serialize_instance
from albert.data.instances import TrainingInstance
from records import schema


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
        }
        assert encode_example(features) == _tensorflow_bytes(features)


def test_instance_records_parse_with_the_original_schema():
    instance = TrainingInstance(
        input_ids=[2, 40, 4, 41, 3, 50, 51, 3], segment_ids=[0, 0, 0, 0, 0, 1, 1, 1],
        token_boundary=[1, 1, 1, 0, 1, 1, 0, 1], masked_lm_positions=[2, 6],
        masked_lm_ids=[45, 51], is_random_next=True, random_document=False)
    record = serialize_instance(instance, max_seq_length=12, max_predictions_per_seq=4)
    parsed = {k: v.numpy() for k, v in tf.io.parse_single_example(record, schema(12, 4)).items()}
    np.testing.assert_array_equal(parsed["input_ids"], [2, 40, 4, 41, 3, 50, 51, 3, 0, 0, 0, 0])
    np.testing.assert_array_equal(parsed["input_mask"], [1] * 8 + [0] * 4)
    np.testing.assert_array_equal(parsed["segment_ids"], [0] * 5 + [1] * 3 + [0] * 4)
    np.testing.assert_array_equal(parsed["token_boundary"], [1, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_positions"], [2, 6, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_ids"], [45, 51, 0, 0])
    np.testing.assert_array_equal(parsed["masked_lm_weights"], [1.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(parsed["next_sentence_labels"], [1])
