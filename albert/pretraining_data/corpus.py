"""Streaming the pretraining corpus: files, raw documents, windows.

Input format: one sentence (or segment) per line, a blank line between
documents. Files are read in the order given, each glob's matches sorted (the
original left glob order to the file system, so its output depended on it).
Every file starts a new document: the original carried the last document of
one file on into the next file when no blank line ended it (FIX).

Lines are decoded as strict UTF-8; `.gz` files are decompressed. Documents
are cut here at whitespace-only lines; the workers cut again at lines that
only become empty after `preprocess_text`, so documents are exactly the
original's.
"""

import dataclasses
from typing import Iterator, List

from albert import io
from albert.errors import InputError


@dataclasses.dataclass
class RawDocument:
    lines: List[str]
    source: str  # "file:line" of its first line, for messages


@dataclasses.dataclass
class Window:
    """A bounded group of consecutive documents of the corpus, tokenized together."""

    documents: List[RawDocument]
    input_bytes: int


def iter_documents(files: List[str], open_binary=io.open_binary_maybe_gzip) -> Iterator[tuple]:
    """Yields (RawDocument, bytes read for it) in corpus order. `open_binary(path)`: a
    context manager giving the file's bytes, decompressed (Beam's file systems on Beam)."""
    for path in files:
        lines: List[str] = []
        first_line = 0
        pending_bytes = 0
        with open_binary(path) as handle:
            for line_number, raw in enumerate(handle, start=1):
                pending_bytes += len(raw)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise InputError(
                        f"{path}:{line_number}: not valid UTF-8 ({error.reason} at byte "
                        f"{error.start} of the line); the corpus must be UTF-8 text") from None
                if line.strip():
                    if not lines:
                        first_line = line_number
                    lines.append(line)
                elif lines:
                    yield RawDocument(lines, f"{path}:{first_line}"), pending_bytes
                    lines, pending_bytes = [], 0
        if lines:
            yield RawDocument(lines, f"{path}:{first_line}"), pending_bytes


def iter_windows(files: List[str], documents_per_window: int) -> Iterator[Window]:
    window: List[RawDocument] = []
    window_bytes = 0
    for document, size in iter_documents(files):
        window.append(document)
        window_bytes += size
        if len(window) >= documents_per_window:
            yield Window(window, window_bytes)
            window, window_bytes = [], 0
    if window:
        yield Window(window, window_bytes)


def total_input_bytes(files: List[str]) -> int:
    """Size of the input on disk (compressed size for .gz), for progress reporting."""
    return sum(io.size(path) for path in files)
