"""create_pretraining_data on Apache Beam: the one-machine bytes, from any number of workers.

Beam's local FnApiRunner (the DirectRunner's engine), offline: in this process (one worker), and in two worker
processes with the work cut small (many blocks of raw documents, many sort
partitions), so that numbering, joins and fragments all cross workers.
"""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

beam = pytest.importorskip("apache_beam")

from albert.pretraining_data.beam_pipeline import (Sizes,  # noqa: E402
                                                   create_pretraining_data_on_beam)
from albert.pretraining_data.creation import (DataConfig, create_pretraining_data,  # noqa: E402
                                              expand_output_files)
from albert.pretraining_data.instances import InstanceConfig  # noqa: E402
from albert.pretraining_data.masking import MaskingConfig  # noqa: E402
from albert.pretraining_data.schema import documents_file_for  # noqa: E402
from pretraining_records import read_records  # noqa: E402
from scripts import REPO, assert_clean_failure, run_script, run_script_process  # noqa: E402

SEQ, PREDICTIONS = 32, 5
SOURCES = ("a", "b", "c")
WORDS = 30
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TWO_WORKERS = "direct_num_workers=2,direct_running_mode=multi_processing"
SMALL_CUTS = Sizes(records_per_partition=37, raw_documents_per_block=5)
# Timing fields: the only ones two runs of the same data may differ in.
TIMING = {"seconds", "instances_per_second", "output_files"}


def _sentence(rng, source):
    return " ".join(f"{source}{i}" for i in rng.integers(0, WORDS, rng.integers(3, 9)))


