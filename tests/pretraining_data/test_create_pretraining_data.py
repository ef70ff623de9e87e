"""End-to-end runs of create_pretraining_data on the synthetic and the real corpus."""

import gzip
import json
import os

import pytest

from albert.pretraining_data.instances import InstanceConfig
from albert.pretraining_data.masking import MaskingConfig
from albert.pretraining_data.creation import DataConfig, create_pretraining_data, expand_output_files
from albert.errors import InputError
from albert.tokenization import SentencePieceTokenizer
from pretraining_records import fills_budget, read_records, redraw, replacement_counts
from scripts import assert_clean_failure, run_script

SEQ, PREDICTIONS = 64, 10


def _config(model, **changes):
    instance = InstanceConfig(max_seq_length=SEQ, masking=MaskingConfig(max_predictions_per_seq=PREDICTIONS),
                              **changes.pop("instance", {}))
    return DataConfig(instance=instance, spm_model_file=model, dupe_factor=changes.pop("dupe_factor", 3),
                      documents_per_window=changes.pop("documents_per_window", 50), **changes)


def _check_statistics(records, summary, tokenizer):
    assert len(records) == summary["instances"] >= 5000
    counts = replacement_counts(records, tokenizer.mask_id)
    total = sum(counts.values())
    assert counts["mask"] / total == pytest.approx(0.8, abs=0.02)
    assert counts["kept"] / total == pytest.approx(0.1, abs=0.02)
    assert counts["random"] / total == pytest.approx(0.1, abs=0.02)
    for fraction, expected in zip(summary["ngram_drawn"].values(), (6 / 11, 3 / 11, 2 / 11)):
        assert fraction == pytest.approx(expected, abs=0.02)
    filled = 0
    for record in records:
        length = int(record["input_mask"].sum())
        ids = record["input_ids"][:length]
        assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
        positions = record["masked_lm_positions"][record["masked_lm_weights"] > 0]
        # The first [SEP] closes segment 0 (searching the ids could find a
        # random replacement that happens to be [SEP]'s id).
        first_sep = int((record["segment_ids"][:length] == 0).sum()) - 1
        special = {0, first_sep, length - 1}
        assert special.isdisjoint(positions.tolist())  # [CLS] / [SEP] never masked
        filled += fills_budget(record, 0.15, PREDICTIONS)
    assert filled / len(records) > 0.99
    return counts


# Slow tier (about 30 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_synthetic_corpus_statistics(tmp_path, synthetic_corpus):
    corpus, model = synthetic_corpus
    tokenizer = SentencePieceTokenizer(model)
    output = str(tmp_path / "train.tfrecord@2")
    summary = create_pretraining_data(corpus, output, _config(model), show_progress=False)
    records = read_records(expand_output_files(output), SEQ, PREDICTIONS)
    _check_statistics(records, summary, tokenizer)
    labels = sum(int(r["next_sentence_labels"][0]) for r in records) / len(records)
    # The original's quirk: one-segment chunks add random-document pairs labelled 1.
    random_share = summary["random_document_negatives"] / len(records)
    assert labels == pytest.approx(0.5 + 0.5 * random_share, abs=0.03)

    only_pairs = create_pretraining_data(
        corpus, str(tmp_path / "pairs.tfrecord"),
        _config(model, instance={"single_segment_random_document": False}), show_progress=False)
    assert only_pairs["random_document_negatives"] == 0
    assert only_pairs["sentence_order_labels"]["fraction_1"] == pytest.approx(0.5, abs=0.03)
    assert only_pairs["instances"] >= 5000


# `slow` (most of a minute: the real corpus through a process of its own); CI runs it.
@pytest.mark.slow
def test_real_corpus_through_the_command_line(tmp_path, demo_corpus):
    directory, model = demo_corpus
    tokenizer = SentencePieceTokenizer(model)
    common = [f"--input_file={directory}/train.txt", f"--spm_model_file={model}",
              f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
              "--dupe_factor=2", "--documents_per_window=20", "--noprogress"]
    result = run_script("create_pretraining_data.py", *common, "--num_workers=2",
                        "--nosingle_segment_random_document",
                        f"--output_file={tmp_path / 'two' / 'data.tfrecord@3'}")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "two" / "data.tfrecord.summary.json") as handle:
        summary = json.load(handle)
    files = expand_output_files(str(tmp_path / "two" / "data.tfrecord@3"))
    records = read_records(files, SEQ, PREDICTIONS)
    _check_statistics(records, summary, tokenizer)
    labels = sum(int(r["next_sentence_labels"][0]) for r in records) / len(records)
    assert labels == pytest.approx(0.5, abs=0.03)

    # Same inputs and seed with one worker: byte-identical files.
    result = run_script("create_pretraining_data.py", *common, "--num_workers=1",
                        "--nosingle_segment_random_document",
                        f"--output_file={tmp_path / 'one' / 'data.tfrecord@3'}")
    assert result.returncode == 0, result.stderr
    for name in os.listdir(tmp_path / "two"):
        if not name.endswith(".json"):
            assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_another_seed_gives_different_bytes(tmp_path, synthetic_corpus):
    corpus, model = synthetic_corpus
    create_pretraining_data(corpus, str(tmp_path / "a"), _config(model, dupe_factor=1), show_progress=False)
    create_pretraining_data(corpus, str(tmp_path / "b"), _config(model, dupe_factor=1, random_seed=7),
                            show_progress=False)
    create_pretraining_data(corpus, str(tmp_path / "c"), _config(model, dupe_factor=1), show_progress=False)
    assert (tmp_path / "a").read_bytes() != (tmp_path / "b").read_bytes()
    assert (tmp_path / "a").read_bytes() == (tmp_path / "c").read_bytes()


