"""Pretraining instances as `tf.train.Example` bytes, without TensorFlow (data workers).

The features and their order are the schema's (`albert.pretraining_data.schema`);
the wire format is `albert.records.example_proto`'s.
"""

from typing import Dict, List, Sequence, Tuple

from albert.pretraining_data.instances import TrainingInstance
from albert.pretraining_data.schema import PretrainingSchema
from albert.records.example_proto import encode_example


def _padded(values: List[int], length: int) -> List[int]:
    return values + [0] * (length - len(values))


def instance_features(instance: TrainingInstance, max_seq_length: int,
                      max_predictions_per_seq: int) -> Dict[str, Tuple[str, Sequence]]:
    """{feature: (kind, values)} of one instance, exactly the schema's features."""
    length = len(instance.input_ids)
    predictions = len(instance.masked_lm_positions)
    values = {
        "input_ids": _padded(instance.input_ids, max_seq_length),
        "input_mask": [1] * length + [0] * (max_seq_length - length),
        "segment_ids": _padded(instance.segment_ids, max_seq_length),
        "token_boundary": _padded(instance.token_boundary, max_seq_length),
        "masked_lm_positions": _padded(instance.masked_lm_positions, max_predictions_per_seq),
        "masked_lm_ids": _padded(instance.masked_lm_ids, max_predictions_per_seq),
        "masked_lm_weights": [1.0] * predictions + [0.0] * (max_predictions_per_seq - predictions),
        "next_sentence_labels": [1 if instance.is_random_next else 0],
    }
    schema = PretrainingSchema(max_seq_length, max_predictions_per_seq)
    return {name: (kind, values[name]) for name, (kind, _) in schema.features().items()}


def serialize_instance(instance: TrainingInstance, max_seq_length: int,
                       max_predictions_per_seq: int) -> bytes:
    return encode_example(instance_features(instance, max_seq_length, max_predictions_per_seq))

