"""Feature caches of the fine-tuning tasks: TFRecord files that are never reused blindly.

The original writes each task's features to a TFRecord file once and reuses
any file of that name afterwards, whatever `max_seq_length` or tokenizer made
it. Here every cache `<name>.tf_record` has a settings file beside it,
`<name>.tf_record.settings.json`: what made the features (task, split,
lengths, tokenizer model hash, lower-casing, the source files' hash) plus
what the cache holds (`records`, and task-specific counts). A cache whose
settings differ, or that has no settings file, is rebuilt.

Planning and writing are separate steps: `plan` reads (and so validates)
the examples of every cache that must be rebuilt, and `write` then writes
them. A script plans all of its caches before writing any, so a bad row in
the dev file leaves no new train cache behind.
"""

import dataclasses
import hashlib
import logging
from typing import Callable, Dict, Iterable, List, Optional

from albert import io
from albert.errors import InputError
from albert.records.tfrecord import TFRecordWriter
from albert.worker_pool import ordered_map

logger = logging.getLogger("albert")

SETTINGS_SUFFIX = ".settings.json"
# Keys of the settings file that describe the content, not what made it.
_CONTENT_KEYS = ("records", "counts")


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of the vocabulary model (SentencePiece proto or WordPiece vocabulary)."""
    proto = getattr(tokenizer, "model_proto", None)
    if proto is None:
        proto = "\n".join(tokenizer.vocab_words).encode("utf-8")
    return hashlib.sha256(proto).hexdigest()


def tokenizer_settings(tokenizer) -> dict:
    """The tokenizer's part of a cache's settings."""
    return {"tokenizer_sha256": tokenizer_fingerprint(tokenizer),
            "do_lower_case": tokenizer.do_lower_case,
            "digit_comma_rule": getattr(tokenizer, "digit_comma_rule", None)}


def files_fingerprint(paths: Iterable[str]) -> str:
    """One hash of the contents (and order) of `paths`."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(io.size(path).to_bytes(8, "little"))
        with io.open_file(path, "rb") as handle:   # in pieces: a file may exceed memory
            for piece in iter(lambda: handle.read(1 << 20), b""):
                digest.update(piece)
    return digest.hexdigest()


@dataclasses.dataclass
class FeatureCache:
    """One split's feature cache: reusable as it is, or to be written from `examples`.

    Attributes:
      path: the TFRecord file.
      settings: what made it (compared on reuse).
      records: records in the cache (0 until written, when it must be rebuilt).
      counts: task-specific counts of its content (e.g. examples per RACE level).
      examples: the examples to write, or None when the cache is reused.
    """

    path: str
    settings: dict
    records: int = 0
    counts: Dict[str, int] = dataclasses.field(default_factory=dict)
    examples: Optional[List] = None

    @classmethod
    def plan(cls, path: str, settings: dict, read_examples: Callable[[], List],
             count: Callable[[List], Dict[str, int]] = lambda examples: {},
             keep_existing: bool = False) -> "FeatureCache":
        """The cache at `path`: reused if made with `settings`, else its examples are read.

        `read_examples()` reads the split (raising `InputError` on bad input);
        `count(examples)` gives the task-specific counts stored with the cache.
        With `keep_existing` (a file the user named), an existing file made
        with other settings, or by another program, is an error instead of
        being rebuilt.
        """
        settings_path = path + SETTINGS_SUFFIX
        if io.exists(settings_path) and io.exists(path):
            stored = io.read_json(settings_path)
            made_with = {k: v for k, v in stored.items() if k not in _CONTENT_KEYS}
            if made_with == settings:
                return cls(path, settings, int(stored["records"]), dict(stored.get("counts", {})))
            if keep_existing:
                differing = sorted(key for key in set(made_with) | set(settings)
                                   if made_with.get(key) != settings.get(key))
                raise InputError(f"{path} was made with other settings ({', '.join(differing)} "
                                 "differ); delete it or name another file")
            logger.info("Rebuilding %s: it was made with other settings", path)
        elif keep_existing and io.exists(path):
            raise InputError(f"{path} exists but has no {io.basename(settings_path)} beside it "
                             "(made by another program?); delete it or name another file")
        examples = read_examples()
        return cls(path, settings, 0, count(examples), examples)

    def files(self):
        """The files the cache consists of (the records and their settings)."""
        return [self.path, self.path + SETTINGS_SUFFIX]

    def write(self, serialize: Callable[[object], bytes], num_workers: int = 1) -> int:
        """Writes the cache (atomically) if it needs rebuilding; returns its record count.

        `serialize(example)` gives one serialised `tf.train.Example`. With
        `num_workers` > 1 it runs in that many worker processes (it must then be
        picklable); the records, and so the file, are the same.
        """
        if self.examples is None:
            return self.records
        if num_workers > 1:
            return self.write_records(ordered_map(serialize, self.examples, num_workers))
        return self.write_records(serialize(example) for example in self.examples)

    def write_records(self, records: Iterable[bytes]) -> int:
        """Writes serialised records as they come (atomically); returns their count.

        For tasks whose examples give several records each (SQuAD windows):
        the records are streamed to the file, never held in memory together.
        """
        if self.examples is None:
            return self.records
        count = 0
        with io.atomic_output_file(self.path) as temporary:
            writer = TFRecordWriter(temporary)
            for record in records:
                writer.write(record)
                count += 1
            writer.close()
        io.write_json_atomically(self.path + SETTINGS_SUFFIX,
                                 dict(self.settings, records=count, counts=self.counts))
        logger.info("Wrote %d features to %s", count, self.path)
        self.records, self.examples = count, None
        return self.records
