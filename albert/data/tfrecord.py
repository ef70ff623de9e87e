"""TFRecord files written without TensorFlow.

Each record is framed as TensorFlow does: the little-endian uint64 length,
its masked CRC-32C, the data, the data's masked CRC-32C. Writing pretraining
data this way keeps TensorFlow (seconds of start-up, ~0.5 GB of memory) out
of the data-creation processes.
"""

import struct

import google_crc32c

_MASK_DELTA = 0xA282EAD8


def _masked_crc(data: bytes) -> bytes:
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF)


class TFRecordWriter:
    """Appends records to a TFRecord file (no compression)."""

    def __init__(self, path: str):
        self._handle = open(path, "wb")

    def write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        self._handle.write(length + _masked_crc(length) + record + _masked_crc(record))

    def close(self) -> None:
        self._handle.close()
