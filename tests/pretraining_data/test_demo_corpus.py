import json
import os
import re

from albert.datasets.demo_corpus import build_demo_corpus


def _documents(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert text.endswith("\n") and "\n\n\n" not in text and not text.startswith("\n")
    return [block.split("\n") for block in text.strip("\n").split("\n\n")]


def test_demo_corpus_is_real_prose_in_the_original_format(demo_corpus):
    directory, _ = demo_corpus
    with open(os.path.join(directory, "manifest.json")) as handle:
        manifest = json.load(handle)
    train = _documents(os.path.join(directory, "train.txt"))
    heldout = _documents(os.path.join(directory, "heldout.txt"))
    assert len(train) == manifest["files"]["train.txt"]["documents"] == 156
    assert len(heldout) == manifest["files"]["heldout.txt"]["documents"] == 300
    assert manifest["files"]["train.txt"]["characters"] > 2_000_000
    sentences = [s for document in train for s in document]
    assert all(len(s.split()) >= 3 for s in sentences)
    markup = re.compile(r"\{\{|\}\}|\[\[|\]\]|<ref|</ref>|^\s*[|!]|'''|==")
    assert sum(bool(markup.search(s)) for s in sentences) / len(sentences) < 0.001
    assert "Anarchism is a political philosophy" in train[0][0]
    assert {entry["package"] for entry in manifest["sources"].values()} == {"gensim==4.4.0"}


def test_demo_corpus_is_cached(demo_corpus):
    directory, _ = demo_corpus
    path = os.path.join(directory, "train.txt")
    before = os.stat(path).st_mtime_ns
    manifest = build_demo_corpus(directory)
    assert os.stat(path).st_mtime_ns == before
    assert manifest["files"]["train.txt"]["documents"] == 156
