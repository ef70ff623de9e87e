"""Fine-tuning runs that failed silently are flagged after every evaluation; learning runs not."""

import json

import numpy as np
import pytest
from scipy.stats import entropy

from albert.training import degenerate
from albert.training.diagnostics import Diagnostics
from albert.training.run_directory import RunDirectory
from conftest import tiny_config
from glue_fixtures import classifier_command, write_learnable_sst2
from scripts import run_script
from squad_fixtures import write_squad


# ------------------------------------------------------------------ the checks
def test_one_answer_is_flagged_only_when_every_example_gets_it():
    labels = np.array([0, 1] * 20)
    check = degenerate.OneAnswer("class", "eval_accuracy")
    everywhere = check.observe_evaluation(
        5, dict(degenerate.answer_shares(np.ones(40), labels), eval_accuracy=0.5))
    assert everywhere.degenerate and everywhere.numbers["answer"] == 1
    assert "every dev example gets class 1" in everywhere.message
    almost = np.ones(40)
    almost[3] = 0
    assert check.observe_evaluation(5, degenerate.answer_shares(almost, labels)) is None


def test_constant_regression_is_flagged_and_a_varying_one_is_not():
    labels = np.linspace(0, 5, 50)
    check = degenerate.ConstantRegression()
    constant = np.full(50, 2.5) + np.random.default_rng(0).normal(0, 1e-6, 50)
    assert check.observe_evaluation(1, degenerate.regression_spread(constant, labels)).degenerate
    varying = labels * 0.1 + 2
    assert check.observe_evaluation(1, degenerate.regression_spread(varying, labels)) is None


def test_all_empty_squad_answers_are_flagged():
    check = degenerate.NoAnswers()
    assert check.observe_evaluation(1, degenerate.empty_share(["", "empty", " "])).degenerate
    assert check.observe_evaluation(1, degenerate.empty_share(["", "in 1905"])) is None


def test_the_content_blind_loss_is_the_entropy_of_the_answer_positions():
    starts, ends = [1, 1, 2, 7, 7, 7], [3, 3, 3, 9, 9, 4]
    expected = 0.5 * (entropy([2, 1, 3]) + entropy([3, 2, 1]))
    assert degenerate.position_prior_loss(starts, ends) == pytest.approx(expected)
    impossible = [0, 0, 0, 0, 1, 1]
    assert degenerate.position_prior_loss(starts, ends, impossible) == pytest.approx(
        expected + 0.5 * entropy([4, 2]))


def test_a_loss_above_the_content_blind_loss_is_flagged_from_the_log(tmp_path):
    log = tmp_path / "train_log.jsonl"
    check = degenerate.ContentBlindLoss(2.0, str(tmp_path))  # reads the run's step log
    assert check.observe_evaluation(10, {}) is None  # no log yet: nothing to judge
    log.write_text("".join(json.dumps({"step": s, "loss": 4.0 - 0.01 * s}) + "\n"
                           for s in range(1, 101)))
    stuck = check.observe_evaluation(100, {})
    assert stuck.degenerate and stuck.numbers["loss"] > 2.9
    log.write_text("".join(json.dumps({"step": s, "loss": 4.0 - 0.03 * s}) + "\n"
                           for s in range(1, 101)))
    assert check.observe_evaluation(100, {}) is None
    # Only the steps up to the evaluated one count.
    assert check.observe_evaluation(20, {}).degenerate


def test_a_degenerate_evaluation_is_marked_in_the_json_and_absent_from_the_text(tmp_path,
                                                                                caplog):
    diagnostics = Diagnostics([degenerate.OneAnswer("class", "eval_accuracy")],
                              diagnostic_metrics=degenerate.ONE_ANSWER_METRICS)
    directory = RunDirectory(str(tmp_path))
    for step in (10, 20):
        metrics = dict(degenerate.answer_shares(np.zeros(4), np.array([0, 1, 1, 1])),
                       eval_accuracy=0.25, eval_loss=0.69)
        findings = diagnostics.observe_evaluation(step, metrics)
        directory.record_evaluation(step, diagnostics.split_metrics(metrics),
                                    {"step": 10, "eval_accuracy": 0.25}, "eval_accuracy",
                                    "finetuning", [f.as_dict() for f in findings])
    journal = json.loads((tmp_path / "eval_results.json").read_text())
    for entry in journal["evaluations"]:
        assert entry["degenerate"] is True
        assert "every dev example gets class 0" in entry["degenerate_reason"]
        assert set(entry) - {"findings", "degenerate", "degenerate_reason"} == {
            "step", "eval_accuracy", "eval_loss"}
    # Said at each degenerate evaluation (a run may recover), one line each.
    assert sum("degenerate evaluation" in r.getMessage() for r in caplog.records) == 2
    text = (tmp_path / "eval_results.txt").read_text()
    assert text.splitlines() == ["eval_accuracy = 0.25", "eval_loss = 0.69", "global_step = 10",
                                 "best = -1", "=" * 50, "eval_accuracy = 0.25",
                                 "eval_loss = 0.69", "global_step = 20", "best = 0.25",
                                 "=" * 50]


