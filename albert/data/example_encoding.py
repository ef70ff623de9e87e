"""`tf.train.Example` records of pretraining instances, encoded without TensorFlow.

Worker processes that create pretraining data must not import TensorFlow
(seconds of start-up and hundreds of MB each), so the protobuf wire format of
the fixed schema below is written here directly. The bytes equal
`tf.train.Example.SerializeToString(deterministic=True)` — map entries in key
order, packed repeated fields — which the tests check against TensorFlow.

Feature names, types and lengths come from `albert.data.schema`, the one
definition the reader shares.
"""

import struct
from typing import Dict, List, Sequence, Tuple

from albert.data.instances import TrainingInstance
from albert.data.schema import PretrainingSchema

_VARINT_CACHE_SIZE = 1 << 16


def _encode_varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_VARINTS = [_encode_varint(value) for value in range(_VARINT_CACHE_SIZE)]


def _varints(values: Sequence[int]) -> bytes:
    table = _VARINTS
    if values and (min(values) < 0 or max(values) >= _VARINT_CACHE_SIZE):
        return b"".join([table[v] if 0 <= v < _VARINT_CACHE_SIZE else _encode_varint(v)
                         for v in values])
    return b"".join([table[value] for value in values])


def _length_delimited(field_tag: bytes, payload: bytes) -> bytes:
    return field_tag + _encode_varint(len(payload)) + payload


def _int64_feature(values: Sequence[int]) -> bytes:
    # Feature.int64_list (field 3) holding Int64List.value (field 1, packed).
    packed = _length_delimited(b"\x0a", _varints(values)) if len(values) else b""
    return _length_delimited(b"\x1a", packed)


def _float_feature(values: Sequence[float]) -> bytes:
    # Feature.float_list (field 2) holding FloatList.value (field 1, packed fixed32).
    packed = (_length_delimited(b"\x0a", struct.pack(f"<{len(values)}f", *values))
              if len(values) else b"")
    return _length_delimited(b"\x12", packed)


def encode_example(features: Dict[str, Tuple[str, Sequence]]) -> bytes:
    """Serialises `{name: ("int64" | "float", values)}` as a tf.train.Example."""
    entries = []
    for name in sorted(features):
        kind, values = features[name]
        feature = _int64_feature(values) if kind == "int64" else _float_feature(values)
        entry = _length_delimited(b"\x0a", name.encode("utf-8")) + _length_delimited(b"\x12", feature)
        entries.append(_length_delimited(b"\x0a", entry))  # Features.feature map entry
    return _length_delimited(b"\x0a", b"".join(entries))  # Example.features


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

