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
        content = io.read_bytes(path)
        digest.update(len(content).to_bytes(8, "little"))
        digest.update(content)
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
             count: Callable[[List], Dict[str, int]] = lambda examples: {}) -> "FeatureCache":
        """The cache at `path`: reused if made with `settings`, else its examples are read.

        `read_examples()` reads the split (raising `InputError` on bad input);
        `count(examples)` gives the task-specific counts stored with the cache.
        """
        settings_path = path + SETTINGS_SUFFIX
        if io.exists(settings_path) and io.exists(path):
            stored = io.read_json(settings_path)
            made_with = {k: v for k, v in stored.items() if k not in _CONTENT_KEYS}
            if made_with == settings:
                return cls(path, settings, int(stored["records"]), dict(stored.get("counts", {})))
            logger.info("Rebuilding %s: it was made with other settings", path)
        examples = read_examples()
        return cls(path, settings, 0, count(examples), examples)

    def write(self, serialize: Callable[[object], bytes]) -> int:
        """Writes the cache (atomically) if it needs rebuilding; returns its record count.

        `serialize(example)` gives one serialised `tf.train.Example`.
        """
        from albert.data.tfrecord import TFRecordWriter

        if self.examples is None:
            return self.records
        with io.atomic_output_file(self.path) as temporary:
            writer = TFRecordWriter(temporary)
            for example in self.examples:
                writer.write(serialize(example))
            writer.close()
        io.write_json_atomically(self.path + SETTINGS_SUFFIX,
                                 dict(self.settings, records=len(self.examples),
                                      counts=self.counts))
        logger.info("Wrote %d features to %s", len(self.examples), self.path)
        self.records, self.examples = len(self.examples), None
        return self.records
