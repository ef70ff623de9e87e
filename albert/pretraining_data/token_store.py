"""The tokenized corpus on disk: every document's segments of token ids, random access.

Data creation tokenizes the corpus once, in corpus order, and appends each
document here. Instance creation then makes each document's instances from
its own seeded streams and draws random-document partners from the *whole*
corpus, as the original did with the corpus in memory; here the corpus
stays on disk, memory-mapped by every worker, so memory does not grow with
it.

Three flat arrays, each a raw little-endian file:

* `tokens.bin` (int32): every token id, segment after segment;
* `segment_starts.bin` (int64): where each segment starts in `tokens`, plus
  one final entry (the total), so segment i is `starts[i]:starts[i + 1]`;
* `document_starts.bin` (int64): the same over segments, per document.
"""

import os
from collections import OrderedDict
from typing import List, Sequence

import numpy as np

_TOKENS, _SEGMENTS, _DOCUMENTS = "tokens.bin", "segment_starts.bin", "document_starts.bin"
_TOKEN_DTYPE, _OFFSET_DTYPE = np.dtype("<i4"), np.dtype("<i8")


class TokenStoreWriter:
    """Appends tokenized documents (lists of segments of ids) to a store directory."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self._files = {name: open(os.path.join(directory, name), "wb")
                       for name in (_TOKENS, _SEGMENTS, _DOCUMENTS)}
        self.tokens = self.segments = self.documents = 0
        # The leading zero of both offset arrays.
        zero = np.zeros(1, _OFFSET_DTYPE).tobytes()
        self._files[_SEGMENTS].write(zero)
        self._files[_DOCUMENTS].write(zero)

    def add(self, part: "TokenizedDocuments") -> None:
        """Appends the documents of `part` (a tokenization job's result)."""
        segment_lengths = np.diff(np.asarray(part.segment_starts))
        document_sizes = np.diff(np.asarray(part.document_starts))
        self._files[_TOKENS].write(np.asarray(part.tokens, _TOKEN_DTYPE).tobytes())
        self._files[_SEGMENTS].write(
            (self.tokens + np.cumsum(segment_lengths)).astype(_OFFSET_DTYPE).tobytes())
        self._files[_DOCUMENTS].write(
            (self.segments + np.cumsum(document_sizes)).astype(_OFFSET_DTYPE).tobytes())
        self.tokens += len(part.tokens)
        self.segments += len(segment_lengths)
        self.documents += len(document_sizes)

    def close(self) -> "TokenizedDocuments":
        for handle in self._files.values():
            handle.close()
        return TokenizedDocuments.open(self.directory)


def _memory_map(path: str, dtype) -> np.ndarray:
    if os.path.getsize(path) == 0:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r")


class TokenizedDocuments:
    """Documents (lists of segments of token ids) over three flat arrays.

    `documents[i]` is document i as lists of ints; `token_count(i)` its size.
    Built in memory from lists (`from_documents`) or memory-mapped from a
    store directory (`open`).
    """

    def __init__(self, tokens, segment_starts, document_starts):
        self.tokens = tokens
        self.segment_starts = segment_starts
        self.document_starts = document_starts
        self._cache = OrderedDict()

    @classmethod
    def from_documents(cls, documents: Sequence[Sequence[Sequence[int]]]) -> "TokenizedDocuments":
        segments = [segment for document in documents for segment in document]
        segment_lengths = np.fromiter((len(s) for s in segments), np.int64, len(segments))
        tokens = np.fromiter((t for s in segments for t in s), np.int32, int(segment_lengths.sum()))
        document_sizes = np.fromiter((len(d) for d in documents), np.int64, len(documents))
        return cls(tokens, _starts(segment_lengths), _starts(document_sizes))

    @classmethod
    def open(cls, directory: str) -> "TokenizedDocuments":
        return cls(_memory_map(os.path.join(directory, _TOKENS), _TOKEN_DTYPE),
                   _memory_map(os.path.join(directory, _SEGMENTS), _OFFSET_DTYPE),
                   _memory_map(os.path.join(directory, _DOCUMENTS), _OFFSET_DTYPE))

    def __len__(self) -> int:
        return len(self.document_starts) - 1

    def __getitem__(self, index: int) -> List[List[int]]:
        document = self._cache.get(index)
        if document is None:
            first, last = int(self.document_starts[index]), int(self.document_starts[index + 1])
            starts = self.segment_starts[first:last + 1].tolist()
            document = [self.tokens[a:b].tolist() for a, b in zip(starts, starts[1:])]
            self._cache[index] = document
            if len(self._cache) > 256:
                self._cache.popitem(last=False)
        return document

    def token_counts(self) -> np.ndarray:
        """Tokens of every document, in document order."""
        return np.diff(np.asarray(self.segment_starts)[np.asarray(self.document_starts)])


def _starts(lengths) -> np.ndarray:
    """Offsets [0, l0, l0 + l1, ...] of consecutive runs of the given lengths."""
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, np.int64))]).astype(np.int64)
