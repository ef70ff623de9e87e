"""run_squad.py as users run it: predict-only from original checkpoints, training, mistakes."""

import collections
import json
import math
import os
import re
import shutil

import numpy as np
import pytest

from albert.checkpoints import assign_model_weights
from albert.finetuning_data import squad
from albert.evaluation import squad_metrics
from albert.modeling import AlbertSquadV1, AlbertSquadV2
from albert.tokenization import SentencePieceTokenizer
from conftest import TINY, tiny_config
from original_checkpoints import original_fine_tuned_checkpoint
from scripts import assert_clean_failure, run_script
from squad_fixtures import write_squad, write_year_task

LENGTHS = ["--max_seq_length=64", "--doc_stride=24", "--max_query_length=16"]


# ------------------------------------------------------ reference decoding
def _softmax(scores):
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    return [e / sum(exps) for e in exps]


def reference_decode(examples, features, results, version_2, n_best=20, max_answer=30,
                     start_n_top=5, end_n_top=5):
    """The original's accumulate/write steps candidate by candidate: (best texts, n-best,
    null scores)."""
    by_example = collections.defaultdict(list)
    for feature in features:
        by_example[feature.example_index].append(feature)
    best, nbest, null = {}, {}, {}
    for index, example in enumerate(examples):
        prelim, score_null = [], 1000000
        for feature in by_example[index]:
            result = results[feature.unique_id]
            offset = feature.tokens.index("[SEP]") + 1
            window = len(feature.tok_start_to_orig_index)
            context = set(feature.max_context_positions)
            if version_2:
                score_null = min(score_null, result["cls_logits"])
                pairs = [(result["start_top_index"][i], result["end_top_index"][i * end_n_top + j],
                          result["start_top_log_probs"][i],
                          result["end_top_log_probs"][i * end_n_top + j])
                         for i in range(start_n_top) for j in range(end_n_top)]
            else:
                order = lambda values: sorted(range(len(values)), key=lambda k: values[k],
                                              reverse=True)[:n_best]
                pairs = [(s, e, result["start_logits"][s], result["end_logits"][e])
                         for s in order(result["start_logits"])
                         for e in order(result["end_logits"])]
            for s, e, s_score, e_score in pairs:
                if s - offset >= window or e - offset >= window or s not in context:
                    continue
                if version_2 and s - offset < 0:
                    continue
                if e < s or e - s + 1 > max_answer:
                    continue
                prelim.append((feature, s - offset, e - offset, float(s_score), float(e_score)))
        prelim.sort(key=lambda p: p[3] + p[4], reverse=True)
        entries, seen = [], set()
        for feature, s, e, s_score, e_score in prelim:
            if len(entries) >= n_best:
                break
            text = example.paragraph_text[feature.tok_start_to_orig_index[s]:
                                          feature.tok_end_to_orig_index[e] + 1].strip()
            if text in seen:
                continue
            seen.add(text)
            entries.append((text, s_score, e_score))
        if not entries:
            entries = [("", -1e6, -1e6)] if version_2 else [("empty", 0.0, 0.0)]
        probabilities = _softmax([s + e for _, s, e in entries])
        nbest[example.qas_id] = [{"text": t, "probability": p, "start_log_prob": s,
                                  "end_log_prob": e}
                                 for (t, s, e), p in zip(entries, probabilities)]
        best[example.qas_id] = entries[0][0]
        null[example.qas_id] = float(score_null)
    return best, nbest, null


def _keras_results(model, features, names):
    """Every window at full length through the Keras model: {unique_id: {name: list}}."""
    inputs = squad.PredictFeatures([], features).model_inputs()
    outputs = model({k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                             "p_mask")}, training=False)
    arrays = {name: np.asarray(outputs[name]) for name in names}
    return {f.unique_id: {name: arrays[name][row].tolist() for name in names}
            for row, f in enumerate(features)}


def _near_tie(entries, index, tolerance=2e-5):
    """Whether entry `index` of an n-best list scores within `tolerance` of a neighbour
    (random weights give many such ties; float noise may order them either way)."""
    score = lambda k: entries[k]["start_log_prob"] + entries[k]["end_log_prob"]
    return any(0 <= k < len(entries) and abs(score(k) - score(index)) < tolerance
               for k in (index - 1, index + 1))


