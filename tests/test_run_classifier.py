"""run_classifier.py: the head against Hugging Face and the original's checkpoints, runs, mistakes."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albert.checkpoints import read_checkpoint, write_checkpoint
from albert.evaluation import glue_metrics as metrics
from albert.modeling import AlbertClassifier
from conftest import REPO, encoder_inputs, random_inputs, tiny_config
from glue_fixtures import write_glue
from hf_reference import assert_head_matches_huggingface
from original_checkpoints import original_fine_tuned_checkpoint
from scripts import assert_clean_failure, run_script

TINY = dict(vocab_size=1200, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


def test_metrics_equal_sklearn_and_scipy():
    from scipy import stats
    from sklearn import metrics as sk

    rng = np.random.default_rng(0)
    labels, predictions = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    assert metrics.matthews_correlation(predictions, labels) == pytest.approx(
        sk.matthews_corrcoef(labels, predictions))
    assert metrics.f1(predictions, labels) == pytest.approx(sk.f1_score(labels, predictions))
    assert metrics.accuracy(predictions, labels) == pytest.approx(sk.accuracy_score(labels, predictions))
    assert metrics.matthews_correlation(np.ones(10), np.ones(10)) == 0.0   # zero denominator
    scores, truth = rng.normal(size=100), rng.normal(size=100)
    truth[:10] = truth[0]   # ties
    assert metrics.pearson(scores, truth) == pytest.approx(stats.pearsonr(scores, truth)[0])
    assert metrics.spearman(scores, truth) == pytest.approx(stats.spearmanr(scores, truth)[0])
    assert set(metrics.glue_metrics("mrpc", predictions, labels, 0.5)) == {
        "eval_accuracy", "eval_loss", "f1"}
    assert set(metrics.glue_metrics("cola", predictions, labels, 0.5)) == {
        "eval_accuracy", "eval_loss", "matthew_corr"}
    assert set(metrics.glue_metrics("sts-b", scores, truth, 0.5)) == {
        "pearson", "spearman", "MSE", "eval_loss"}


@pytest.mark.parametrize("num_labels", [3, 1])
def test_our_classifier_and_huggingface_give_the_same_logits(tmp_path, num_labels):
    config = tiny_config()
    model = AlbertClassifier(config, num_labels=num_labels)
    inputs = encoder_inputs(random_inputs(config))
    saved = assert_head_matches_huggingface(model, inputs, str(tmp_path / "hf"), "classifier",
                                            "AlbertForSequenceClassification")
    assert saved["num_labels"] == num_labels


def test_original_fine_tuned_checkpoint_predicts_like_the_keras_model(tmp_path, synthetic_corpus):
    """TF1 fine-tuned checkpoint -> predict-only run -> the probabilities of our Keras model."""
    _, spm = synthetic_corpus
    config = tiny_config(**TINY)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(config.to_json_string())
    os.makedirs(tmp_path / "mnli")
    values = original_fine_tuned_checkpoint(str(tmp_path / "mnli" / "model.ckpt-800"), config, 3)
    glue = write_glue(str(tmp_path / "glue"))
    result = run_script("run_classifier.py", "--task_name=MNLI", f"--data_dir={glue}",
                        f"--albert_config_file={config_file}",
                        f"--init_checkpoint={tmp_path / 'mnli' / 'model.ckpt-800'}",
                        f"--spm_model_file={spm}", f"--output_dir={tmp_path / 'out'}",
                        "--max_seq_length=32", "--do_predict", "--noprogress")
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [[float(v) for v in line.split("\t")]
               for line in (tmp_path / "out" / "test_results.tsv").read_text().splitlines()]

    from albert.finetuning_data.glue import TASKS, convert_examples, read_examples
    from albert.tasks.classification import stack_features
    from albert.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(spm)
    examples = read_examples(TASKS["mnli"], glue, "test", tokenizer.preprocess)
    features = stack_features(convert_examples(examples, TASKS["mnli"], 32, tokenizer), False)
    model = AlbertClassifier(config, num_labels=3)
    from albert.checkpoints import assign_model_weights
    assign_model_weights(model, values)
    logits = model({k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")},
                   training=False)["logits"].numpy()
    np.testing.assert_allclose(printed, tf.nn.softmax(logits).numpy(), atol=1e-5)
    submission = (tmp_path / "out" / "MNLI-m.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and submission[1].startswith("0\t")
    assert (tmp_path / "out" / "submit_results.tsv").read_text().splitlines() == submission

    # TF1 -> ours -> TF1 of the fine-tuned checkpoint is bit-exact.
    weights, _ = read_checkpoint(str(tmp_path / "mnli"), "tf1", config, heads="required",
                                 head="classifier")
    write_checkpoint(weights, config, str(tmp_path / "back"), "tf1")
    reader = tf.train.load_checkpoint(str(tmp_path / "back" / "model.ckpt-best"))
    for name, value in values.items():
        assert reader.get_tensor(name).tobytes() == value.tobytes(), name


def _sst2_folder(directory, rng, count, word_for_positive="kalo", noise=("mitu", "ren", "sa", "vo")):
    """SST-2 files whose label is whether a marker word occurs (learnable from scratch)."""
    os.makedirs(directory, exist_ok=True)
    rows = []
    for _ in range(count):
        label = rng.randint(0, 1)
        words = [rng.choice(noise) for _ in range(rng.randint(3, 8))]
        if label:
            words.insert(rng.randrange(len(words)), word_for_positive)
        rows.append((" ".join(words), str(label)))
    for split in ("train", "dev"):
        with open(os.path.join(directory, f"{split}.tsv"), "w") as handle:
            handle.write("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    with open(os.path.join(directory, "test.tsv"), "w") as handle:
        handle.write("index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, (s, _) in enumerate(rows)))


def _args(config_file, glue, spm, output_dir, **flags):
    values = {"task_name": "SST-2", "data_dir": glue, "albert_config_file": config_file,
              "spm_model_file": spm, "output_dir": output_dir, "max_seq_length": 32,
              "train_batch_size": 16, "learning_rate": 0.002, "train_step": 60,
              "warmup_step": 6, "save_checkpoints_steps": 20, "eval_batch_size": 32, **flags}
    return ["run_classifier.py", *[f"--{k}" if v is True else f"--no{k}" if v is False else
                                   f"--{k}={v}" for k, v in values.items()], "--noprogress"]


def test_the_head_and_loss_learn_64_training_examples(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    _sst2_folder(str(tmp_path / "glue" / "SST-2"), random.Random(3), 64)
    result = run_script(*_args(config_file, str(tmp_path / "glue"), spm, str(tmp_path / "out"),
                               do_train=True, do_eval=True, do_predict=True))
    assert result.returncode == 0, result.stderr[-3000:]
    journal = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert [e["step"] for e in journal["evaluations"]] == [20, 40, 60]
    assert journal["best"]["eval_accuracy"] >= 0.95   # dev = the training examples here
    best = max(journal["evaluations"], key=lambda e: e["eval_accuracy"])
    assert journal["best"]["step"] == best["step"]
    assert len((tmp_path / "out" / "SST-2.tsv").read_text().splitlines()) == 65


# Slow tier (about 30 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_sentences_of_wikipedia_and_of_news_are_told_apart(tmp_path, demo_corpus):
    """A real-text task learnable from scratch: which corpus a sentence comes from.

    Measured with these settings and --random_seed 1, 2, 3, 4, 12345: best dev
    accuracy 0.865-0.885 (majority class 0.51). With learning rate 1e-3 and
    240 steps some seeds never left chance: the threshold holds at 1e-4.
    """
    directory, spm = demo_corpus
    with open(os.path.join(directory, "train.txt")) as handle:
        wikipedia = [line.strip() for line in handle if line.strip()][:2000]
    with open(os.path.join(directory, "heldout.txt")) as handle:
        news = [line.strip() for line in handle if line.strip()][:2000]
    rng = random.Random(5)
    rows = [(s, "0") for s in rng.sample(wikipedia, 700)] + [(s, "1") for s in rng.sample(news, 700)]
    rng.shuffle(rows)
    os.makedirs(tmp_path / "glue" / "SST-2")
    for split, part in (("train", rows[:1200]), ("dev", rows[1200:])):
        (tmp_path / "glue" / "SST-2" / f"{split}.tsv").write_text(
            "sentence\tlabel\n" + "".join(f"{s.replace(chr(9), ' ')}\t{y}\n" for s, y in part))
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(dict(TINY, vocab_size=4000)))
    result = run_script(*_args(config_file, str(tmp_path / "glue"), spm, str(tmp_path / "out"),
                               do_train=True, do_eval=True, train_step=600, warmup_step=60,
                               save_checkpoints_steps=200, learning_rate=0.0001))
    assert result.returncode == 0, result.stderr[-3000:]
    journal = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    labels = [y for _, y in rows[1200:]]
    majority = max(labels.count("0"), labels.count("1")) / len(labels)
    assert majority < 0.6 and journal["best"]["eval_accuracy"] > 0.8


# Slow tier: about 30 s, moved to keep the default suite within 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_a_killed_evaluation_loop_continues_without_repeats(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    _sst2_folder(str(tmp_path / "glue" / "SST-2"), random.Random(4), 48)
    args = _args(config_file, str(tmp_path / "glue"), spm, str(tmp_path / "out"),
                 do_train=True, do_eval=True, train_step=80, save_checkpoints_steps=10)
    process = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
    journal_path = tmp_path / "out" / "eval_results.json"
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:
        if journal_path.exists() and len(json.loads(journal_path.read_text())["evaluations"]) >= 2:
            break
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    result = run_script(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    journal = json.loads(journal_path.read_text())
    assert [e["step"] for e in journal["evaluations"]] == list(range(10, 90, 10))
    best = max(journal["evaluations"], key=lambda e: (e["eval_accuracy"], -e["step"]))
    assert journal["best"]["step"] == best["step"]
    reader = tf.train.load_checkpoint(str(tmp_path / "out" / "model.ckpt-best"))
    assert int(reader.get_tensor("global_step")) == best["step"]


@pytest.mark.parametrize("problem", ["task", "missing", "row", "length", "labels", "export"])
def test_a_mistake_ends_with_one_line_and_writes_nothing(tmp_path, synthetic_corpus, problem):
    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    glue = write_glue(str(tmp_path / "glue"))
    flags, expected = {"task_name": "RTE", "do_train": True, "do_eval": True}, ""
    if problem == "task":
        flags["task_name"], expected = "glue", "Unknown --task_name 'glue'"
    elif problem == "missing":
        os.remove(tmp_path / "glue" / "RTE" / "dev.tsv")
        expected = "No such file"
    elif problem == "row":
        with open(tmp_path / "glue" / "RTE" / "train.tsv", "a") as handle:
            handle.write("7\tonly two columns\n")
        expected = "RTE/train.tsv:3: 2 columns"
    elif problem == "length":
        flags["max_seq_length"], expected = 128, "exceeds the config's max_position_embeddings=64"
    elif problem == "export":   # refused before the training, not after it
        (tmp_path / "export").mkdir()
        (tmp_path / "export" / "saved_model.pb").write_bytes(b"the user's model")
        flags["export_dir"], expected = str(tmp_path / "export"), "already exists and is not empty"
    else:
        os.makedirs(tmp_path / "mnli")
        original_fine_tuned_checkpoint(str(tmp_path / "mnli" / "model.ckpt-1"),
                                        tiny_config(**TINY), 3)
        flags["init_checkpoint"] = str(tmp_path / "mnli")
        expected = "pass --init_encoder_only"
    result = run_script(*_args(config_file, glue, spm, str(tmp_path / "out"), **flags))
    assert_clean_failure(result, expected)
    assert not (tmp_path / "out").exists()
    if problem == "export":
        assert (tmp_path / "export" / "saved_model.pb").read_bytes() == b"the user's model"
    if problem == "labels":   # ... and with it, the MNLI encoder starts RTE
        result = run_script(*_args(config_file, glue, spm, str(tmp_path / "out"), **flags,
                                   init_encoder_only=True, train_step=4, save_checkpoints_steps=4))
        assert result.returncode == 0, result.stderr[-3000:]


def test_eval_results_txt_prints_numbers_and_arrays_as_the_original_does(tmp_path):
    """The original prints what its Estimator returns: float32 numbers, and for STS-B the
    whole dev set's `pred` and `label_ids` as numpy float32 arrays, keys sorted."""
    from albert.training.run_directory import RunDirectory
    directory = RunDirectory(str(tmp_path))
    pred, labels = [0.1, 2.75, 4.2], [0.0, 3.0, 4.0]
    directory.record_evaluation(4, {"pearson": 0.9819805060619657, "MSE": 0.0625,
                                    "eval_loss": 0.0625}, {"step": 4, "pearson": 0.98},
                                "pearson", "finetuning",
                                concatenated={"pred": pred, "label_ids": labels})
    long_pred = [i / 7 for i in range(1200)]
    directory.record_evaluation(8, {"pearson": 0.5, "MSE": 1 / 3, "eval_loss": 1 / 3},
                                {"step": 4, "pearson": 0.98}, "pearson", "finetuning",
                                concatenated={"pred": long_pred, "label_ids": long_pred})
    lines = (tmp_path / "eval_results.txt").read_text().splitlines()
    assert lines[:8] == ["MSE = 0.0625", "eval_loss = 0.0625", "global_step = 4",
                         f"label_ids = {np.asarray(labels, np.float32)}", "pearson = 0.9819805",
                         f"pred = {np.asarray(pred, np.float32)}", "best = -1", "=" * 50]
    assert lines[8:10] == ["MSE = 0.33333334", "eval_loss = 0.33333334"]
    assert "..." in lines[11] and lines[-2:] == ["best = 0.9819805", "=" * 50]
    # The journal keeps the arrays apart from the metrics, which stay numbers.
    entry = json.loads((tmp_path / "eval_results.json").read_text())["evaluations"][0]
    assert entry["concatenated"] == {"pred": pred, "label_ids": labels}
    assert all(isinstance(v, float) for k, v in entry.items() if k not in ("step", "concatenated"))


