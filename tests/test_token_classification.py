"""Word tagging: entity scores against seqeval, the head against Hugging Face both ways, the
readers and windows, a tagger trained from a CoNLL file, and its mistakes."""

import json
import os
import random

import numpy as np
import pytest

from albert.errors import InputError
from albert.evaluation.tagging_metrics import entity_scores, tagging_metrics
from albert.finetuning_data import tagged_files
from conftest import encoder_inputs, random_inputs, tiny_config
from scripts import run_script

TINY = dict(vocab_size=1200, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
SCHEMES = {"IOB2": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
           "IOB1": ["O", "I-PER", "B-PER", "I-LOC", "B-LOC"],
           "BIOES": ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC", "S-LOC"]}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_entity_scores_equal_seqeval(scheme):
    from seqeval.metrics import classification_report

    rng = random.Random(len(scheme))
    tags = SCHEMES[scheme]
    for _ in range(100):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 10))] for _ in range(rng.randint(1, 5))]
        predicted = [[rng.choice(tags) for _ in sentence] for sentence in gold]
        ours = entity_scores(gold, predicted)
        theirs = classification_report(gold, predicted, output_dict=True, zero_division=0)
        assert ours["overall"]["f1"] == pytest.approx(theirs["micro avg"]["f1-score"], abs=1e-12)
        assert ours["overall"]["precision"] == pytest.approx(theirs["micro avg"]["precision"], abs=1e-12)
        assert ours["overall"]["recall"] == pytest.approx(theirs["micro avg"]["recall"], abs=1e-12)
        for kind in ("PER", "LOC"):
            if kind in theirs:
                assert ours[kind]["f1"] == pytest.approx(theirs[kind]["f1-score"], abs=1e-12)
                assert ours[kind]["support"] == theirs[kind]["support"]
    metrics = tagging_metrics([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]],
                              [["O", "O", "O"]], 0.5)
    assert metrics["word_accuracy"] == pytest.approx(2 / 3) and metrics["entity_f1"] == 0.0
    assert metrics["baseline_word_accuracy"] == pytest.approx(1 / 3)


def test_the_head_equals_huggingface_both_ways(tmp_path):
    import torch
    import transformers

    from albert.checkpoints import assign_model_weights, read_checkpoint
    from albert.modeling import AlbertTokenClassifier
    from hf_reference import assert_head_matches_huggingface, torch_inputs

    config = tiny_config()
    inputs = encoder_inputs(random_inputs(config))
    model = AlbertTokenClassifier(config, num_labels=5)
    assert_head_matches_huggingface(model, inputs, str(tmp_path / "ours"), "token_classifier",
                                    "AlbertForTokenClassification")
    # A model made by Hugging Face, read into ours.
    transformers.set_seed(3)
    hf = transformers.AlbertForTokenClassification(transformers.AlbertConfig.from_pretrained(
        str(tmp_path / "ours"), num_labels=5))
    hf.save_pretrained(str(tmp_path / "theirs"))
    hf.eval()
    with torch.no_grad():
        theirs = hf(**torch_inputs(inputs)).logits.numpy()
    weights, _ = read_checkpoint(str(tmp_path / "theirs"), "hf", config, heads="required",
                                 head="token_classifier")
    ours = AlbertTokenClassifier(config, num_labels=5)
    assign_model_weights(ours, weights, "hf")
    np.testing.assert_allclose(ours(inputs, training=False)["logits"].numpy(), theirs, atol=1e-5)


class _Pieces:
    """A tokenizer stub: one piece per character, ids from 10."""
    cls_id, sep_id, unk_id = 2, 3, 1

    def tokenize(self, word):
        return [c for c in word if c.isprintable()]

    def convert_tokens_to_ids(self, tokens):
        return [10 + ord(t) % 50 for t in tokens]


def test_long_sentences_are_windowed_and_every_word_scored_once():
    words = [f"w{i}" for i in range(30)] + ["\x07"]   # a word with no piece gets <unk>
    pieces = tagged_files.word_pieces(words, _Pieces())
    assert pieces[-1] == [_Pieces.unk_id]
    features = tagged_files.windows(0, pieces, list(range(31)), 12, _Pieces())
    assert len(features) > 1 and all(len(f.input_ids) <= 12 for f in features)
    scored = [w for f in features for w in f.word_ids if w != tagged_files.IGNORED]
    assert sorted(scored) == list(range(31))                       # each word once
    for feature in features:                                      # learnt on first pieces only
        for label, word in zip(feature.label_ids, feature.word_ids):
            assert word == tagged_files.IGNORED or label == word
    every = tagged_files.windows(0, pieces, list(range(31)), 12, _Pieces(), label_all_pieces=True)
    assert sum(l != tagged_files.IGNORED for f in every for l in f.label_ids) > \
        sum(l != tagged_files.IGNORED for f in features for l in f.label_ids)


