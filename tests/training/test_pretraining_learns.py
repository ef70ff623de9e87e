"""A tiny ALBERT learns: MLM on the real demo corpus, sentence order where order is learnable.

Measured while writing these tests (3 seeds each): on the demo corpus the
training MLM loss falls from ~8.6 (first 30 steps) to ~6.4 (steps 271-300);
on a corpus whose sentences start with their position, held-out sentence-
order accuracy reaches 0.82-0.83 after 1500 steps (0.5 until ~500 steps). On the demo corpus itself
sentence order is learned slowly at this scale (~0.53 held-out after
1500 steps of a 4-layer model): see the slow test below.
"""

import json
import os
import random

import pytest

from albert.evaluation.chance import sentence_label_counts
from albert.pretraining_data.instances import InstanceConfig
from albert.pretraining_data.masking import MaskingConfig
from albert.pretraining_data.creation import DataConfig, create_pretraining_data
from albert.tokenization.training import train_sentencepiece
from scripts import run_script

SEQ, PREDICTIONS = 64, 10


def _records(corpus, model, path, dupe_factor, pairs_only=False):
    config = DataConfig(instance=InstanceConfig(
        max_seq_length=SEQ, single_segment_random_document=not pairs_only,
        masking=MaskingConfig(max_predictions_per_seq=PREDICTIONS)),
        spm_model_file=model, dupe_factor=dupe_factor)
    create_pretraining_data(corpus, path, config, show_progress=False)
    return path


def _pretrain(tmp_path, config, train, heldout, steps, batch=32, seed=12345):
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(config))
    output_dir = tmp_path / "run"
    result = run_script(
        "run_pretraining.py", f"--albert_config_file={config_file}", f"--input_file={train}",
        f"--eval_file={heldout}", f"--output_dir={output_dir}", f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PREDICTIONS}", f"--train_batch_size={batch}",
        f"--num_train_steps={steps}", f"--num_warmup_steps={steps // 10}", "--learning_rate=0.01",
        f"--save_checkpoints_steps={steps}", "--do_eval", "--max_eval_steps=200",
        "--steps_per_loop=50", f"--random_seed={seed}", "--noprogress", timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(output_dir / "train_log.jsonl") as handle:
        log = [json.loads(line) for line in handle]
    with open(output_dir / "eval_results.json") as handle:
        evaluation = json.load(handle)["evaluations"][-1]
    return log, evaluation


def _tiny(vocab_size, **changes):
    return {"vocab_size": vocab_size, "embedding_size": 32, "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
            "max_position_embeddings": SEQ, **changes}


# Slow: a minute of training; the default suite keeps the fine-tuning scripts' learnability
# checks and test_diagnostics.py's pretraining run that learns (docs/testing.md).
@pytest.mark.slow
def test_masked_lm_loss_falls_on_the_demo_corpus(tmp_path, demo_corpus):
    directory, model = demo_corpus
    train = _records(os.path.join(directory, "train.txt"), model, str(tmp_path / "train.tfrecord"), 2)
    heldout = _records(os.path.join(directory, "heldout.txt"), model,
                       str(tmp_path / "heldout.tfrecord"), 1, pairs_only=True)
    log, evaluation = _pretrain(tmp_path, _tiny(4000), train, heldout, steps=300)
    first = sum(row["masked_lm_loss"] for row in log[:30]) / 30
    last = sum(row["masked_lm_loss"] for row in log[-30:]) / 30
    assert first - last > 1.5, (first, last)
    assert evaluation["masked_lm_loss"] < 7.5           # ~9.0 before training
    assert evaluation["masked_lm_accuracy"] > 0.03      # ~0.001 before training


def _ordered_corpus(path, documents, rng, words):
    """Documents whose j-th sentence starts with the number j: sentence order is learnable."""
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(documents):
            if index:
                handle.write("\n")
            for position in range(1, rng.randint(3, 8) + 1):
                sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
                handle.write(f"{position} {sentence}.\n")
    return path


# slow (about 1 minute): the default suite keeps the masked-LM learning check.
@pytest.mark.slow
def test_sentence_order_is_learned_where_order_is_learnable(tmp_path):
    rng = random.Random(11)
    syllables = ["ka", "lo", "mi", "tu", "ren", "sa", "vo", "pi", "dan", "el", "or", "quis", "ba"]
    words = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(1, 3)))
                    for _ in range(800)})
    train_text = _ordered_corpus(str(tmp_path / "train.txt"), 1200, rng, words)
    heldout_text = _ordered_corpus(str(tmp_path / "heldout.txt"), 150, rng, words)
    model = train_sentencepiece([train_text], str(tmp_path / "spm"), vocab_size=300)
    train = _records(train_text, model, str(tmp_path / "train.tfrecord"), 3, pairs_only=True)
    heldout = _records(heldout_text, model, str(tmp_path / "heldout.tfrecord"), 3, pairs_only=True)
    _, evaluation = _pretrain(tmp_path, _tiny(300), train, heldout, steps=1500)
    # Chance is 0.5 (pairs only, ~1000 held-out pairs: one standard error is 0.016).
    assert evaluation["sentence_order_accuracy"] > 0.7, evaluation


@pytest.mark.slow
def test_sentence_order_on_the_demo_corpus(tmp_path, demo_corpus):
    directory, model = demo_corpus
    train = _records(os.path.join(directory, "train.txt"), model, str(tmp_path / "train.tfrecord"), 5,
                     pairs_only=True)
    heldout = _records(os.path.join(directory, "heldout.txt"), model,
                       str(tmp_path / "heldout.tfrecord"), 4, pairs_only=True)
    config = _tiny(4000, embedding_size=64, hidden_size=128, num_hidden_layers=4,
                   intermediate_size=256)
    _, evaluation = _pretrain(tmp_path, config, train, heldout, steps=1500, batch=64)
    # A head answering one label scores the held-out set's majority share, not 0.5: the bar is
    # 1.5 points above that share (measured: 0.530 against 0.5005 on 4,164 pairs, 2026-11-28).
    counts = sentence_label_counts(heldout)
    accuracy = evaluation["sentence_order_accuracy"]
    assert accuracy > counts.majority_share + 0.015, (counts, evaluation)
    assert "sentence_order_one_label" not in [f["kind"] for f in evaluation.get("findings", [])]