# Slow tier: 44 s in the default suite of 2026-12-06 (2 AVX2 cores), moved to make room for
# the own-files and tagging tests within the default suite's 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_export_serves_serialized_examples_and_tensors(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    config = tiny_config(**TINY)
    os.makedirs(tmp_path / "sts")
    values = original_fine_tuned_checkpoint(str(tmp_path / "sts" / "model.ckpt-1"), config, 1)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(config.to_json_string())
    glue = write_glue(str(tmp_path / "glue"))
    # Two steps at learning rate 0 keep the weights while the evaluation writes STS-B's lines.
    result = run_script(*_args(config_file, glue, spm, str(tmp_path / "out"), task_name="STS-B",
                               init_checkpoint=str(tmp_path / "sts"), do_predict=True,
                               do_train=True, do_eval=True, learning_rate=0, train_step=2,
                               save_checkpoints_steps=2,
                               export_dir=str(tmp_path / "export"), threshold_to_export=0.5))
    assert result.returncode == 0, result.stderr[-3000:]
    evaluation = json.loads((tmp_path / "out" / "eval_results.json").read_text())["evaluations"]
    dev_labels = [float(line.split("\t")[-1]) for line in
                  (tmp_path / "glue" / "STS-B" / "dev.tsv").read_text().splitlines()[1:]]
    assert evaluation[0]["concatenated"]["label_ids"] == pytest.approx(dev_labels)
    text = (tmp_path / "out" / "eval_results.txt").read_text()
    assert text.startswith("MSE = ") and "\npred = [" in text and "\nlabel_ids = [" in text
    code = f"""
import json, sys
import tensorflow as tf
loaded = tf.saved_model.load({str(tmp_path / 'export')!r})
feature = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
ids = [2, 40, 41, 3, 50, 3] + [0] * 26
example = tf.train.Example(features=tf.train.Features(feature={{
    "input_ids": feature(ids), "input_mask": feature([1] * 6 + [0] * 26),
    "segment_ids": feature([0] * 4 + [1] * 2 + [0] * 26)}})).SerializeToString()
served = loaded.signatures["serving_default"](examples=tf.constant([example]))
direct = loaded.signatures["serve_tensors"](input_ids=tf.constant([ids[:6]]),
    input_mask=tf.constant([[1] * 6]), segment_ids=tf.constant([[0, 0, 0, 0, 1, 1]]))
print(json.dumps({{"served": served["predictions"].numpy().tolist(),
                  "direct": direct["predictions"].numpy().tolist(),
                  "threshold": float(served["threshold"]), "albert": "albert" in sys.modules}}))
"""
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=str(tmp_path))
    assert output.returncode == 0, output.stderr[-3000:]
    served = json.loads(output.stdout.strip().splitlines()[-1])
    assert served["albert"] is False and served["threshold"] == 0.5
    assert served["served"] == pytest.approx(served["direct"], abs=1e-5)
    model = AlbertClassifier(config, num_labels=1)
    from albert.checkpoints import assign_model_weights
    assign_model_weights(model, values)
    expected = model({"input_word_ids": np.array([[2, 40, 41, 3, 50, 3]], np.int32),
                      "input_mask": np.ones((1, 6), np.int32),
                      "input_type_ids": np.array([[0, 0, 0, 0, 1, 1]], np.int32)},
                     training=False)["logits"].numpy()[:, 0]
    assert served["served"] == pytest.approx(expected.tolist(), abs=1e-5)


