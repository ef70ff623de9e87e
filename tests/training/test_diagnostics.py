"""Diagnostics of the training loop: the unigram plateau and one-label heads."""

import json
import logging

import numpy as np
import pytest
from scipy.stats import entropy

from albert.training.diagnostics import (Diagnostics, OneLabelHead, UnigramPlateau,
                                         unigram_cross_entropy)


def test_unigram_cross_entropy_is_the_entropy_of_the_counts():
    counts = np.array([50, 0, 30, 15, 5])
    assert unigram_cross_entropy(counts) == pytest.approx(entropy(counts / counts.sum()))
    assert unigram_cross_entropy([7]) == 0.0


def _records(losses, first_step=1):
    return [{"step": first_step + i, "masked_lm_loss": loss} for i, loss in enumerate(losses)]


def _plateau(window=100):
    return UnigramPlateau(unigram_loss=6.0, window=window, advice="Try something.",
                          smoothing=10)


def test_a_loss_that_stays_on_the_plateau_is_reported_once(caplog):
    diagnostics = Diagnostics([_plateau()])
    falling = _records(np.linspace(9.0, 6.05, 40))
    flat = _records([6.0 + 0.02 * np.sin(i) for i in range(200)], first_step=41)
    with caplog.at_level(logging.WARNING, logger="albert"):
        found = diagnostics.observe_steps(falling) + diagnostics.observe_steps(flat[:100]) + \
            diagnostics.observe_steps(flat[100:])
    assert len(found) == 1 and found[0].kind == "unigram_plateau"
    assert found[0].numbers["steps"] == 100
    assert "on the unigram plateau" in found[0].message and "Try something." in found[0].message
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    # The distance is in every record (TensorBoard), the finding in the step where it was made.
    assert all("masked_lm_loss_minus_unigram" in r for r in falling + flat)
    assert [r["step"] for r in falling + flat if "findings" in r] == [found[0].step]


def test_a_loss_that_never_reaches_the_plateau_is_reported_too():
    found = Diagnostics([_plateau()]).observe_steps(_records([8.9] * 150))
    assert len(found) == 1 and "above the unigram loss" in found[0].message


def test_a_learning_loss_is_not_reported():
    losses = list(np.linspace(9.0, 6.1, 40)) + list(np.linspace(6.0, 4.5, 300))
    assert Diagnostics([_plateau()]).observe_steps(_records(losses)) == []


def _one_label():
    return OneLabelHead("sentence_order", "predicted_one", "label_one", "accuracy")


def test_a_head_answering_one_label_is_found_at_every_evaluation_warned_once(caplog):
    diagnostics = Diagnostics([_one_label()], diagnostic_metrics=("predicted_one", "label_one"))
    metrics = {"accuracy": 0.509, "predicted_one": 0.0, "label_one": 0.491}
    with caplog.at_level(logging.WARNING, logger="albert"):
        first = diagnostics.observe_evaluation(100, metrics)
        second = diagnostics.observe_evaluation(200, metrics)
    assert [f.kind for f in first + second] == ["sentence_order_one_label"] * 2
    assert first[0].numbers["label"] == 0
    assert first[0].numbers["label_share"] == pytest.approx(0.509)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert diagnostics.split_metrics(metrics) == {"accuracy": 0.509}


def test_a_head_that_answers_both_labels_is_not_reported():
    metrics = {"accuracy": 0.62, "predicted_one": 0.4, "label_one": 0.5}
    assert Diagnostics([_one_label()]).observe_evaluation(100, metrics) == []


# ---------------------------------------------------------------- end to end
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CONFIG = {"vocab_size": 205, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 32}


