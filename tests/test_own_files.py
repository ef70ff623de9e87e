"""run_classifier.py on a user's own files: reading, metrics, mistakes, the whole path to a
served model (albert.finetuning_data.labelled_files, albert.tasks.file_classification,
albert.predict, albert.export.text_classifier)."""

import csv
import gzip
import json
import os
import random
import sys

import numpy as np
import pytest

from albert.errors import InputError
from albert.evaluation import classification_report
from albert.finetuning_data.labelled_files import ColumnSpec, FileTask, Row, infer_task, read_rows
from scripts import run_script

TINY = dict(vocab_size=1200, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


def _texts(rows, task, column=0):
    return [row.fields[task.columns.text_columns[column]] for row in rows]


def test_awkward_but_valid_files_are_read_as_written(tmp_path):
    odd = 'He said "no, never",\tthen left\nfor good'
    buffer = [["text", "label"], [odd, "neg"], ["plain\u2028line", "pos"], ["fine", "pos"]]
    path = tmp_path / "train.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        handle.write("\ufeff")                       # a byte-order mark
        csv.writer(handle, lineterminator="\r\n").writerows(buffer)   # Windows line ends
    columns = ColumnSpec(("text",), "label")
    _, rows = read_rows(str(path), None, ("text", "label"), "--train_file")
    task = infer_task(rows, columns, None)
    assert _texts(rows, task) == [odd, "plain\u2028line", "fine"]
    assert task.labels == ("neg", "pos") and task.baseline == 1.0   # pos is commonest
    assert rows[2].where.endswith("train.csv:5")      # the quoted field spans two lines

    tsv = tmp_path / "train.tsv"   # quotes are text in a TSV
    tsv.write_text('sentence\tscore\n"Quoted" start\t0.5\nend "quote\t1.25\r\n', "utf-8")
    _, rows = read_rows(str(tsv), None, ("sentence", "score"), "--train_file")
    task = infer_task(rows, ColumnSpec(("sentence",), "score"), None)
    assert _texts(rows, task) == ['"Quoted" start', 'end "quote'] and task.is_regression
    assert task.baseline == pytest.approx(0.875)

    jsonl = tmp_path / "pairs.jsonl.gz"   # gzip, and integer labels given as numbers
    with gzip.open(jsonl, "wt", encoding="utf-8") as handle:
        for a, b, y in (("a", "b", 1), ("c", "d", 0), ("e", "f", 10), ("g", "h", 2)):
            handle.write(json.dumps({"q1": a, "q2": b, "label": y}) + "\n\n")
    _, rows = read_rows(str(jsonl), None, ("q1", "q2", "label"), "--train_file")
    task = infer_task(rows, ColumnSpec(("q1", "q2"), "label"), None)
    assert task.labels == ("0", "1", "2", "10") and not task.is_regression
    examples = task.examples(rows, str, labelled=True, split="train")
    assert [(e.text_a, e.text_b, e.label) for e in examples][2] == ("e", "f", "10")


def test_metrics_equal_scikit_learn():
    from sklearn import metrics as sk

    rng = np.random.default_rng(0)
    labels, predictions = rng.integers(0, 4, 300), rng.integers(0, 3, 300)   # class 3 never predicted
    names = ("a", "b", "c", "d")
    flat = classification_report.classification_metrics(predictions, labels, names, 0.5, 1)
    precision, recall, f1, _ = sk.precision_recall_fscore_support(
        labels, predictions, labels=[0, 1, 2, 3], zero_division=0)
    for index, name in enumerate(names):
        assert flat[f"precision_{name}"] == pytest.approx(precision[index])
        assert flat[f"recall_{name}"] == pytest.approx(recall[index])
        assert flat[f"f1_{name}"] == pytest.approx(f1[index])
    assert flat["macro_f1"] == pytest.approx(sk.f1_score(labels, predictions, average="macro",
                                                         labels=[0, 1, 2, 3], zero_division=0))
    assert flat["baseline_accuracy"] == pytest.approx(np.mean(labels == 1))
    result = classification_report.report(predictions, labels, names, 0.5, 1)
    assert result["confusion_matrix"] == sk.confusion_matrix(labels, predictions).tolist()
    scores, truth = rng.normal(size=50), rng.normal(size=50)
    regression = classification_report.regression_metrics(scores, truth, 0.1, 0.3)
    assert regression["baseline_MSE"] == pytest.approx(np.mean((truth - 0.3) ** 2))


def _write_csv(path, rows, header=("review", "label")):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _marker_rows(rng, count):
    """Three classes told by a marker word, with commas, quotes and line breaks in the text."""
    # Words of the synthetic corpus (one SentencePiece piece each), some quoted or broken.
    noise = ("balopi", "mivoxo", "zomivo", "pizotu", 'kabasa, "monquis"', "wentune,\nzoquis")
    markers = {"good": "renwenor", "bad": "rygumonmon", "meh": None}
    rows = []
    for _ in range(count):
        label = rng.choice(sorted(markers))
        words = [rng.choice(noise) for _ in range(rng.randint(3, 7))]
        if markers[label]:
            words.insert(rng.randrange(len(words)), markers[label])
        rows.append((" ".join(words), label))
    return rows


def test_features_made_in_worker_processes_are_the_same_records(tmp_path, synthetic_corpus,
                                                                monkeypatch):
    import pickle

    from albert.finetuning_data.glue import FeatureSerializer
    from albert.tasks import file_classification
    from albert.tokenization import load_tokenizer
    from albert.worker_pool import ordered_map

    _, spm = synthetic_corpus
    tokenizer = load_tokenizer(spm_model_file=spm)
    rows = _marker_rows(random.Random(3), 300) + [("prices rose 1,990, then 4,5 fell", "good")]
    copy = pickle.loads(pickle.dumps(tokenizer))  # what a worker gets
    assert [copy.encode(text) for text, _ in rows] == [tokenizer.encode(text) for text, _ in rows]
    path = tmp_path / "train.csv"
    _write_csv(path, rows)
    task = file_classification.task_from_training_file(str(path), None,
                                                       ColumnSpec(("review",), "label"), None)
    written = []
    for workers in (1, 2):
        cache_path = tmp_path / f"workers{workers}.tf_record"
        cache = file_classification.plan_cache(task, str(path), None, "train", str(cache_path),
                                               64, tokenizer)
        assert cache.write(FeatureSerializer(task, 64, tokenizer), num_workers=workers) == 301
        written.append(cache_path.read_bytes())
    assert written[0] == written[1]
    # Many chunks, read as the workers need them, come back in the items' order.
    assert list(ordered_map(abs, range(-100, 0), 2, chunk_size=7)) == list(range(100, 0, -1))
    # This process has loaded TensorFlow, as run_classifier.py has: the workers are spawned,
    # and neither TensorFlow nor the main script (run_classifier.py, which loads it) is
    # imported there.
    (tmp_path / "worker_probe.py").write_text(
        "import sys\n\ndef loaded(name):\n    return name in sys.modules\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import types

    import worker_probe

    script = tmp_path / "a_script.py"
    script.write_text("import tensorflow\n")
    main = types.ModuleType("__main__")
    main.__file__, main.__spec__ = str(script), None
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert "tensorflow" in sys.modules
    assert list(ordered_map(worker_probe.loaded, ["tensorflow", "keras", "albert.worker_pool"],
                            1)) == [False, False, True]
    # Small files are made in this process; large ones by one worker a core.
    small = file_classification.LabelledExamples(str(path), None, task, None, "train", "x", 10)
    large = file_classification.LabelledExamples(
        str(path), None, task, None, "train", "x", file_classification.PARALLEL_FEATURES_MIN_BYTES)
    assert file_classification.feature_workers(small) == 1
    assert file_classification.feature_workers(large) == min(os.cpu_count(), 4)


def _flags(config_file, spm, output_dir, **flags):
    values = {"albert_config_file": config_file, "spm_model_file": spm, "output_dir": output_dir,
              "max_seq_length": 32, "train_batch_size": 16, "learning_rate": 0.002,
              "train_step": 200, "warmup_step": 20, "save_checkpoints_steps": 100,
              "eval_batch_size": 32, "text_columns": "review", **flags}
    return ["run_classifier.py", *[f"--{k}" if v is True else f"--{k}={v}"
                                   for k, v in values.items()], "--noprogress"]


# Slow tier: about 25 s on one core (200 training steps, a SavedModel export and two more
# runs), kept out of the default suite's 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_from_a_csv_to_a_served_model(tmp_path, synthetic_corpus):
    """Fine-tune from a CSV, evaluate, predict, export; albert.predict and the SavedModel
    give the run's own predictions."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the served tokenizer's ops)

    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    rng = random.Random(7)
    _write_csv(tmp_path / "train.csv", _marker_rows(rng, 96))
    _write_csv(tmp_path / "dev.csv", _marker_rows(rng, 48))
    test_rows = _marker_rows(rng, 20)
    _write_csv(tmp_path / "new.csv", [(text,) for text, _ in test_rows], header=("review",))
    run = tmp_path / "run"
    result = run_script(*_flags(config_file, spm, str(run), train_file=tmp_path / "train.csv",
                                validation_file=tmp_path / "dev.csv", test_file=tmp_path / "new.csv",
                                do_train=True, do_eval=True, do_predict=True,
                                export_dir=tmp_path / "served"))
    assert result.returncode == 0, result.stderr[-3000:]

    assert (run / "labels.txt").read_text() == "bad\ngood\nmeh\n"
    report = json.loads((run / "eval_report.json").read_text())
    assert report["accuracy"] > report["baseline_accuracy"] + 0.3
    assert sum(map(sum, report["confusion_matrix"])) == 48
    assert "| accuracy |" in (run / "eval_report.md").read_text()
    journal = json.loads((run / "eval_results.json").read_text())
    assert "macro_f1" in journal["evaluations"][-1]

    with open(run / "test_predictions.csv", newline="", encoding="utf-8") as handle:
        written = list(csv.DictReader(handle))
    assert [row["review"] for row in written] == [text for text, _ in test_rows]
    probabilities = np.array([[float(row[f"probability_{label}"]) for label in ("bad", "good", "meh")]
                              for row in written])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-5)
    accuracy = np.mean([row["prediction"] == label for row, (_, label) in zip(written, test_rows)])
    assert accuracy >= 0.7

    # From the run directory alone, on plain text with one example a line.
    (tmp_path / "new.txt").write_text("".join(text.replace("\n", " ") + "\n" for text, _ in test_rows))
    result = run_script("-m", "albert.predict", f"--model_dir={run}",
                        f"--input_file={tmp_path / 'new.csv'}",
                        f"--output_file={tmp_path / 'again.jsonl'}", "--noprogress")
    assert result.returncode == 0, result.stderr[-3000:]
    again = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert [row["prediction"] for row in again] == [row["prediction"] for row in written]
    np.testing.assert_allclose([[row[f"probability_{label}"] for label in ("bad", "good", "meh")]
                                for row in again], probabilities, atol=1e-6)
    result = run_script("-m", "albert.predict", f"--model_dir={run}", f"--text={test_rows[0][0]}",
                        "--text=renwenor balopi")
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert printed[0]["prediction"] == written[0]["prediction"] and len(printed) == 2

    # The SavedModel, loaded with TensorFlow alone, takes the raw strings.
    served = tf.saved_model.load(str(tmp_path / "served" / "1"))
    outputs = served.signatures["serving_default"](text=tf.constant([t for t, _ in test_rows]))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-5)
    assert [v.decode() for v in outputs["label"].numpy()] == [r["prediction"] for r in written]


BAD_INPUTS = {
    "missing column": ("train.csv", "text,label\nhello,good\nbye,bad\n", "no column 'review'"),
    "wrong field count": ("train.csv", "review,label\nhello,good\nbye,bad,extra\n",
                          "train.csv:3: 3 fields"),
    "empty text": ("train.csv", "review,label\nhello,good\n  ,bad\n", "train.csv:3: the text"),
    "unseen label": ("dev.csv", "review,label\nhello,great\n", "dev.csv:2: label 'great' was never"),
    "words as numbers": ("train.csv", "review,label\nhello,0.5\nbye,lots\n",
                         "train.csv:3: label 'lots' is not a number"),
    "empty file": ("train.csv", "", "train.csv is empty"),
    "header only": ("train.csv", "review,label\n", "holds no examples"),
    "no header": ("train.csv", "hello,good\nbye,bad\n", "is its first row a header?"),
    "not utf-8": ("train.csv", "review,label\nna\xefve,good\nbye,bad\n".encode("latin-1"),
                  "is not UTF-8"),
    "unclosed quote": ("train.csv", 'review,label\n"hello,good\nbye,bad\n', "train.csv:2:"),
    "one label": ("train.csv", "review,label\nhello,good\nbye,good\n", "at least two classes"),
}


@pytest.mark.parametrize("problem", sorted(BAD_INPUTS))
def test_a_bad_file_ends_with_one_error_line_and_writes_nothing(tmp_path, synthetic_corpus,
                                                               problem):
    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    name, content, expected = BAD_INPUTS[problem]
    _write_csv(tmp_path / "train.csv", [("hello", "good"), ("bye", "bad")])
    _write_csv(tmp_path / "dev.csv", [("hello", "good"), ("bye", "bad")])
    target = tmp_path / name
    target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    flags = {"task_type": "regression"} if problem == "words as numbers" else {}
    run = tmp_path / "run"
    result = run_script(*_flags(config_file, spm, str(run), train_file=tmp_path / "train.csv",
                                validation_file=tmp_path / "dev.csv", do_train=True,
                                do_eval=True, **flags))
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and expected in errors[0] and name in errors[0], result.stderr[-2000:]
    assert not run.exists() or not os.listdir(run)


def test_reading_mistakes_name_the_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"text": "a", "label": "p"}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"x.jsonl:2: a JSON object per line"):
        read_rows(str(path), None, ("text", "label"), "--train_file")
    path.write_text('{"text": "a", "label": "p"}\n{"txt": "b", "label": "q"}\n')
    with pytest.raises(InputError, match=r"x.jsonl:2: no column 'text'.*'txt', 'label'"):
        read_rows(str(path), None, ("text", "label"), "--train_file")
    with pytest.raises(InputError, match="cannot tell the format"):
        (tmp_path / "data.xlsx").write_text("text\nhello\n")
        read_rows(str(tmp_path / "data.xlsx"), None, ("text",), "--train_file")


def test_multi_label_files_metrics_and_loss():
    """Label lists from a CSV (separated) and JSON Lines (lists, inferred); the metrics equal
    scikit-learn's; the training loss equals the evaluation's."""
    import tensorflow as tf
    from sklearn import metrics as sk

    from albert.tasks.classification import classification_loss, predictions_from_logits

    rows = [Row(f"t.csv:{i + 2}", {"text": f"x{i}", "topics": topics})
            for i, topics in enumerate(["sports;music", " music ", "", "art;music", "music"])]
    task = infer_task(rows, ColumnSpec(("text",), "topics"), "multi_label")
    assert task.labels == ("art", "music", "sports") and task.baseline == (1,)   # music: 4 of 5
    assert task.best_metric == "micro_f1" and task.multi_label_threshold == 0.5
    examples = task.examples(rows, str, labelled=True, split="train")
    assert [e.label for e in examples] == [("sports", "music"), ("music",), (), ("art", "music"),
                                           ("music",)]
    again = FileTask.from_settings(json.loads(json.dumps(task.settings())))
    assert again == task
    with pytest.raises(InputError, match=r"t.csv:9: label 'film' was never seen"):
        task.examples([Row("t.csv:9", {"text": "y", "topics": "art;film"})], str, True, "dev")
    with pytest.raises(InputError, match="repeated"):
        task.examples([Row("t.csv:9", {"text": "y", "topics": "art;art"})], str, True, "dev")
    listed = [Row(f"t.jsonl:{i}", {"text": "z", "topics": topics})
              for i, topics in enumerate([["b", "a"], [], ["b"]], start=1)]
    inferred = infer_task(listed, ColumnSpec(("text",), "topics"), None)
    assert inferred.is_multi_label and inferred.labels == ("a", "b") and inferred.baseline == (1,)

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, (200, 4))
    logits = rng.normal(size=(200, 4)).astype(np.float32)
    probabilities, predictions = predictions_from_logits(logits, False, 0.5)
    np.testing.assert_array_equal(predictions, logits >= 0)
    flat = classification_report.multi_label_metrics(predictions, labels, "abcd", 0.0, (0, 2))
    assert flat["eval_accuracy"] == pytest.approx(sk.accuracy_score(labels, predictions))
    for average in ("micro", "macro"):
        assert flat[f"{average}_f1"] == pytest.approx(
            sk.f1_score(labels, predictions, average=average, zero_division=0))
    precision, recall, f1, _ = sk.precision_recall_fscore_support(labels, predictions,
                                                                  zero_division=0)
    for index, name in enumerate("abcd"):
        assert (flat[f"precision_{name}"], flat[f"recall_{name}"], flat[f"f1_{name}"]) == \
            pytest.approx((precision[index], recall[index], f1[index]))
    baseline = np.zeros_like(labels)
    baseline[:, [0, 2]] = 1
    assert flat["baseline_micro_f1"] == pytest.approx(sk.f1_score(labels, baseline,
                                                                  average="micro"))
    expected = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=labels.astype(np.float32), logits=logits)).numpy()
    assert classification_loss(logits, labels, False, multi_label=True) == \
        pytest.approx(expected, rel=1e-6)
    report = classification_report.report(predictions, labels, tuple("abcd"), 0.1, (0, 2))
    assert report["task_type"] == "multi_label" and report["baseline_labels"] == ["a", "c"]
    assert "| micro-F1 |" in classification_report.markdown(report, "model.ckpt-best")


def _topic_rows(rng, count):
    """Any of two topics, each told by its own marker word; neither is possible."""
    noise = ("balopi", "mivoxo", "zomivo", "pizotu", "kabasa", "wentune")
    markers = {"music": "renwenor", "sports": "rygumonmon"}
    rows = []
    for _ in range(count):
        topics = [topic for topic in sorted(markers) if rng.random() < 0.5]
        words = [rng.choice(noise) for _ in range(rng.randint(3, 7))]
        for topic in topics:
            words.insert(rng.randrange(len(words)), markers[topic])
        rows.append((" ".join(words), ";".join(topics)))
    return rows


# Slow tier: about 40 s on 2 cores (300 training steps and two SavedModel exports). Measured:
# dev micro-F1 1.0 from step 200 at learning rate 0.001; at 0.002 this tiny model's outputs
# collapse to one label set, which the one-answer check reports.
@pytest.mark.slow
def test_a_multi_label_csv_to_a_served_model(tmp_path, synthetic_corpus):
    """Multi-label from a CSV: trains, reports, predicts the label sets, and the SavedModel
    serves the run's own probabilities and labels."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the served tokenizer's ops)

    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    rng = random.Random(3)
    _write_csv(tmp_path / "train.csv", _topic_rows(rng, 128), header=("review", "topics"))
    _write_csv(tmp_path / "dev.csv", _topic_rows(rng, 48), header=("review", "topics"))
    test_rows = _topic_rows(rng, 20)
    _write_csv(tmp_path / "new.csv", [(text,) for text, _ in test_rows], header=("review",))
    run = tmp_path / "run"
    result = run_script(*_flags(config_file, spm, str(run), train_file=tmp_path / "train.csv",
                                validation_file=tmp_path / "dev.csv",
                                test_file=tmp_path / "new.csv", label_column="topics",
                                task_type="multi_label", train_step=300, learning_rate=0.001,
                                do_train=True,
                                do_eval=True, do_predict=True, export_dir=tmp_path / "served"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run / "labels.txt").read_text() == "music\nsports\n"
    report = json.loads((run / "eval_report.json").read_text())
    assert report["task_type"] == "multi_label"
    assert report["metrics"]["micro_f1"] > report["metrics"]["baseline_micro_f1"] + 0.3
    assert report["metrics"]["eval_accuracy"] > 0.7
    with open(run / "test_predictions.csv", newline="", encoding="utf-8") as handle:
        written = list(csv.DictReader(handle))
    exact = np.mean([row["prediction"] == topics for row, (_, topics) in zip(written, test_rows)])
    assert exact >= 0.7
    served = tf.saved_model.load(str(tmp_path / "served" / "1"))
    outputs = served.signatures["serving_default"](text=tf.constant([t for t, _ in test_rows]))
    probabilities = np.array([[float(row[f"probability_{label}"]) for label in ("music", "sports")]
                              for row in written])
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-5)
    assert [v.decode() for v in outputs["label"].numpy()] == [r["prediction"] for r in written]

    # The same SavedModel from the run directory alone.
    result = run_script("-m", "albert.export", f"--model_dir={run}",
                        f"--export_dir={tmp_path / 'again'}")
    assert result.returncode == 0, result.stderr[-3000:]
    again = tf.saved_model.load(str(tmp_path / "again" / "1"))
    outputs = again.signatures["serving_default"](text=tf.constant([t for t, _ in test_rows]))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-5)
    assert outputs["predicted"].shape == (len(test_rows), 2)
