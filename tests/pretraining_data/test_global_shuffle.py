"""Pretraining records are mixed across the whole corpus, whatever its order.

The corpus here is three sources written one after the other (disjoint
vocabularies, so every token names its source), much larger than a window:
the position of a record in the output must say nothing about its source,
and random-document partners must come from anywhere in the corpus.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from albert.pretraining_data.instances import InstanceConfig
from albert.pretraining_data.masking import MaskingConfig
from albert.pretraining_data.creation import DataConfig, create_pretraining_data, expand_output_files
from albert.pretraining_data.record_shuffle import GlobalRecordShuffle
from albert.pretraining_data.schema import load_data_contract
from pretraining_records import read_records
from scripts import REPO

SEQ, PREDICTIONS = 32, 5
SOURCES = ("a", "b", "c")
WORDS_PER_SOURCE = 30
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _source_of(token_id: int) -> int:
    """Source index of a word's id; -1 for the special tokens."""
    return -1 if token_id < len(SPECIAL) else (token_id - len(SPECIAL)) // WORDS_PER_SOURCE


@pytest.fixture(scope="module")
def blocks_corpus(tmp_path_factory):
    """(corpus, vocab): 3 sources × 300 documents in blocks, one WordPiece vocabulary."""
    directory = tmp_path_factory.mktemp("blocks")
    words = [f"{source}{i}" for source in SOURCES for i in range(WORDS_PER_SOURCE)]
    (directory / "vocab.txt").write_text("\n".join(SPECIAL + words) + "\n")
    rng = np.random.default_rng(0)
    documents = []
    for source in SOURCES:
        for _ in range(300):
            sentences = [" ".join(f"{source}{i}" for i in rng.integers(0, WORDS_PER_SOURCE, 6))
                         for _ in range(rng.integers(3, 8))]
            documents.append("\n".join(sentences))
    (directory / "corpus.txt").write_text("\n\n".join(documents) + "\n")
    return str(directory / "corpus.txt"), str(directory / "vocab.txt")


def _config(vocab, **changes):
    instance = InstanceConfig(max_seq_length=SEQ,
                              masking=MaskingConfig(max_predictions_per_seq=PREDICTIONS),
                              random_next_sentence=changes.pop("random_next_sentence", False))
    return DataConfig(instance=instance, vocab_file=vocab, dupe_factor=2,
                      documents_per_window=changes.pop("documents_per_window", 40), **changes)


def _segment_sources(record):
    """(source of segment A, source of segment B) from their unmasked tokens."""
    length = int(record["input_mask"].sum())
    ids, segments = record["input_ids"][:length], record["segment_ids"][:length]
    masked = set(record["masked_lm_positions"][record["masked_lm_weights"] > 0].tolist())

    def majority(segment):
        sources = [_source_of(int(t)) for p, t in enumerate(ids)
                   if segments[p] == segment and p not in masked and _source_of(int(t)) >= 0]
        return max(set(sources), key=sources.count) if sources else -1
    return majority(0), majority(1)


def test_record_sources_are_independent_of_their_position(tmp_path, blocks_corpus):
    corpus, vocab = blocks_corpus
    output = str(tmp_path / "train.tfrecord")
    summary = create_pretraining_data(corpus, output, _config(vocab), show_progress=False)
    assert summary["shuffle"] == "global"
    records = read_records([output], SEQ, PREDICTIONS)
    sources = np.array([_segment_sources(r)[0] for r in records])
    assert len(records) > 2000 and (sources >= 0).all()
    overall = np.bincount(sources, minlength=3) / len(sources)
    for tenth in np.array_split(sources, 10):
        share = np.bincount(tenth, minlength=3) / len(tenth)
        # A uniform order: each tenth's shares within ~4 standard errors.
        assert np.abs(share - overall).max() < 0.12, (share, overall)


