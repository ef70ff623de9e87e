"""A small real English corpus in the original pretraining input format.

    python -m albert.datasets demo-corpus --output_dir=DIR

Writes, one sentence per line with a blank line between documents:

* `DIR/train.txt`: the 106 articles of the Wikipedia sample shipped in the
  gensim 4.4.0 wheel (markup stripped with mwparserfromhell) and the 50 news
  articles of its `lee.cor`;
* `DIR/heldout.txt`: the 300 news articles of `lee_background.cor`, held out
  for intrinsic MLM / sentence-order evaluation;
* `DIR/manifest.json`: sources with their sha256, counts, builder version.

Sentences are split with syntok. The result is cached: a directory whose
manifest matches the installed sources and this builder is left as it is.
No text is downloaded and none is committed to the repository.
"""

import logging
import os
from typing import Dict, Iterable, List, Optional, Tuple

from albert import io
from albert.datasets import sources
from albert.errors import InputError
from albert.io import atomic_output_dir

logger = logging.getLogger("albert")

BUILDER_VERSION = 2
MIN_SENTENCE_WORDS = 3


DEMO_EXTRA_HINT = 'install the demo extra: pip install -e ".[demo]"'


def require_demo_packages() -> None:
    """Raises InputError naming the extra when the demo corpus's packages are missing."""
    missing = []
    for module in ("syntok", "mwparserfromhell"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise InputError(f"The demo corpus needs {', '.join(missing)}; {DEMO_EXTRA_HINT}")


def split_sentences(paragraph: str) -> List[str]:
    """Sentences of a paragraph (syntok), with their original spacing inside."""
    # Inside: syntok is an optional dependency (the "demo" extra).
    from syntok import segmenter

    sentences = []
    for syntok_paragraph in segmenter.analyze(paragraph):
        for sentence in syntok_paragraph:
            text = "".join(token.spacing + token.value for token in sentence).strip()
            if len(text.split()) >= MIN_SENTENCE_WORDS:
                sentences.append(text)
    return sentences


def wikipedia_documents(path: str) -> Iterable[List[str]]:
    # Inside: wikitext needs mwparserfromhell, an optional dependency (the "demo" extra).
    from albert.datasets import wikitext

    for _, text in wikitext.iter_articles(path):
        sentences = [s for paragraph in wikitext.article_paragraphs(text)
                     for s in split_sentences(paragraph)]
        if sentences:
            yield sentences


def line_documents(path: str) -> Iterable[List[str]]:
    """One document per non-empty line (the Lee corpora's format; they are Latin-1 encoded)."""
    with open(path, encoding="latin-1") as handle:
        for line in handle:
            sentences = split_sentences(line.strip())
            if sentences:
                yield sentences


def write_documents(documents: Iterable[List[str]], path: str) -> dict:
    counts = {"documents": 0, "sentences": 0, "characters": 0}
    with io.open_file(path, "w") as handle:
        for sentences in documents:
            if counts["documents"]:
                handle.write("\n")
            for sentence in sentences:
                handle.write(sentence + "\n")
            counts["documents"] += 1
            counts["sentences"] += len(sentences)
            counts["characters"] += sum(len(s) for s in sentences)
    return counts


def gensim_inputs() -> Tuple[Dict[str, str], dict]:
    """Paths of the gensim wheel's files the demo corpus reads, and their manifest entries."""
    inputs = {name: sources.gensim_file(relative) for name, relative in (
        ("wikipedia_sample", sources.WIKIPEDIA_SAMPLE), ("lee", sources.LEE),
        ("lee_background", sources.LEE_BACKGROUND))}
    source_manifest = {name: {"package": f"gensim=={sources.GENSIM_VERSION}",
                              "file": os.path.basename(path), "sha256": sources.sha256(path)}
                       for name, path in inputs.items()}
    return inputs, source_manifest


def cached_manifest(output_dir: str, versions: dict, source_manifest: dict) -> Optional[dict]:
    """The manifest of a corpus in `output_dir` built by these builder versions from these
    sources, with all its files; None when it must be (re)built."""
    manifest_path = io.join(output_dir, "manifest.json")
    if not io.exists(manifest_path):
        return None
    cached = io.read_json(manifest_path)
    if (all(cached.get(key) == value for key, value in versions.items())
            and cached.get("sources") == source_manifest
            and all(io.exists(io.join(output_dir, f)) for f in cached["files"])):
        logger.info("The corpus in %s is up to date (cached)", output_dir)
        return cached
    return None


def build_demo_corpus(output_dir: str, force: bool = False) -> dict:
    """Builds (or reuses) the demo corpus; returns its manifest."""
    require_demo_packages()
    inputs, source_manifest = gensim_inputs()
    cached = None if force else cached_manifest(
        output_dir, {"builder_version": BUILDER_VERSION}, source_manifest)
    if cached:
        return cached

    with atomic_output_dir(output_dir, overwrite=True) as scratch:
        logger.info("Extracting the Wikipedia sample (markup removal, sentence splitting)...")
        train_documents = list(wikipedia_documents(inputs["wikipedia_sample"]))
        train_documents += list(line_documents(inputs["lee"]))
        train = write_documents(train_documents, io.join(scratch, "train.txt"))
        heldout = write_documents(line_documents(inputs["lee_background"]),
                                  io.join(scratch, "heldout.txt"))
        manifest = {"builder_version": BUILDER_VERSION, "sources": source_manifest,
                    "files": {"train.txt": train, "heldout.txt": heldout}}
        io.write_json_atomically(io.join(scratch, "manifest.json"), manifest)
    logger.info("Wrote %s: train %s, heldout %s", output_dir, train, heldout)
    return manifest
