"""`tf.train.Example` bytes without TensorFlow.

Worker processes that create pretraining data or fine-tuning feature caches
must not import TensorFlow (seconds of start-up and hundreds of MB each), so
the protobuf wire format of `{name: int64 or float values}` is written here
directly. The bytes equal `tf.train.Example.SerializeToString(deterministic=True)`
— map entries in key order, packed repeated fields — which the tests check
against TensorFlow.
"""

import struct
from typing import Dict, Sequence, Tuple

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
    if not values:
        return b""
    smallest, largest = min(values), max(values)
    if smallest >= 0 and largest < 0x80:  # one byte each: masks, segment ids, labels
        return bytes(values)
    if smallest < 0 or largest >= _VARINT_CACHE_SIZE:
        return b"".join([table[v] if 0 <= v < _VARINT_CACHE_SIZE else _encode_varint(v)
                         for v in values])
    return b"".join([table[value] for value in values])


def _length_delimited(field_tag: bytes, payload: bytes) -> bytes:
    length = len(payload)
    return field_tag + (_VARINTS[length] if length < _VARINT_CACHE_SIZE
                        else _encode_varint(length)) + payload


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