def test_the_preset_fills_table_14_and_explicit_flags_win(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(TINY))
    glue = write_glue(str(tmp_path / "glue"))
    args = ["run_classifier.py", "--task_name=MRPC", f"--data_dir={glue}",
            f"--albert_config_file={config_file}", f"--spm_model_file={spm}",
            f"--output_dir={tmp_path / 'out'}", "--task_preset", "--max_seq_length=32",
            "--train_step=4", "--save_checkpoints_steps=4", "--train_batch_size=2", "--do_train",
            "--noprogress"]
    result = run_script(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    log = [json.loads(line) for line in (tmp_path / "out" / "train_log.jsonl").read_text().splitlines()]
    # MRPC in Table 14: learning rate 2e-5 with 200 warm-up steps -> 2e-5 * step / 200.
    assert [round(r["learning_rate"] / 2e-5 * 200) for r in log] == [0, 1, 2, 3]
    config = json.loads((tmp_path / "out" / "albert_config.json").read_text())
    assert config["hidden_dropout_prob"] == 0.0   # MRPC: ALBERT dropout 0


def test_predict_only_for_the_diagnostic_set_with_an_mnli_model(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    config = tiny_config(**TINY)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(config.to_json_string())
    os.makedirs(tmp_path / "mnli")
    original_fine_tuned_checkpoint(str(tmp_path / "mnli" / "model.ckpt-5"), config, 3)
    glue = write_glue(str(tmp_path / "glue"))
    result = run_script("run_classifier.py", "--task_name=AX", f"--data_dir={glue}",
                        f"--albert_config_file={config_file}",
                        f"--init_checkpoint={tmp_path / 'mnli'}", f"--spm_model_file={spm}",
                        f"--output_dir={tmp_path / 'out'}", "--max_seq_length=32", "--do_predict",
                        "--noprogress")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = (tmp_path / "out" / "AX.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) == 2
    assert rows[1].split("\t")[1] in ("contradiction", "entailment", "neutral")
    refused = run_script("run_classifier.py", "--task_name=AX", f"--data_dir={glue}",
                         f"--albert_config_file={config_file}", f"--spm_model_file={spm}",
                         f"--output_dir={tmp_path / 'out2'}", "--do_train", "--noprogress")
    assert_clean_failure(refused, "ax is predict-only")


def test_bucketed_evaluation_gives_the_padded_numbers_in_file_order():
    from albert.tasks.finetuning import bucketed_logits

    config = tiny_config()
    model = AlbertClassifier(config, num_labels=2)
    rng = np.random.default_rng(0)
    features = {"input_word_ids": rng.integers(5, 99, (50, 32)).astype("int32"),
                "input_mask": np.ones((50, 32), "int32"),
                "input_type_ids": np.zeros((50, 32), "int32")}
    for row in range(50):
        length = int(rng.integers(3, 32))
        features["input_mask"][row, length:] = 0
        features["input_word_ids"][row, length:] = 0
        features["input_type_ids"][row, length // 2:length] = 1
    padded = model(features, training=False)["logits"].numpy()
    np.testing.assert_allclose(bucketed_logits(model, features, batch_size=8), padded, atol=1e-5)