def test_inputs_as_globs_comma_lists_and_gzip_with_file_boundaries(tmp_path, synthetic_corpus):
    _, model = synthetic_corpus
    text = "Kalo mitu ren sa vo.\nPi dan el or quis ba ne.\n"
    (tmp_path / "a1.txt").write_text(text)            # no blank line at the end
    (tmp_path / "a2.txt").write_text(text)
    with gzip.open(tmp_path / "b.txt.gz", "wt") as handle:
        handle.write(text + "\n" + text)
    summary = create_pretraining_data(
        f"{tmp_path}/a*.txt,{tmp_path}/b.txt.gz", str(tmp_path / "out"),
        _config(model, dupe_factor=1), show_progress=False)
    # a1, a2 and the two documents of b: every file starts a new document.
    assert summary["documents"] == 4
    assert summary["input_files"] == [str(tmp_path / name) for name in ("a1.txt", "a2.txt", "b.txt.gz")]


def test_wordpiece_vocabulary_path(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat",
                                "on", "mat", "##s", "a", "dog", "."]) + "\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\nA dog sat.\nThe cats sat.\n\nA cat.\nThe dog.\n")
    config = DataConfig(instance=InstanceConfig(max_seq_length=32), vocab_file=str(vocab),
                        dupe_factor=5)
    summary = create_pretraining_data(str(corpus), str(tmp_path / "out"), config, show_progress=False)
    records = read_records([str(tmp_path / "out")], 32, 20)
    assert summary["instances"] == len(records) > 0
    for record in records:   # "##s" continues a word: boundary 0
        ids = list(record["input_ids"])
        for position, token in enumerate(ids):
            if token == 10:
                assert record["token_boundary"][position] == 0


def _beam_installed() -> bool:
    try:
        import apache_beam  # noqa: F401  (the [beam] extra, in [test])
    except ImportError:
        return False
    return True


# The same catalogue on one machine and on Apache Beam (--beam_pipeline_options).
ENGINES = ["one_machine", pytest.param("beam", marks=pytest.mark.skipif(
    not _beam_installed(), reason="apache-beam is not installed"))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("problem", ["empty", "not_utf8", "missing_model", "short_sequence",
                                     "missing_input", "directory_output", "existing_output"])
def test_bad_input_fails_cleanly_without_partial_outputs(tmp_path, synthetic_corpus, problem,
                                                         engine):
    _, model = synthetic_corpus
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Kalo mitu ren.\nSa vo pi.\n")
    args = {"input_file": str(corpus), "spm_model_file": model, "max_seq_length": "64",
            "output_file": str(tmp_path / "out" / "data.tfrecord@2")}
    if engine == "beam":
        args["beam_pipeline_options"] = ""
    expected = {"empty": "No pretraining instances", "not_utf8": "corpus.txt:2: not valid UTF-8",
                "missing_model": "Cannot read SentencePiece model",
                "short_sequence": "max_seq_length=4 is too small",
                "missing_input": "No input file matches",
                "directory_output": "is a directory; give a file name",
                "existing_output": "data.tfrecord-00001-of-00002 already exists"}[problem]
    if problem == "empty":
        corpus.write_text("\n   \n\n")
    elif problem == "not_utf8":
        corpus.write_bytes(b"Kalo mitu.\nbad \xff\xfe bytes\n")
    elif problem == "missing_model":
        args["spm_model_file"] = str(tmp_path / "nope.model")
    elif problem == "short_sequence":
        args["max_seq_length"] = "4"
    elif problem == "directory_output":
        (tmp_path / "out").mkdir()
        args["output_file"] = str(tmp_path / "out")
    elif problem == "existing_output":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "data.tfrecord-00001-of-00002").write_bytes(b"earlier data")
    else:
        args["input_file"] = str(tmp_path / "nothing*.txt")
    result = run_script("create_pretraining_data.py", *[f"--{k}={v}" for k, v in args.items()],
                        "--noprogress")
    assert_clean_failure(result, expected)
    leftovers = os.listdir(tmp_path / "out") if (tmp_path / "out").exists() else []
    if problem == "existing_output":  # left exactly as it was
        assert leftovers == ["data.tfrecord-00001-of-00002"]
        assert (tmp_path / "out" / leftovers[0]).read_bytes() == b"earlier data"
    else:
        assert leftovers == []
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["corpus.txt"] + (["out"] if (tmp_path / "out").exists() else []))