# ------------------------------------------------------------ the scripts
def _frozen_classifier(tmp_path) -> str:
    """A fine-tuned-style checkpoint whose classifier weights are zero: every logit is 0, so
    every example gets class 0, and with learning rate 0 it stays so."""
    from albert.checkpoints import write_checkpoint
    from albert.checkpoints.weights import model_weights
    from albert.modeling import AlbertClassifier

    config = tiny_config(vocab_size=1200, max_position_embeddings=64)
    model = AlbertClassifier(config, 2)
    model({"input_word_ids": np.zeros((1, 4), "int32"), "input_mask": np.ones((1, 4), "int32"),
           "input_type_ids": np.zeros((1, 4), "int32")})
    weights = model_weights(model)
    head = [name for name in weights if name.endswith("output_weights")]
    assert len(head) == 1, list(weights)
    weights[head[0]] = np.zeros_like(weights[head[0]])
    write_checkpoint(weights, config, str(tmp_path / "frozen"), "tf1")
    return str(tmp_path / "frozen" / "model.ckpt-best")


def _journal(out):
    return json.loads((out / "eval_results.json").read_text())


# Slow tier (about 29 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_a_stuck_classifier_is_flagged_and_a_learning_one_is_not(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    write_learnable_sst2(tmp_path / "glue")
    stuck = run_script(*classifier_command(tmp_path, spm, tmp_path / "stuck", learning_rate=0,
                                    init_checkpoint=_frozen_classifier(tmp_path)))
    assert stuck.returncode == 0, stuck.stderr[-3000:]
    entry = _journal(tmp_path / "stuck")["evaluations"][-1]
    assert entry["degenerate"] is True and "class 0" in entry["degenerate_reason"]
    assert entry["eval_accuracy"] == pytest.approx(0.5)
    warnings = [line for line in stuck.stderr.splitlines() if "degenerate evaluation" in line]
    assert len(warnings) == 1 and warnings[0].startswith("W"), warnings
    assert "degenerate" not in (tmp_path / "stuck" / "eval_results.txt").read_text()

    learned = run_script(*classifier_command(tmp_path, spm, tmp_path / "learned"))
    assert learned.returncode == 0, learned.stderr[-3000:]
    entry = _journal(tmp_path / "learned")["evaluations"][-1]
    assert entry["eval_accuracy"] > 0.8, entry   # it did learn: the check had a chance to err
    assert "degenerate" not in entry and "degenerate evaluation" not in learned.stderr


@pytest.mark.slow  # 24 s on 2 cores; the classifier's stuck run above stays in the default suite
def test_a_squad_run_at_learning_rate_0_is_flagged(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    config = tmp_path / "config.json"
    config.write_text(tiny_config(vocab_size=1200, max_position_embeddings=64).to_json_string())
    data = tmp_path / "squad"
    result = run_script(
        "run_squad.py", f"--albert_config_file={config}", f"--spm_model_file={spm}",
        f"--output_dir={tmp_path / 'out'}", f"--train_file={write_squad(str(data / 'train.json'))}",
        f"--predict_file={write_squad(str(data / 'dev.json'), for_training=False)}",
        "--do_train", "--do_predict", "--num_train_epochs=2", "--max_seq_length=64",
        "--doc_stride=24", "--max_query_length=16", "--train_batch_size=2",
        "--learning_rate=0", "--noprogress")
    assert result.returncode == 0, result.stderr[-3000:]
    entry = _journal(tmp_path / "out")["evaluations"][-1]
    assert entry["degenerate"] is True, entry
    assert "has not gone below" in entry["degenerate_reason"]
    assert "degenerate" not in (tmp_path / "out" / "eval_results.txt").read_text()
