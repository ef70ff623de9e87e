"""Chance on a held-out sentence set: label counts from the records, margins in standard errors."""

import math

import pytest
import tensorflow as tf

from albert.evaluation.chance import (LabelCounts, margin_in_standard_errors, sentence_label_counts,
                                      standard_error)


def _write_records(path, labels):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for label in labels:
            feature = {"next_sentence_labels": tf.train.Feature(
                int64_list=tf.train.Int64List(value=[label])),
                       "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2]))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                         .SerializeToString())


def test_label_counts_come_from_the_records(tmp_path):
    path = tmp_path / "heldout.tfrecord"
    _write_records(path, [1] * 3 + [0] * 7)
    counts = sentence_label_counts(str(path))
    assert counts == LabelCounts(ones=3, total=10)
    assert counts.majority_share == 0.7


def test_margin_is_the_distance_to_the_majority_share_in_standard_errors():
    counts = LabelCounts(ones=2000, total=4000)
    error = math.sqrt(0.53 * 0.47 / 4000)
    assert standard_error(0.53, 4000) == pytest.approx(error)
    assert counts.margin(0.53) == pytest.approx(0.03 / error)
    assert counts.margin(0.50) == pytest.approx(0.0)
    assert margin_in_standard_errors(0.45, 0.55, 100) < 0
    assert math.isnan(LabelCounts(0, 0).majority_share)


def test_the_demo_reports_each_checkpoint_against_the_heldout_majority(tmp_path, capsys):
    import json

    from albert.demo import print_sentence_order_vs_chance

    summary = tmp_path / "heldout.tfrecord.summary.json"
    summary.write_text(json.dumps({"sentence_order_labels": {"0": 2100, "1": 1900,
                                                             "fraction_1": 0.475}}))
    evaluations = [{"step": 100, "sentence_order_accuracy": 0.525},
                   {"step": 200, "sentence_order_accuracy": 0.60}]
    print_sentence_order_vs_chance(evaluations, str(summary))
    out = capsys.readouterr().out
    assert "(0.5250: always answering the commoner label of 4000 pairs)" in out
    assert "standard errors it lies above chance" in out and "step 100 0.525 (+0.0)" in out
    assert "0.4750" not in out  # one chance figure: the commoner label's share
    assert "step 200 0.600 (+9.7)" in out and "not above chance" not in out
    print_sentence_order_vs_chance(evaluations[:1], str(summary))
    assert "not above chance" in capsys.readouterr().out


def test_the_demo_says_plainly_when_fine_tuning_does_not_beat_its_baseline(tmp_path, capsys):
    import json

    from albert.demo import print_finetuning

    glue = tmp_path / "glue"
    (glue / "STS-B").mkdir(parents=True)
    for split in ("dev", "train"):
        (glue / "STS-B" / f"{split}.tsv").write_text("x\tscore\na\t1.0\nb\t3.0\n")
    runs = {"reviews": tmp_path / "reviews", "STS-B": tmp_path / "STS-B"}
    for run in runs.values():
        run.mkdir()
    (runs["reviews"] / "eval_report.json").write_text(json.dumps(
        {"examples": 3, "accuracy": 2 / 3, "macro_f1": 0.4, "baseline_accuracy": 2 / 3,
         "baseline_label": "negative"}))
    (runs["STS-B"] / "eval_results.json").write_text(json.dumps(
        {"best": {"pearson": 0.5, "step": 10},
         "evaluations": [{"step": 10, "spearman": 0.5, "MSE": 0.5}]}))
    print_finetuning(str(glue), runs)
    out = capsys.readouterr().out
    # The reviews' 0.667 is the commonest label's share; STS-B's MSE 0.5 is below the mean's 1.0.
    assert "reviews: NOT above its baseline" in out and "STS-B: above its baseline" in out
