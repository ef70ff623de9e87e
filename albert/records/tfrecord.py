"""TFRecord files read and written without TensorFlow.

Each record is framed as TensorFlow does: the little-endian uint64 length,
its masked CRC-32C, the data, the data's masked CRC-32C. Writing pretraining
data this way keeps TensorFlow (seconds of start-up, ~0.5 GB of memory) out
of the data-creation processes; reading the framing lets training count
records by skipping over them, and name the file and record of a corruption.
"""

import struct
from typing import Dict, Iterator, Optional, Tuple

import google_crc32c

from albert import io
from albert.errors import InputError

_MASK_DELTA = 0xA282EAD8
_HEADER = 12  # length (8) + its CRC (4)
_FOOTER = 4


def _masked_crc(data: bytes) -> bytes:
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF)


def frame_record(record: bytes) -> bytes:
    """One record as it appears in a TFRecord file (length, CRCs and data)."""
    length = struct.pack("<Q", len(record))
    return length + _masked_crc(length) + record + _masked_crc(record)


class TFRecordWriter:
    """Appends records to a TFRecord file (no compression); any `albert.io` path."""

    def __init__(self, path: str):
        self._handle = io.open_file(path, "wb")

    def write(self, record: bytes) -> None:
        self._handle.write(frame_record(record))

    def write_framed(self, framed: bytes) -> None:
        """Appends a record already framed by `frame_record`."""
        self._handle.write(framed)

    def close(self) -> None:
        self._handle.close()


class CorruptRecordError(InputError):
    """A TFRecord file is truncated or fails its checksums."""


def _records(path: str, verify_data: bool) -> Iterator[Tuple[int, Optional[bytes]]]:
    """(index, data or None) of every record; raises CorruptRecordError naming file and record."""
    with io.open_file(path, "rb") as handle:
        index = 0
        while True:
            header = handle.read(_HEADER)
            if not header:
                return
            if len(header) < _HEADER or _masked_crc(header[:8]) != header[8:]:
                raise CorruptRecordError(
                    f"{path}: record {index} is corrupt (bad length header); the file is damaged "
                    "or not a TFRecord file")
            (length,) = struct.unpack("<Q", header[:8])
            if verify_data:
                data = handle.read(length)
                footer = handle.read(_FOOTER)
                if len(data) < length or len(footer) < _FOOTER:
                    raise CorruptRecordError(f"{path}: record {index} is truncated")
                if _masked_crc(data) != footer:
                    raise CorruptRecordError(f"{path}: record {index} is corrupt (data checksum "
                                             "mismatch)")
                yield index, data
            else:
                handle.seek(length + _FOOTER, 1)
                yield index, None
            index += 1


def iter_records(path: str) -> Iterator[bytes]:
    """The records of a TFRecord file, checksums verified."""
    for _, data in _records(path, verify_data=True):
        yield data


def count_records(path: str) -> int:
    """Number of records, found by skipping over them (length headers are verified)."""
    count = 0
    for count, _ in enumerate(_records(path, verify_data=False), start=1):
        pass
    return count


def find_corruption(paths) -> Optional[str]:
    """The first corruption in `paths`, as a message naming file and record; None if all are sound."""
    for path in paths:
        try:
            for _ in _records(path, verify_data=True):
                pass
        except CorruptRecordError as error:
            return str(error)
    return None


def first_record_lengths(path: str) -> Dict[str, int]:
    """{feature name: number of values} of the first `tf.train.Example` in `path`.

    Raises InputError for files that are empty, corrupt or not Examples.
    """
    # Inside: reading an Example needs its protobuf classes, which come with TensorFlow;
    # writing records (create_pretraining_data.py) does not.
    from google.protobuf.message import DecodeError
    from tensorflow.core.example import example_pb2

    try:
        first = next(iter_records(path), None)
    except OSError as error:
        raise InputError(f"Cannot read {path}: {error}") from None
    if first is None:
        raise InputError(f"{path} holds no records")
    try:
        example = example_pb2.Example.FromString(first)
    except DecodeError:
        raise InputError(f"{path} does not hold tf.train.Example records") from None
    lengths = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        lengths[name] = len(getattr(feature, kind).value) if kind else 0
    return lengths
