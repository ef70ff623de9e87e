"""A uniform shuffle of every record a run writes, with memory bounded by one bucket.

The original held all instances of the corpus (times `dupe_factor`) in
memory and shuffled them before writing, so its training input needed only
a 100-record shuffle buffer. Here each record carries a random 64-bit key,
drawn from its document's seeded generator, and the output is the records
sorted by key: a uniformly random order of all of them.

The sort runs in two passes over a scratch file. Records arrive in batches
(all dupe rounds of one window of documents at a time) and are written to
the scratch file grouped by bucket (a key range); afterwards each bucket in
turn is read back, sorted by key and handed out. With as many buckets as
windows, a bucket holds about one window's records, which is the memory
bound. The index of where each batch's buckets start holds batches x
buckets offsets, so batches must be few (one per window, not per job). Since
the order is "sorted by key", it does not depend on the number of buckets,
windows or workers.

Scratch entries are the 8-byte little-endian key, a 4-byte tag the caller
gives with each record (its corpus document) and the record as framed in a
TFRecord file (whose own 8-byte length says where it ends).
"""

import os
import struct
from typing import Iterator, List, Sequence, Tuple

import numpy as np

_KEY = struct.Struct("<Q")
_TAG = struct.Struct("<I")
_HEADER = _KEY.size + _TAG.size
_LENGTH = struct.Struct("<Q")
_FRAMING = 12 + 4  # TFRecord: length and its CRC before the data, the data's CRC after


class GlobalRecordShuffle:
    """Collects framed records with keys and tags; iterating yields (tag, record) in key order."""

    def __init__(self, directory: str, num_buckets: int):
        self.num_buckets = max(1, int(num_buckets))
        self.path = os.path.join(directory, "records.bin")
        self._handle = open(self.path, "wb")
        self._offset = 0
        # Per batch of records: where it starts in the scratch file, and the cumulative byte
        # sizes of its buckets (num_buckets + 1 offsets). Arrays, not lists of tuples: a large
        # corpus has thousands of batches times thousands of buckets.
        self._batches: List[Tuple[int, np.ndarray]] = []
        self.records = 0

    def bucket_of(self, keys: np.ndarray) -> np.ndarray:
        """Bucket of each key: monotone in the key, so buckets in order are keys in order."""
        scaled = np.asarray(keys, np.uint64).astype(np.float64) * (self.num_buckets / 2.0 ** 64)
        return np.minimum(scaled.astype(np.int64), self.num_buckets - 1)

    def add(self, framed_records: Sequence[bytes], keys: Sequence[int],
            tags: Sequence[int]) -> None:
        """Appends a batch of framed records with their keys and tags (uint32), grouped by
        bucket."""
        keys = np.asarray(keys, np.uint64)
        tags = np.asarray(tags, np.uint32)
        if not len(keys) == len(tags) == len(framed_records):
            raise ValueError("one key and one tag per record")
        if not len(keys):
            return
        buckets = self.bucket_of(keys)
        order = np.argsort(buckets, kind="stable")
        sizes = np.fromiter((_HEADER + len(record) for record in framed_records), np.int64,
                            len(framed_records))
        bucket_sizes = np.bincount(buckets, weights=sizes, minlength=self.num_buckets)
        self._handle.writelines(_KEY.pack(int(keys[i])) + _TAG.pack(int(tags[i]))
                                + framed_records[i] for i in order)
        self._batches.append((self._offset, np.concatenate(
            [[0], np.cumsum(bucket_sizes.astype(np.int64))])))
        self._offset += int(sizes.sum())
        self.records += len(keys)

    @property
    def index_bytes(self) -> int:
        """Memory of the index of where each batch's buckets start: batches x (buckets + 1)
        offsets of 8 bytes."""
        return sum(cumulative.nbytes for _, cumulative in self._batches)

    def bucket_sizes(self) -> np.ndarray:
        """Bytes held by each bucket: what the second pass holds in memory at a time."""
        sizes = np.zeros(self.num_buckets, np.int64)
        for _, cumulative in self._batches:
            sizes += np.diff(cumulative)
        return sizes

    def __iter__(self) -> Iterator[Tuple[int, bytes]]:
        """(tag, framed record) pairs, sorted by key, then tag (the corpus document), then
        arrival (a document's records arrive by dupe round, then pair): an order that does not
        depend on how the records arrived in windows and jobs, even for equal keys."""
        self._handle.close()
        with open(self.path, "rb") as scratch:
            for bucket in range(self.num_buckets):
                chunks = []
                for base, cumulative in self._batches:
                    start, end = int(cumulative[bucket]), int(cumulative[bucket + 1])
                    if end > start:
                        scratch.seek(base + start)
                        chunks.append(scratch.read(end - start))
                data = b"".join(chunks)
                del chunks
                entries = []
                position = 0
                while position < len(data):
                    key = _KEY.unpack_from(data, position)[0]
                    tag = _TAG.unpack_from(data, position + _KEY.size)[0]
                    length = _LENGTH.unpack_from(data, position + _HEADER)[0]
                    end = position + _HEADER + _FRAMING + length
                    entries.append((key, tag, position + _HEADER, end))
                    position = end
                entries.sort(key=lambda entry: (entry[0], entry[1]))  # stable: then arrival
                view = memoryview(data)
                for _, tag, start, end in entries:
                    yield tag, bytes(view[start:end])
                del view, data