def test_random_document_partners_are_drawn_from_the_whole_corpus(tmp_path, blocks_corpus):
    corpus, vocab = blocks_corpus
    output = str(tmp_path / "nsp.tfrecord")
    create_pretraining_data(corpus, output, _config(vocab, random_next_sentence=True),
                            show_progress=False)
    records = read_records([output], SEQ, PREDICTIONS)
    # In next-sentence mode label 1 means B came from a random other document.
    pairs = [_segment_sources(r) for r in records if r["next_sentence_labels"][0] == 1]
    pairs = [(a, b) for a, b in pairs if a >= 0 and b >= 0]
    other = sum(a != b for a, b in pairs) / len(pairs)
    # A uniform draw over 900 documents lands in another source 2/3 of the time.
    assert len(pairs) > 500
    assert other == pytest.approx(2 / 3, abs=0.06)


def test_the_bytes_depend_on_neither_workers_nor_window_size(tmp_path, blocks_corpus):
    corpus, vocab = blocks_corpus
    create_pretraining_data(corpus, str(tmp_path / "one@2"), _config(vocab), num_workers=1,
                            show_progress=False)
    create_pretraining_data(corpus, str(tmp_path / "two@2"),
                            _config(vocab, documents_per_window=7), num_workers=2,
                            show_progress=False)
    for one, two in zip(expand_output_files(str(tmp_path / "one@2")),
                        expand_output_files(str(tmp_path / "two@2"))):
        with open(one, "rb") as a, open(two, "rb") as b:
            assert a.read() == b.read()
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]