def _write_corpus(path, documents):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n\n".join("\n".join(d) for d in documents) + "\n")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """{shape: corpus path}, and the WordPiece vocabulary of all of them."""
    directory = tmp_path_factory.mktemp("beam-corpora")
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + [f"{s}{i}" for s in SOURCES for i in range(WORDS)])
                     + "\n")
    rng = np.random.default_rng(0)
    shapes = {
        # 3 sources one after the other, disjoint vocabularies: a token names its source.
        "many_short": [[_sentence(rng, s) for _ in range(rng.integers(1, 7))]
                       for s in SOURCES for _ in range(150)],
        "few_long": [[_sentence(rng, s) for _ in range(120)] for s in SOURCES],
        "one_document": [[_sentence(rng, "a") for _ in range(80)]],
    }
    paths = {}
    for shape, documents in shapes.items():
        paths[shape] = str(directory / f"{shape}.txt")
        _write_corpus(paths[shape], documents)
    return paths, str(vocab)


def _config(vocab, **instance):
    return DataConfig(instance=InstanceConfig(max_seq_length=SEQ, masking=MaskingConfig(
        max_predictions_per_seq=PREDICTIONS), **instance), vocab_file=vocab, dupe_factor=2,
        documents_per_window=40)


def _outputs(spec):
    files = expand_output_files(spec)
    summary = spec.split("@")[0] + ".summary.json"
    return files + [documents_file_for(summary)], summary


def _assert_same_outputs(one_spec, beam_spec):
    one_files, one_summary = _outputs(one_spec)
    beam_files, beam_summary = _outputs(beam_spec)
    for a, b in zip(one_files, beam_files):
        with open(a, "rb") as left, open(b, "rb") as right:
            assert left.read() == right.read(), (a, b)
    with open(one_summary) as left, open(beam_summary) as right:
        one, beam = json.load(left), json.load(right)
    assert {k: v for k, v in one.items() if k not in TIMING} == \
        {k: v for k, v in beam.items() if k not in TIMING}


# What Beam and its worker processes used to write on every run: start-up notes, servers and
# channels opened, each worker line twice (once forwarded to the driver as "Worker: ...").
BEAM_NOISE = ("GCSFileSystem", "apitools", "bigquery_storage", "semi_persistent_directory",
              "Worker: ", "INFO:", "channel", "harness")


# Two of the three shapes are in the slow tier (19 s and 23 s on 2 cores), to keep the default
# suite within 15 minutes.
@pytest.mark.parametrize("shape", ["many_short",
                                   *(pytest.param(shape, marks=pytest.mark.slow)
                                     for shape in ("few_long", "one_document"))])
def test_the_beam_bytes_are_the_one_machine_bytes(tmp_path, corpora, shape, capfd, caplog):
    paths, vocab = corpora
    config = _config(vocab)
    one = str(tmp_path / "one" / "train.tfrecord@3")
    create_pretraining_data(paths[shape], one, config, num_workers=1, show_progress=False)
    in_process = str(tmp_path / "beam1" / "train.tfrecord@3")
    create_pretraining_data_on_beam(paths[shape], in_process, config, "")
    _assert_same_outputs(one, in_process)
    two_workers = str(tmp_path / "beam2" / "train.tfrecord@3")
    capfd.readouterr()
    caplog.clear()
    caplog.set_level(logging.INFO)  # Beam's INFO lines would be recorded, were they logged
    create_pretraining_data_on_beam(paths[shape], two_workers, config, TWO_WORKERS,
                                    sizes=SMALL_CUTS)
    _assert_same_outputs(one, two_workers)
    # Quiet: the workers (their stderr is this process's) and Beam's driver log no notes.
    written = capfd.readouterr()
    assert not [line for line in (written.out + written.err).splitlines()
                if any(noise in line for noise in BEAM_NOISE)], written
    assert [r.getMessage() for r in caplog.records if r.levelno < logging.WARNING] == [
        "Making the records on Apache Beam: Beam's local engine, 2 processes"]
    # Nothing but the outputs: the working directory is gone.
    assert sorted(os.listdir(tmp_path / "beam2")) == sorted(
        ["train.tfrecord.summary.json", "train.tfrecord.documents.npz"]
        + [os.path.basename(f) for f in expand_output_files(two_workers)])


def _source(token_id):
    return -1 if token_id < len(SPECIAL) else (token_id - len(SPECIAL)) // WORDS


def test_partners_come_from_the_whole_corpus_at_the_uniform_rate(tmp_path, corpora):
    paths, vocab = corpora
    output = str(tmp_path / "nsp.tfrecord")
    create_pretraining_data_on_beam(paths["many_short"], output,
                                    _config(vocab, random_next_sentence=True), "",
                                    sizes=SMALL_CUTS)
    records = read_records([output], SEQ, PREDICTIONS)
    other = []
    for record in records:
        if record["next_sentence_labels"][0] != 1:
            continue
        length = int(record["input_mask"].sum())
        ids, segments = record["input_ids"][:length], record["segment_ids"][:length]
        sources = [{_source(int(t)) for t, s in zip(ids, segments) if s == side} - {-1}
                   for side in (0, 1)]
        if len(sources[0]) == 1 and len(sources[1]) == 1:  # (a masked token may be random)
            other.append(sources[0] != sources[1])
    # A uniform draw over 450 documents of 3 equal sources lands in another one 2/3 of the time.
    assert len(other) > 300
    assert np.mean(other) == pytest.approx(2 / 3, abs=0.07)


def test_malformed_options_are_one_error_line_and_leave_nothing(tmp_path, corpora):
    paths, vocab = corpora
    result = run_script("create_pretraining_data.py", f"--input_file={paths['one_document']}",
                        f"--vocab_file={vocab}", f"--output_file={tmp_path / 'out' / 'x@2'}",
                        "--beam_pipeline_options=direct_num_workers", "--noprogress")
    assert_clean_failure(result, "'direct_num_workers' is not key=value")
    assert not (tmp_path / "out").exists()


def test_without_beam_installed_the_error_names_the_install_command(tmp_path, corpora):
    paths, vocab = corpora
    hidden = tmp_path / "no_beam" / "apache_beam"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ImportError('No module named apache_beam', name='apache_beam')\n")
    result = run_script_process(
        "create_pretraining_data.py", f"--input_file={paths['one_document']}",
        f"--vocab_file={vocab}", f"--output_file={tmp_path / 'out.tfrecord'}",
        "--beam_pipeline_options=", "--noprogress",
        env={"PYTHONPATH": str(tmp_path / "no_beam")}, timeout=300)
    assert_clean_failure(result, 'pip install -e ".[beam]"')
    assert not (tmp_path / "out.tfrecord").exists()


def test_a_retried_bundle_writes_the_same_bytes(tmp_path, corpora):
    """Runners retry a failed bundle by running it again: every step gives the same output
    the second time, and a fragment written twice holds the same bytes."""
    from albert.pretraining_data.beam_pipeline import (_FillPartners, _PlanPairs,
                                                       _WriteFragments, fragment_path)
    paths, vocab = corpora
    config = _config(vocab, random_next_sentence=True)
    documents = [(0, [[5, 6, 7], [8, 9]]), (1, [[10, 11], [12]]), (2, [[13, 14, 15]])]

    def comparable(output):
        if isinstance(output, beam.pvalue.TaggedOutput):
            return output.tag, comparable(output.value)
        return repr(output)  # records, pairs and statistics are dataclasses, tuples, bytes

    def run(step, elements, **side):
        step.setup()
        return [[comparable(output) for output in step.process(element, **side)]
                for element in elements]

    first = run(_PlanPairs(config), documents, num_documents=3)
    assert first == run(_PlanPairs(config), documents, num_documents=3)
    requests = [(0, {"segments": [documents[0][1]],
                     "requests": [(1, 0, _planned_pair(config, documents[1]))]})]
    assert run(_FillPartners(config), requests, num_documents=3) == \
        run(_FillPartners(config), requests, num_documents=3)
    records = [((key, key % 3, 0, 0), bytes([key % 256]) * 20) for key in range(50, 0, -7)]
    writer = _WriteFragments(str(tmp_path), 2)
    outputs = run(writer, [(0, list(records))], partition_counts={0: len(records)})
    path = fragment_path(str(tmp_path), 0, 0) + ".records"
    with open(path, "rb") as handle:
        written = handle.read()
    assert run(writer, [(0, list(reversed(records)))], partition_counts={0: len(records)}) \
        == outputs
    with open(path, "rb") as handle:
        assert handle.read() == written


def _planned_pair(config, document):
    """A pair of `document` that takes B from another document."""
    from albert.pretraining_data.creation import instance_stream_name
    from albert.pretraining_data.instances import InstanceStreams, plan_pairs

    for dupe in range(100):
        streams = InstanceStreams(instance_stream_name(config.random_seed, dupe, document[0]))
        for pair in plan_pairs(document[1], streams.plan, config.instance):
            if pair.random_document:
                return pair
    raise AssertionError("no random-document pair in 100 rounds")


def test_a_failed_pipeline_leaves_nothing_and_the_rerun_gives_the_same_bytes(
        tmp_path, corpora, monkeypatch):
    """A step that fails after the records were made (while the output files are assembled):
    nothing appears at the destination, the working directory is gone, and the same command
    run again writes the one-machine bytes."""
    from albert.pretraining_data import beam_pipeline

    paths, vocab = corpora
    config = _config(vocab)
    one = str(tmp_path / "one" / "train.tfrecord@2")
    create_pretraining_data(paths["many_short"], one, config, show_progress=False)

    def fail(self, element):
        raise OSError("disk full (a failure injected by the test)")

    monkeypatch.setattr(beam_pipeline._AssembleOutput, "process", fail)
    spec = str(tmp_path / "beam" / "train.tfrecord@2")
    with pytest.raises(Exception, match="disk full"):
        create_pretraining_data_on_beam(paths["many_short"], spec, config, "")
    assert not (tmp_path / "beam").exists() or os.listdir(tmp_path / "beam") == []
    monkeypatch.undo()
    create_pretraining_data_on_beam(paths["many_short"], spec, config, "")
    _assert_same_outputs(one, spec)


@pytest.mark.slow  # 28 s on 2 cores; the failed-pipeline test above stays in the default suite
def test_a_terminated_driver_leaves_nothing(tmp_path, corpora):
    """SIGTERM (a scheduler stopping the driver) cleans up like any failure: one ERROR line,
    no working directory, no output."""
    paths, vocab = corpora
    output = tmp_path / "out" / "train.tfrecord"
    output.parent.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get(
        "PYTHONPATH")])))
    process = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
         f"--input_file={paths['many_short']}", f"--vocab_file={vocab}",
         f"--output_file={output}", f"--max_seq_length={SEQ}",
         f"--max_predictions_per_seq={PREDICTIONS}", "--dupe_factor=40",
         "--beam_pipeline_options=", "--noprogress"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(1200):  # the working directory appears once Beam is imported and set up
        if [name for name in os.listdir(output.parent) if f".tmp-{process.pid}-" in name]:
            break
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    else:
        raise AssertionError("no working directory appeared")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    assert "ERROR: terminated" in stderr, stderr
    assert os.listdir(output.parent) == []