def _assert_nbest_equal(written, expected):
    """Same questions; position by position the same scores, and the same texts except
    where two candidates tie within float noise."""
    assert list(written) == list(expected)
    for qid in expected:
        mine, theirs = written[qid], expected[qid]
        assert len(mine) == len(theirs), qid
        for index, (a, b) in enumerate(zip(mine, theirs)):
            for key in ("probability", "start_log_prob", "end_log_prob"):
                if a["text"] == b["text"]:
                    assert a[key] == pytest.approx(b[key], abs=2e-5), (qid, index, key)
            assert a["start_log_prob"] + a["end_log_prob"] == pytest.approx(
                b["start_log_prob"] + b["end_log_prob"], abs=2e-5), (qid, index)
            assert a["text"] == b["text"] or _near_tie(theirs, index), (qid, index)


def _setup(tmp_path, spm_model, version):
    config = tiny_config(vocab_size=1200, max_position_embeddings=64)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(config.to_json_string())
    train = write_squad(str(tmp_path / "data" / "train.json"), version)
    dev = write_squad(str(tmp_path / "data" / "dev.json"), version, for_training=False)
    flags = [f"--albert_config_file={config_file}", f"--spm_model_file={spm_model}",
             f"--output_dir={tmp_path / 'out'}", f"--predict_file={dev}", "--noprogress",
             *LENGTHS]
    return config, train, dev, flags


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_original_fine_tuned_checkpoint_predicts_like_the_keras_model(tmp_path, synthetic_corpus,
                                                                      version):
    _, spm = synthetic_corpus
    config, _, dev, flags = _setup(tmp_path, spm, version)
    head = "squad_v2" if version == "2.0" else "squad_v1"
    prefix = str(tmp_path / "fine_tuned" / "model.ckpt-1200")
    os.makedirs(os.path.dirname(prefix))
    values = original_fine_tuned_checkpoint(prefix, config, head=head)
    script = "run_squad_v2.py" if version == "2.0" else "run_squad_v1.py"
    # v1.1 also exports (the original's run_squad_v1.py --export_dir; v2.0 has none).
    export = [f"--export_dir={tmp_path / 'export'}"] if version == "1.1" else []
    # The original's predict-only command: no --train_file, no --do_train.
    result = run_script(script, *flags, f"--init_checkpoint={prefix}", "--do_predict", *export,
                        f"--predict_feature_file={tmp_path / 'f' / 'dev.tf_record'}",
                        f"--predict_feature_left_file={tmp_path / 'f' / 'dev_left.json'}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "out"

    tokenizer = SentencePieceTokenizer(spm)
    examples = squad.read_squad_examples(dev, is_training=False).examples
    features = list(squad.FeatureConverter(tokenizer, 64, 24, 16, False).features(examples))
    if version == "2.0":
        model = AlbertSquadV2(config)
        names = ("start_top_index", "start_top_log_probs", "end_top_index", "end_top_log_probs",
                 "cls_logits")
    else:
        model = AlbertSquadV1(config)
        names = ("start_logits", "end_logits")
    assign_model_weights(model, values)
    results = _keras_results(model, features, names)
    best, nbest, null = reference_decode(examples, features, results, version == "2.0")

    _assert_nbest_equal(json.loads((out / "nbest_predictions.json").read_text()), nbest)
    predictions = json.loads((out / "predictions.json").read_text())
    dataset = json.loads(open(dev).read())["data"]
    if version == "2.0":
        written_null = json.loads((out / "null_odds.json").read_text())
        assert list(written_null) == list(null)
        np.testing.assert_allclose(list(written_null.values()), list(null.values()), atol=1e-5)
        # Two passes: the threshold with the best F1 when always answering, then "" for
        # the questions whose null score is not below it.
        threshold = squad_metrics.evaluate_v2(dataset, best, null)["best_f1_thresh"]
        expected = {q: t if null[q] < threshold else "" for q, t in best.items()}
        assert predictions.keys() == expected.keys()
        for qid in expected:
            assert predictions[qid] == expected[qid] or _near_tie(nbest[qid], 0), qid
        scores = squad_metrics.evaluate_v2(dataset, expected, null)
        keys = {"exact", "f1", "total", "null_score_diff_threshold"}
    else:
        for qid in best:
            assert predictions[qid] == best[qid] or _near_tie(nbest[qid], 0), qid
        scores = squad_metrics.evaluate_v1(dataset, best)
        keys = {"exact_match", "f1"}
    lines = (out / "eval_results.txt").read_text().splitlines()
    assert lines[-1] == f"best perf happened at step: {prefix}"
    final = dict(line.split(" = ") for line in lines[:-1])
    assert set(final) == keys
    assert float(final["f1"]) == pytest.approx(scores["f1"])
    # The left file is JSON; the written feature files are reused by the next run.
    assert json.loads((tmp_path / "f" / "dev_left.json").read_text())["questions"] == len(examples)
    if version == "1.1":
        _assert_export_computes_the_logits(tmp_path / "export", model, features)


def test_export_alone_writes_the_latest_checkpoint_not_the_best(tmp_path, synthetic_corpus):
    """The original's export takes the latest checkpoint of --output_dir, and needs neither
    --do_train nor --do_predict."""
    _, spm = synthetic_corpus
    config, _, dev, flags = _setup(tmp_path, spm, "1.1")
    out = tmp_path / "out"
    out.mkdir()
    latest = original_fine_tuned_checkpoint(str(out / "model.ckpt-5"), config, seed=1,
                                            head="squad_v1")
    for name in ("model.ckpt-3", "model.ckpt-best"):
        original_fine_tuned_checkpoint(str(out / name), config, seed=2, head="squad_v1")
    (out / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-5"\n'
                                    'all_model_checkpoint_paths: "model.ckpt-3"\n'
                                    'all_model_checkpoint_paths: "model.ckpt-5"\n')
    result = run_script("run_squad_v1.py", *flags, f"--export_dir={tmp_path / 'export'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Exported " + str(out / "model.ckpt-5") in result.stderr
    model = AlbertSquadV1(config)
    assign_model_weights(model, latest)
    examples = squad.read_squad_examples(dev, is_training=False).examples
    features = list(squad.FeatureConverter(SentencePieceTokenizer(spm), 64, 24, 16,
                                           False).features(examples))
    _assert_export_computes_the_logits(tmp_path / "export", model, features)


def test_the_export_model_computes_in_float32_after_mixed_precision_training():
    """Training sets the global mixed-precision policy; the exported model must not inherit
    it (TFLite's built-in ops and the export's contract are float32)."""
    import keras

    from albert.finetuning import float32_model
    from albert.tasks.squad import SquadTask

    from albert.checkpoints.weights import model_weights

    config = tiny_config(vocab_size=1200, max_position_embeddings=64)
    task = SquadTask(config=config, max_seq_length=64)
    trained = AlbertSquadV1(config)
    trained({"input_word_ids": np.zeros((1, 4), "int32"), "input_mask": np.ones((1, 4), "int32"),
             "input_type_ids": np.zeros((1, 4), "int32")})
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = float32_model(task, model_weights(trained), "test")
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"   # restored
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert model.dtype_policy.name == "float32"
    assert all(layer.dtype_policy.compute_dtype == "float32" for layer in model._flatten_layers())


def _assert_export_computes_the_logits(export, model, features):
    """The original's export: saved_model/<seconds>/ (start_log_prob, end_log_prob) and
    albert_model.tflite (tensors input_ids, input_mask, segment_ids -> start_logits,
    end_logits, in that order), one [1, 64] window at a time, the Keras model's logits."""
    import tensorflow as tf
    (saved_model,) = (export / "saved_model").iterdir()
    assert re.fullmatch(r"\d{10}", saved_model.name)
    serve = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    interpreter = tf.lite.Interpreter(model_path=str(export / "albert_model.tflite"))
    interpreter.allocate_tensors()
    inputs, outputs = interpreter.get_input_details(), interpreter.get_output_details()
    assert [(d["name"], d["shape"].tolist()) for d in inputs] == [
        (name, [1, 64]) for name in ("input_ids", "input_mask", "segment_ids")]
    assert [d["name"] for d in outputs] == ["start_logits", "end_logits"]
    for feature in features[:3]:
        window = [np.array([getattr(feature, name)], np.int32)
                  for name in ("input_ids", "input_mask", "segment_ids")]
        expected = model({"input_word_ids": window[0], "input_mask": window[1],
                          "input_type_ids": window[2]}, training=False)
        served = serve(input_ids=window[0], input_mask=window[1], segment_ids=window[2])
        for detail, value in zip(inputs, window):
            interpreter.set_tensor(detail["index"], value)
        interpreter.invoke()
        for index, name in enumerate(("start", "end")):
            np.testing.assert_allclose(served[f"{name}_log_prob"], expected[f"{name}_logits"],
                                       atol=1e-5)
            np.testing.assert_allclose(interpreter.get_tensor(outputs[index]["index"]),
                                       expected[f"{name}_logits"], atol=1e-4)


def test_train_evaluate_every_checkpoint_then_predict_only(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    _, train, dev, flags = _setup(tmp_path, spm, "2.0")
    out = tmp_path / "out"
    args = [*flags, f"--train_file={train}", "--train_batch_size=4", "--num_train_epochs=2",
            "--save_checkpoints_steps=3", "--learning_rate=1e-3", "--predict_batch_size=16"]
    result = run_script("run_squad.py", *args, "--version_2_with_negative", "--do_train",
                        "--do_predict")
    assert result.returncode == 0, result.stderr[-3000:]
    journal = json.loads((out / "eval_results.json").read_text())
    steps = [entry["step"] for entry in journal["evaluations"]]
    assert steps == [3, 5]  # int(10 questions / 4 × 2 epochs) = 5 steps
    for entry in journal["evaluations"]:
        # A 5-step run may be flagged degenerate (JSON only; the metrics are the original's).
        metrics = set(entry) - {"findings", "degenerate", "degenerate_reason"}
        assert metrics == {"step", "exact", "f1", "total", "null_score_diff_threshold"}
    text = (out / "eval_results.txt").read_text().splitlines()
    first = journal["evaluations"][0]
    assert text[:7] == [f"exact = {first['exact']}", f"f1 = {first['f1']}", "global_step = 3",
                        f"null_score_diff_threshold = {first['null_score_diff_threshold']}",
                        f"total = {first['total']}", f"best f1 = {first['f1']}", "=" * 50]
    assert text[-1] == f"best perf happened at step: {journal['best']['step']}"
    for name in ("predictions.json", "nbest_predictions.json", "null_odds.json",
                 "model.ckpt-best.index", "train.tf_record", "predict_left.json"):
        assert (out / name).exists(), name
    settings = json.loads((out / "train.tf_record.settings.json").read_text())
    assert settings["counts"] == {"questions": 10, "skipped_answer_mismatch": 0}

    # Predict-only afterwards, with the original's flags (no --train_file): the features
    # are reused, nothing is evaluated twice, model.ckpt-best predicts again.
    (out / "predictions.json").unlink()
    again = run_script("run_squad_v2.py", *flags, "--do_predict")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Reading prediction features" in again.stderr
    assert json.loads((out / "eval_results.json").read_text())["evaluations"] == \
        journal["evaluations"]
    assert (out / "predictions.json").exists()


def _year_baseline(train, dev):
    """F1 of always answering the word at the most common answer position (in words)."""
    def answer_word(qa, context):
        return len(context[:qa["answers"][0]["answer_start"]].split())

    positions = collections.Counter(
        answer_word(p["qas"][0], p["context"])
        for a in json.loads(open(train).read())["data"] for p in a["paragraphs"]
        if p["qas"][0]["answers"])
    position = positions.most_common(1)[0][0]
    dataset = json.loads(open(dev).read())["data"]
    predictions = {}
    for article in dataset:
        paragraph = article["paragraphs"][0]
        words = paragraph["context"].split()
        predictions[paragraph["qas"][0]["id"]] = words[min(position, len(words) - 1)]
    return squad_metrics.evaluate_v1(dataset, predictions)["f1"]


# Slow tier (about 42 s a run on 2 cores), to keep the default suite within 15 minutes; the
# default suite trains, evaluates and predicts in test_train_evaluate_every_checkpoint_....
@pytest.mark.slow
@pytest.mark.parametrize("version,seed", [("1.1", 1), ("1.1", 2), ("2.0", 1)])
def test_a_tiny_model_learns_a_real_text_span_task(tmp_path, demo_corpus, version, seed):
    """"In which year?" on real sentences of the demo corpus (one year per context; v2.0:
    a third of the contexts have no number). Measured: v1.1 F1 89.0 (seed 1); v2.0 F1
    89.5 (seed 1) with the tuned threshold; the fixed-position baseline is near 1."""
    directory, spm = demo_corpus
    train, dev = write_year_task(str(tmp_path / "data"), directory, seed=0,
                                 unanswerable=version == "2.0")
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(dict(TINY, vocab_size=4000, max_position_embeddings=128)))
    out = tmp_path / "out"
    result = run_script("run_squad.py", f"--albert_config_file={config_file}",
                        f"--spm_model_file={spm}", f"--output_dir={out}",
                        f"--train_file={train}", f"--predict_file={dev}", "--do_train",
                        "--do_predict", "--max_seq_length=128", "--doc_stride=64",
                        "--max_query_length=16", "--train_batch_size=16",
                        "--predict_batch_size=64", "--num_train_epochs=5",
                        "--learning_rate=1e-3", "--save_checkpoints_steps=60", "--noprogress",
                        f"--random_seed={seed}",
                        f"--version_2_with_negative={version == '2.0'}")
    assert result.returncode == 0, result.stderr[-3000:]
    best = json.loads((out / "eval_results.json").read_text())["best"]["f1"]
    baseline = _year_baseline(train, dev) if version == "1.1" else None
    if baseline is not None:
        assert baseline < 20
    assert best > 70, (best, baseline)


@pytest.mark.parametrize("problem", ["json", "lengths", "predict_settings", "train_settings",
                                     "pickle", "nothing_to_predict_with", "export_exists",
                                     "export_v2", "no_window"])
def test_a_mistake_ends_with_one_line_and_writes_nothing(tmp_path, synthetic_corpus, problem):
    _, spm = synthetic_corpus
    _, train, dev, flags = _setup(tmp_path, spm, "1.1")
    out = tmp_path / "out"
    features = tmp_path / "features"
    features.mkdir()
    names = [f"--train_feature_file={features / 'train.tf_record'}",
             f"--predict_feature_file={features / 'dev.tf_record'}",
             f"--predict_feature_left_file={features / 'dev_left.json'}"]
    args = [*flags, *names, f"--train_file={train}", "--do_train", "--do_predict",
            "--train_batch_size=4", "--num_train_epochs=1", "--save_checkpoints_steps=100"]
    expected = []
    if problem == "json":
        with open(dev, "a") as file:
            file.write(",")
        expected = [f"{dev}: not valid JSON"]
    elif problem == "lengths":
        args.append("--max_query_length=61")
        expected = ["--max_seq_length=64 leaves no room for the context"]
    elif problem in ("predict_settings", "train_settings"):
        made = run_script("run_squad.py", *args)
        assert made.returncode == 0, made.stderr[-3000:]
        shutil.rmtree(out)
        # Only the file under test is left from the first run.
        if problem == "train_settings":
            (features / "dev.tf_record").unlink()
            (features / "dev_left.json").unlink()
        else:
            (features / "train.tf_record").unlink()
            (features / "train.tf_record.settings.json").unlink()
        args.append("--doc_stride=20")
        file = "dev_left.json" if problem == "predict_settings" else "train.tf_record"
        expected = [f"{features / file} was made with other settings (doc_stride differ)"]
    elif problem == "nothing_to_predict_with":
        args = [*flags, *names, "--do_predict"]
        expected = ["Nothing to predict with: no checkpoint in"]
    elif problem == "export_exists":
        (tmp_path / "export").mkdir()
        (tmp_path / "export" / "albert_model.tflite").write_bytes(b"the user's model")
        args.append(f"--export_dir={tmp_path / 'export'}")
        expected = ["albert_model.tflite already exists"]
    elif problem == "no_window":
        # Ligatures become two letters each: the context cannot align with its pieces.
        context = "ﬁﬂﬃ ﬁﬂ ﬃﬁ " * 6 + "river"
        with open(dev, "w", encoding="utf-8") as file:
            json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": [{
                "context": context, "qas": [{"id": "q1", "question": "What?", "answers": [
                    {"text": "river", "answer_start": len(context) - 5}]}]}]}]}, file)
        expected = ["None of the 1 questions of", "has a window"]
    elif problem == "export_v2":
        args += ["--version_2_with_negative", f"--export_dir={tmp_path / 'export'}"]
        expected = ["the v2.0 scripts have no export"]
    else:
        (features / "dev.tf_record").write_bytes(b"")
        (features / "dev_left.json").write_bytes(b"\x80\x04\x95pickle")
        expected = ["the original pickled it"]
    before = {path.name: path.read_bytes() for path in features.iterdir()}
    result = run_script("run_squad.py", *args)
    assert_clean_failure(result, *expected)
    assert {path.name: path.read_bytes() for path in features.iterdir()} == before
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]
    assert not re.search(r"model\.ckpt", result.stderr)
    if problem == "export_exists":
        assert [p.name for p in (tmp_path / "export").iterdir()] == ["albert_model.tflite"]
        assert (tmp_path / "export" / "albert_model.tflite").read_bytes() == b"the user's model"