def test_the_shuffle_index_grows_with_windows_squared_not_with_jobs(tmp_path, blocks_corpus,
                                                                     monkeypatch):
    import albert.pretraining_data.creation as creation
    shuffles = []

    class Recorded(GlobalRecordShuffle):
        def __init__(self, *args):
            super().__init__(*args)
            shuffles.append(self)
    monkeypatch.setattr(creation, "GlobalRecordShuffle", Recorded)
    monkeypatch.setattr(creation, "_INSTANCE_JOB_TOKENS", 100)  # several jobs per window
    corpus, vocab = blocks_corpus
    create_pretraining_data(corpus, str(tmp_path / "train.tfrecord"), _config(vocab),
                            show_progress=False)
    windows = -(-900 // 40)
    # One row of bucket offsets per window (dupe rounds and blocks included), as many buckets
    # as windows: 8 x windows x (windows + 1) bytes, what docs/pretraining_data.md promises.
    assert shuffles[0].num_buckets == windows
    assert shuffles[0].index_bytes == 8 * windows * (windows + 1)


def test_the_shuffle_holds_a_bucket_at_a_time_and_is_uniform(tmp_path):
    rng = np.random.default_rng(1)
    records = [f"record {i}".encode() for i in range(20000)]
    framed = [len(r).to_bytes(8, "little") + b"\0" * 4 + r + b"\0" * 4 for r in records]
    keys = rng.integers(0, 2 ** 64, len(records), dtype=np.uint64)
    orders = []
    for buckets in (1, 10, 37):
        shuffle = GlobalRecordShuffle(str(tmp_path), buckets)
        for start in range(0, len(framed), 1000):
            shuffle.add(framed[start:start + 1000], keys[start:start + 1000],
                        np.arange(start, start + 1000) % 7)
        sizes = shuffle.bucket_sizes()
        # Buckets are balanced: the memory of the second pass is about total / buckets.
        assert sizes.max() < 1.3 * sizes.sum() / buckets
        found = list(shuffle)
        orders.append([records.index(r[12:-4]) for _, r in found])
        assert [tag for tag, _ in found] == [index % 7 for index in orders[-1]]
    assert orders[0] == orders[1] == orders[2] == list(np.argsort(keys, kind="stable"))
    # Early inputs are spread over the whole output.
    positions = np.array(orders[0])
    first_input_tenth = np.flatnonzero(positions < 2000)
    assert np.histogram(first_input_tenth, bins=10, range=(0, 20000))[0].min() > 150


def test_old_or_foreign_records_are_flagged_as_not_globally_shuffled(tmp_path, blocks_corpus):
    corpus, vocab = blocks_corpus
    output = str(tmp_path / "train.tfrecord")
    create_pretraining_data(corpus, output, _config(vocab), show_progress=False)
    assert load_data_contract([output]).not_globally_shuffled == ()
    os.remove(output + ".summary.json")  # a user's own records: no summary
    assert load_data_contract([output]).not_globally_shuffled == (output,)


def _start(corpus, vocab, output):
    return subprocess.Popen(
        [sys.executable, os.path.join(REPO, "create_pretraining_data.py"), f"--input_file={corpus}",
         f"--vocab_file={vocab}", f"--output_file={output}", f"--max_seq_length={SEQ}",
         f"--max_predictions_per_seq={PREDICTIONS}", "--dupe_factor=40", "--num_workers=1",
         "--noprogress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_scratch(directory, process):
    for _ in range(600):
        if [name for name in os.listdir(directory) if f".tmp-{process.pid}-" in name]:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError("no scratch directory appeared")


def test_a_killed_run_leaves_nothing_after_the_next_run(tmp_path, blocks_corpus):
    corpus, vocab = blocks_corpus
    output = tmp_path / "out" / "train.tfrecord"
    output.parent.mkdir()
    process = _start(corpus, vocab, output)
    _wait_for_scratch(output.parent, process)
    process.kill()
    process.wait()
    assert [name for name in os.listdir(output.parent) if ".tmp-" in name]  # SIGKILL: left behind

    process = _start(corpus, vocab, output)
    _wait_for_scratch(output.parent, process)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "ERROR: terminated" in stderr
    # The terminated run cleaned its own scratch, and removed the killed run's.
    assert os.listdir(output.parent) == []


def test_training_warns_once_about_records_not_globally_shuffled(tmp_path, blocks_corpus, caplog):
    from albert.tasks.pretraining import warn_if_not_globally_shuffled

    corpus, vocab = blocks_corpus
    output = str(tmp_path / "train.tfrecord")
    create_pretraining_data(corpus, output, _config(vocab), show_progress=False)
    with caplog.at_level("WARNING", logger="albert"):
        warn_if_not_globally_shuffled(load_data_contract([output]))
    assert not caplog.records
    summary_path = output + ".summary.json"
    with open(summary_path) as handle:
        summary = json.load(handle)
    del summary["shuffle"]  # a summary written before records were shuffled globally
    with open(summary_path, "w") as handle:
        json.dump(summary, handle)
    with caplog.at_level("WARNING", logger="albert"):
        warn_if_not_globally_shuffled(load_data_contract([output]))
    assert len(caplog.records) == 1
    assert "not known to hold globally shuffled records" in caplog.text
    assert "create_pretraining_data.py" in caplog.text


# Slow tier (about 25 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_each_record_knows_its_corpus_document(tmp_path, blocks_corpus):
    """The documents file beside the summary gives, per output file and in file order, the
    corpus document each record was cut from (documents 0-299 are source a, 300-599 b, ...)."""
    from albert.pretraining_data.schema import read_record_documents
    from albert.pretraining_data.creation import expand_output_files

    corpus, vocab = blocks_corpus
    spec = str(tmp_path / "train.tfrecord@2")
    summary = create_pretraining_data(corpus, spec, _config(vocab), num_workers=2,
                                      show_progress=False)
    assert summary["documents_file"] == "train.tfrecord.documents.npz"
    seen = set()
    for path in expand_output_files(spec):
        documents = read_record_documents(path)
        records = read_records(path, SEQ, PREDICTIONS)
        assert len(documents) == len(records) == summary["record_counts"][os.path.basename(path)]
        for document, record in zip(documents, records):
            assert _segment_sources(record)[0] == document // 300
        seen.update(documents.tolist())
    # Nearly every document yields records (a few short ones may not).
    assert len(seen) > 0.9 * 900 and max(seen) < 900
    # Another data set in the same directory has its own summary and documents file.
    other = str(tmp_path / "other.tfrecord")
    create_pretraining_data(corpus, other, _config(vocab, random_next_sentence=True),
                            show_progress=False)
    assert len(read_record_documents(other)) == len(read_records(other, SEQ, PREDICTIONS))
    first = expand_output_files(spec)[0]
    assert len(read_record_documents(first)) == len(read_records(first, SEQ, PREDICTIONS))
    os.remove(str(tmp_path / "train.tfrecord.documents.npz"))  # data made before the file
    assert read_record_documents(expand_output_files(spec)[0]) is None