def test_unsupported_permutation_flag_is_refused(synthetic_corpus, tmp_path):
    corpus, model = synthetic_corpus
    result = run_script("create_pretraining_data.py", f"--input_file={corpus}",
                        f"--output_file={tmp_path / 'x'}", f"--spm_model_file={model}",
                        "--do_permutation")
    assert_clean_failure(result, "--do_permutation is not supported")


def test_config_validation():
    with pytest.raises(InputError, match="dupe_factor"):
        DataConfig(instance=InstanceConfig(), dupe_factor=0).validate()


def test_a_sequence_length_too_short_for_two_segments_warns(tmp_path, synthetic_corpus):
    corpus, model = synthetic_corpus
    result = run_script("create_pretraining_data.py", f"--input_file={corpus}",
                        f"--output_file={tmp_path / 'short.tfrecord'}", f"--spm_model_file={model}",
                        "--max_seq_length=5", "--dupe_factor=1", "--noprogress")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "took segment B from a random document" in result.stderr
    assert "max_seq_length=5 leaves room for 2 tokens" in result.stderr


def test_outputs_are_written_with_the_usual_permissions(tmp_path, synthetic_corpus):
    corpus, model = synthetic_corpus
    create_pretraining_data(corpus, str(tmp_path / "out.tfrecord"), _config(model, dupe_factor=1),
                            show_progress=False)
    umask = os.umask(0)
    os.umask(umask)
    for name in ("out.tfrecord", "out.tfrecord.summary.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


def _runs_of_masked_words(record):
    """Lengths of runs of consecutive masked positions (every token here is one word)."""
    positions = sorted(record["masked_lm_positions"][record["masked_lm_weights"] > 0].tolist())
    runs, previous = [], None
    for position in positions:
        if previous is not None and position == previous + 1:
            runs[-1] += 1
        else:
            runs.append(1)
        previous = position
    return runs


def _span_length_shares(records):
    counts = [0, 0, 0, 0]
    for record in records:
        for run in _runs_of_masked_words(record):
            counts[min(run, 4) - 1] += 1
    return [count / sum(counts) for count in counts]


def test_span_lengths_in_the_written_records_follow_one_over_n(tmp_path):
    """p(n) = (1/n) / sum(1/k): 6/11, 3/11, 2/11, measured on the records themselves.

    Every word is one vocabulary entry, sequences are long (1024) and the
    budget (40) covers 4% of a sequence, so spans rarely collide or touch
    and a run of masked positions is one span; with 40 masks per sequence,
    the one span shrunk to fit the end of the budget shifts the shares by
    less than a point (measured with the masking function alone:
    0.546 / 0.272 / 0.174).
    """
    from albert.pretraining_data.inputs import DynamicMasking
    from albert.pretraining_data.masking import MaskingVocabulary

    words = [f"w{i}" for i in range(900)]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    rng = __import__("random").Random(11)
    with open(tmp_path / "corpus.txt", "w") as handle:
        for document in range(40):
            if document:
                handle.write("\n")
            for _ in range(120):
                handle.write(" ".join(rng.choice(words) for _ in range(20)) + "\n")
    config = DataConfig(instance=InstanceConfig(max_seq_length=1024, short_seq_prob=0.0,
                                                masking=MaskingConfig(max_predictions_per_seq=40)),
                        vocab_file=str(vocab), dupe_factor=10)
    create_pretraining_data(str(tmp_path / "corpus.txt"), str(tmp_path / "data.tfrecord"), config,
                            show_progress=False)
    records = read_records([str(tmp_path / "data.tfrecord")], 1024, 40)
    assert len(records) >= 900
    expected = [6 / 11, 3 / 11, 2 / 11]
    shares = _span_length_shares(records)
    assert shares[:3] == pytest.approx(expected, abs=0.015) and shares[3] < 0.02
    # The flat or reversed distributions would be far off.
    assert abs(shares[0] - 1 / 3) > 0.15 and abs(shares[2] - 6 / 11) > 0.3

    # Dynamic masking (--masked_lm_budget) draws spans from the same distribution.
    dynamic = DynamicMasking(MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=40),
                             MaskingVocabulary(905, mask_id=4, cls_id=2, sep_id=3), seed=3)
    remasked = redraw(dynamic, records, list(range(len(records))))
    dynamic_shares = _span_length_shares(remasked)
    assert dynamic_shares[:3] == pytest.approx(expected, abs=0.015) and dynamic_shares[3] < 0.02