def test_the_readers_and_their_mistakes(tmp_path):
    conll = tmp_path / "train.conll"
    conll.write_text("-DOCSTART- -X- O O\n\nEU NNP B-ORG\nrejects VBZ O\n\nPeter NNP B-PER\n")
    sentences = tagged_files.read_sentences(str(conll), None, True, "--train_file")
    assert [s.words for s in sentences] == [("EU", "rejects"), ("Peter",)]
    assert tagged_files.tag_set(sentences) == ("O", "B-ORG", "B-PER")
    pos = tagged_files.read_sentences(str(conll), None, True, "--train_file", tag_column=1)
    assert pos[0].tags == ("NNP", "VBZ")
    bad = tmp_path / "bad.conll"
    bad.write_text("EU B-ORG\nrejects VBZ O\n")
    with pytest.raises(InputError, match=r"bad.conll:2: 3 columns, the file's first line has 2"):
        tagged_files.read_sentences(str(bad), None, True, "--train_file")
    jsonl = tmp_path / "dev.jsonl"
    jsonl.write_text(json.dumps({"tokens": ["a", "b"], "tags": ["O", "B-LOC"]}) + "\n"
                     + json.dumps({"tokens": [], "tags": []}) + "\n")
    with pytest.raises(InputError, match=r"dev.jsonl:2: an empty sentence"):
        tagged_files.read_sentences(str(jsonl), None, True, "--validation_file")
    jsonl.write_text(json.dumps({"tokens": ["a"], "tags": ["B-LOC"]}) + "\n")
    with pytest.raises(InputError, match=r"dev.jsonl:1: tag 'B-LOC' was never seen"):
        tagged_files.check_tags(tagged_files.read_sentences(str(jsonl), None, True, "x"),
                                ("O", "B-ORG"))
    with pytest.raises(InputError, match="looks like JSON Lines"):
        tagged_files.read_sentences(str(jsonl), "conll", True, "--train_file")
    # A word that starts with a brace is a word (Brown has `{0,T}`), not a JSON line.
    conll.write_text("the at O\n{0,T} nn O\n")
    assert tagged_files.read_sentences(str(conll), None, True, "x")[0].words == ("the", "{0,T}")


def _tagged_corpus(rng, count):
    """Context decides the tag: 'mivoxo' is I-PER after 'renwenor', O elsewhere."""
    noise = ("balopi", "mivoxo", "zomivo", "pizotu", "kabasa")
    sentences = []
    for _ in range(count):
        words = [rng.choice(noise) for _ in range(rng.randint(3, 8))]
        tags = ["O"] * len(words)
        for _ in range(rng.randint(0, 2)):
            at = rng.randrange(len(words))
            if rng.random() < 0.5 and at + 1 < len(words):
                words[at:at + 2], tags[at:at + 2] = ["renwenor", "mivoxo"], ["B-PER", "I-PER"]
            else:
                words[at], tags[at] = "rygumonmon", "B-LOC"
        sentences.append(list(zip(words, tags)))
    return sentences


def _write_conll(path, sentences):
    path.write_text("".join("".join(f"{w} {t}\n" for w, t in s) + "\n" for s in sentences))


def _flags(config_file, spm, output_dir, **flags):
    values = {"albert_config_file": config_file, "spm_model_file": spm, "output_dir": output_dir,
              "max_seq_length": 16, "train_batch_size": 16, "learning_rate": 0.002,
              "train_step": 200, "warmup_step": 20, "save_checkpoints_steps": 100,
              "eval_batch_size": 32, **flags}
    return ["run_token_classifier.py", *[f"--{k}" if v is True else f"--{k}={v}"
                                         for k, v in values.items()], "--noprogress"]