@pytest.fixture(scope="module")
def learnable_records(tmp_path_factory):
    """Records where both objectives can be learned fast: every sentence repeats one word
    (masked words are copies of their neighbours) drawn from a set of words specific to the
    sentence's position in its document (the order of two segments shows in their words)."""
    import random

    from albert.pretraining_data.instances import InstanceConfig
    from albert.pretraining_data.masking import MaskingConfig
    from albert.pretraining_data.creation import DataConfig, create_pretraining_data

    directory = tmp_path_factory.mktemp("learnable")
    rng = random.Random(3)
    words = [f"w{j}x{k}" for j in range(1, 9) for k in range(25)]
    (directory / "vocab.txt").write_text("\n".join(SPECIAL + words) + "\n")
    documents = []
    for _ in range(600):
        documents.append("\n".join(" ".join([f"w{j}x{rng.randrange(25)}"] * rng.randint(3, 6))
                                   for j in range(1, rng.randint(3, 8) + 1)))
    (directory / "corpus.txt").write_text("\n\n".join(documents) + "\n")
    config = DataConfig(instance=InstanceConfig(
        max_seq_length=32, single_segment_random_document=False,
        masking=MaskingConfig(max_predictions_per_seq=5)),
        vocab_file=str(directory / "vocab.txt"), dupe_factor=3)
    create_pretraining_data(str(directory / "corpus.txt"), str(directory / "train.tfrecord"),
                            config, show_progress=False)
    (directory / "albert_config.json").write_text(json.dumps(CONFIG))
    return directory


def _pretrain(directory, output_dir, steps, window, **flags):
    from scripts import run_script

    args = [f"--albert_config_file={directory / 'albert_config.json'}",
            f"--input_file={directory / 'train.tfrecord'}", f"--output_dir={output_dir}",
            "--do_train", "--do_eval", "--train_batch_size=32", f"--num_train_steps={steps}",
            f"--num_warmup_steps={steps // 10}", f"--save_checkpoints_steps={steps // 2}",
            f"--plateau_window_steps={window}", "--steps_per_loop=10", "--noprogress",
            *[f"--{key}={value}" for key, value in flags.items()]]
    result = run_script("run_pretraining.py", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(output_dir / "eval_results.json") as handle:
        journal = json.load(handle)
    with open(output_dir / "train_log.jsonl") as handle:
        log = [json.loads(line) for line in handle]
    return result.stderr, journal, log


def test_a_hopeless_learning_rate_is_reported_in_the_log_and_the_run_files(tmp_path,
                                                                          learnable_records):
    stderr, journal, log = _pretrain(learnable_records, tmp_path / "run", steps=120, window=60,
                                     learning_rate=1e-7)
    assert stderr.count("the masked-LM loss has stayed") == 1
    assert stderr.count("the sentence-order head answers label") == 1
    assert [f["kind"] for f in journal["findings"]] == ["unigram_plateau"]
    plateau = journal["findings"][0]
    assert plateau["steps"] == 60 and plateau["masked_lm_loss"] > plateau["unigram_loss"] - 0.1
    for evaluation in journal["evaluations"]:  # found at each evaluation, warned once
        assert [f["kind"] for f in evaluation["findings"]] == ["sentence_order_one_label"]
        assert "sentence_order_predicted_one" not in evaluation
    assert [row["step"] for row in log if "findings" in row] == [60]
    assert all("masked_lm_loss_minus_unigram" in row for row in log)
    # eval_results.txt keeps the original's lines: metrics and global_step only.
    text = (tmp_path / "run" / "eval_results.txt").read_text()
    assert "findings" not in text and "predicted_one" not in text


# Slow tier (about 27 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_a_learning_run_is_not_reported(tmp_path, learnable_records):
    # Measured: masked-LM loss 5.2 -> 3.6 in 400 steps, held-out sentence order 0.97.
    stderr, journal, log = _pretrain(learnable_records, tmp_path / "run", steps=400, window=200,
                                     learning_rate=0.001, optimizer="adamw")
    assert "findings" not in journal, journal.get("findings")
    assert all("findings" not in evaluation for evaluation in journal["evaluations"])
    assert "the masked-LM loss has stayed" not in stderr
    assert "head answers label" not in stderr
    assert log[-1]["masked_lm_loss_minus_unigram"] < -0.5
    assert journal["evaluations"][-1]["sentence_order_accuracy"] > 0.8