# Slow tier: about 20 s on one core (200 training steps and a prediction run), kept out of
# the default suite's 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_a_tagger_learns_from_a_conll_file_and_tags_raw_text(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    rng = random.Random(11)
    _write_conll(tmp_path / "train.conll", _tagged_corpus(rng, 160))
    dev = _tagged_corpus(rng, 40)
    _write_conll(tmp_path / "dev.conll", dev)
    run = tmp_path / "run"
    result = run_script(*_flags(config_file, spm, str(run), train_file=tmp_path / "train.conll",
                                validation_file=tmp_path / "dev.conll", test_file=tmp_path / "dev.conll",
                                do_train=True, do_eval=True, do_predict=True,
                                export_dir=tmp_path / "served"))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((run / "eval_report.json").read_text())
    metrics = report["metrics"]
    o_share = np.mean([t == "O" for s in dev for _, t in s])
    assert metrics["word_accuracy"] > max(o_share, metrics["baseline_word_accuracy"]) + 0.02
    assert metrics["entity_f1"] > metrics["baseline_entity_f1"]
    assert (run / "tags.txt").read_text() == "O\nB-LOC\nB-PER\nI-PER\n"
    predicted = (run / "test_predictions.conll").read_text().split("\n\n")
    assert len([s for s in predicted if s.strip()]) == 40

    text = "balopi renwenor  mivoxo\tzomivo"
    result = run_script("-m", "albert.predict", f"--model_dir={run}", f"--text={text}")
    assert result.returncode == 0, result.stderr[-3000:]
    tagged = json.loads(result.stdout.splitlines()[0])
    assert [w["word"] for w in tagged["words"]] == text.split()
    assert all(text[w["start"]:w["end"]] == w["word"] for w in tagged["words"])
    for entity in tagged["entities"]:
        assert text[entity["start"]:entity["end"]] == entity["text"]
    # The SavedModel, loaded from disk with strings in, tags as albert.predict did.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    loaded = tf.saved_model.load(str(tmp_path / "served" / "1"))
    served = loaded.signatures["serving_default"](text=tf.constant([text]))
    assert [t.decode() for t in served["tags"][0].numpy()] == [w["tag"] for w in tagged["words"]]
    assert list(loaded.tags().numpy().astype(str)) == ["O", "B-LOC", "B-PER", "I-PER"]
    assert served["start"][0].numpy().tolist() == [w["start"] for w in tagged["words"]]

    # The same SavedModel from the run directory alone.
    result = run_script("-m", "albert.export", f"--model_dir={run}",
                        f"--export_dir={tmp_path / 'again'}")
    assert result.returncode == 0, result.stderr[-3000:]
    again = tf.saved_model.load(str(tmp_path / "again" / "1"))
    outputs = again.signatures["serving_default"](text=tf.constant([text]))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), served["probabilities"].numpy(),
                               atol=1e-6)


@pytest.mark.parametrize("problem", ["unseen tag", "wrong columns", "one tag", "not utf-8"])
def test_a_bad_tagged_file_ends_with_one_error_line(tmp_path, synthetic_corpus, problem):
    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    (tmp_path / "train.conll").write_text("a O\nb B-LOC\n\nc O\n")
    (tmp_path / "dev.conll").write_text("a O\nb B-LOC\n")
    expected = {"unseen tag": ("dev.conll", "a O\nb B-PER\n", "dev.conll:2: tag 'B-PER'"),
                "wrong columns": ("train.conll", "a O\nb NN B-LOC\n", "train.conll:2: 3 columns"),
                "one tag": ("train.conll", "a O\nb O\n", "at least two tags"),
                "not utf-8": ("train.conll", "na\xefve O\n".encode("latin-1"), "not UTF-8")}
    name, content, message = expected[problem]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    run = tmp_path / "run"
    result = run_script(*_flags(config_file, spm, str(run), train_file=tmp_path / "train.conll",
                                validation_file=tmp_path / "dev.conll", do_train=True,
                                do_eval=True))
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
    assert not run.exists() or not os.listdir(run)


def test_the_exported_tagger_takes_strings_and_equals_the_python_path(tmp_path, synthetic_corpus):
    """Windows (max_seq_length 8), odd whitespace, a word without pieces, accents and an
    empty text: the serving function's words, offsets, tags and probabilities are the Python
    path's (albert.predict). Traced here, not saved: the slow tagger test loads a saved one."""
    import tensorflow as tf

    from albert.export.token_tagger import TokenTaggerExport
    from albert.modeling import AlbertTokenClassifier
    from albert.tasks import token_classification
    from albert.tokenization import SentencePieceTokenizer

    _, spm = synthetic_corpus
    tokenizer = SentencePieceTokenizer(spm)
    tags = ("O", "B-LOC", "B-PER", "I-PER")
    model = AlbertTokenClassifier(tiny_config(vocab_size=1200), num_labels=len(tags))
    texts = ["balopi renwenor  mivoxo\tzomivo", "Zürich\u00a0und  Genève \x01 ist",
             "", " ".join(["kabasa", "pizotu", "mivoxo"] * 7), "  rygumonmon  "]
    root = TokenTaggerExport(model, tokenizer, tags, 8)
    served = root.serving_default(text=tf.constant(texts))
    assert list(root.tags().numpy().astype(str)) == list(tags)

    sentences = [tagged_files.Sentence(str(i), tuple(text.split()), None)
                 for i, text in enumerate(texts)]
    tagged = token_classification.tagged_set(sentences, tags, tokenizer, 8)
    assert len(tagged.arrays["input_mask"]) > len(texts) + 3   # long texts were windowed
    logits = token_classification.tag_logits(model, tagged, 4)
    probabilities, predicted = token_classification.word_predictions(logits, tagged)
    for row, text in enumerate(texts):
        chosen = [float(probabilities[row][k, i]) for k, i in enumerate(predicted[row])]
        words = token_classification.tagged_text(text, [tags[i] for i in predicted[row]], chosen)["words"]
        count = int(served["word_count"][row])
        assert count == len(words)
        assert [w.decode() for w in served["words"][row, :count].numpy()] == \
            [w["word"] for w in words]
        assert served["start"][row, :count].numpy().tolist() == [w["start"] for w in words]
        assert served["end"][row, :count].numpy().tolist() == [w["end"] for w in words]
        assert [t.decode() for t in served["tags"][row, :count].numpy()] == \
            [w["tag"] for w in words]
        np.testing.assert_allclose(served["probabilities"][row, :count].numpy(),
                                   [w["probability"] for w in words], atol=1e-5)


def _tagger_args(tmp_path, spm, out, **flags):
    """run_token_classifier.py's arguments for a tiny tagger on a small synthetic CoNLL pair
    (written once into tmp_path)."""
    config_file = tmp_path / "albert_config.json"
    if not config_file.exists():
        config_file.write_text(json.dumps(TINY))
        rng = random.Random(5)
        _write_conll(tmp_path / "train.conll", _tagged_corpus(rng, 40))
        _write_conll(tmp_path / "dev.conll", _tagged_corpus(rng, 12))
    values = dict(train_file=tmp_path / "train.conll", validation_file=tmp_path / "dev.conll",
                  do_train=True, do_eval=True)
    values.update(flags)
    return _flags(config_file, spm, str(out), **{k: v for k, v in values.items() if v is not None})


# Slow tier (about 28 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_ctrl_c_stops_the_tagger_with_one_line_and_the_same_command_resumes(tmp_path,
                                                                           synthetic_corpus):
    import re

    from test_finetuning_scripts import _interrupt_when

    _, spm = synthetic_corpus
    out = tmp_path / "run"
    args = _tagger_args(tmp_path, spm, out, train_step=100000, save_checkpoints_steps=3)
    status, stderr = _interrupt_when(args, lambda: (out / "model.ckpt-3.index").exists())
    assert status == 130, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    match = re.fullmatch(r"Interrupted: stopped at step (\d+); the same command resumes from "
                         r".*model\.ckpt-(\d+)", stderr.strip().splitlines()[-1])
    assert match, stderr[-2000:]
    step = int(match.group(2))
    resumed = run_script(*_tagger_args(tmp_path, spm, out, train_step=step + 3,
                                       save_checkpoints_steps=3))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resumed from {out}/model.ckpt-{step}" in resumed.stderr
    assert json.loads((out / "eval_report.json").read_text())["checkpoint"].endswith(
        "model.ckpt-best")


# Slow tier: three tagger runs, about 40 s on 2 cores.
@pytest.mark.slow
def test_tagger_restarts_resume_after_a_kill_and_predict_with_the_best_seed(tmp_path,
                                                                            synthetic_corpus):
    from test_restarts import _kill_when, checkpoint_listed

    _, spm = synthetic_corpus
    out = tmp_path / "run"
    args = _tagger_args(tmp_path, spm, out, restarts=2, random_seed=7,
                        test_file=tmp_path / "dev.conll", do_predict=True, train_step=12,
                        save_checkpoints_steps=3)
    _kill_when(args, lambda: checkpoint_listed(out / "seed-8", 3))
    assert not (out / "restarts.json").exists()
    resumed = run_script(*args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resumed from {out}/seed-8/model.ckpt-" in resumed.stderr
    assert "Already trained to step 12" in resumed.stderr
    summary = json.loads((out / "restarts.json").read_text())
    assert summary["metric"] == "entity_f1"
    best = out / f"seed-{summary['best']['seed']}"
    assert f"Predicting with {best}/model.ckpt-best" in resumed.stderr
    alone = run_script(*_tagger_args(tmp_path, spm, tmp_path / "alone", do_train=None,
                                     do_eval=None, train_file=None, validation_file=None,
                                     test_file=tmp_path / "dev.conll", do_predict=True,
                                     init_checkpoint=best / "model.ckpt-best"))
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert (out / "test_predictions.conll").read_text() == \
        (tmp_path / "alone" / "test_predictions.conll").read_text()
