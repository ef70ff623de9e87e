"""TF-Hub-style export: loaded the way TF-Hub users load ALBERT, in processes without `albert`."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
# LiteRT's interpreter (tf.lite.Interpreter is deprecated in its favour and warns on each use).
from ai_edge_litert.interpreter import Interpreter

from albert.checkpoints import model_weights, write_checkpoint
from albert.finetuning_data.glue import InputExample, TASKS, convert_example
from albert.modeling import AlbertPretrainer
from albert.tokenization import SentencePieceTokenizer
from conftest import tiny_config
from scripts import assert_clean_failure, run_script

SENTENCES = ["The ferry left Zürich at dawn, carrying 1,200 passengers.",
             "She said the café had closed for the winter.",
             "Rain."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, synthetic_corpus):
    """(export dir, checkpoint dir, config, spm model) of a tiny pretrained-shape model."""
    _, spm = synthetic_corpus
    directory = tmp_path_factory.mktemp("export")
    config = tiny_config(vocab_size=1200, max_position_embeddings=128,
                         hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = AlbertPretrainer(config)
    write_checkpoint(model_weights(model), config, str(directory / "ckpt"), "tf1")
    result = run_script("-m", "albert.export", f"--init_checkpoint={directory / 'ckpt'}",
                        f"--albert_config_file={directory / 'ckpt' / 'albert_config.json'}",
                        f"--spm_model_file={spm}", f"--export_dir={directory / 'export'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return str(directory / "export"), str(directory / "ckpt"), config, spm


def _run_without_albert(code: str, tmp_path) -> dict:
    """Runs `code` in a fresh Python in `tmp_path` (no `albert` importable there); its last
    stdout line is JSON."""
    script = tmp_path / "user_code.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH="", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _variable_bytes(savedmodel_dir) -> int:
    """Bytes of the data shards of a SavedModel's `variables/` (the index, a few hundred bytes
    per variable, is left out: in a tiny model it is a visible share of the whole)."""
    directory = os.path.join(savedmodel_dir, "variables")
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
               if name.startswith("variables.data-"))


def _weight_bytes(weights: dict) -> int:
    return sum(np.asarray(value).nbytes for value in weights.values())


def test_the_encoder_savedmodel_stores_each_weight_once(exported):
    """Keras variables and the tf.Variables inside them are different objects: tracking both
    stored everything twice (2.0x)."""
    from albert.checkpoints import read_checkpoint

    export_dir, checkpoint, config, _ = exported
    weights, _ = read_checkpoint(checkpoint, "tf1", config)   # encoder and pretraining heads
    ratio = _variable_bytes(os.path.join(export_dir, "encoder")) / _weight_bytes(weights)
    assert 1.0 <= ratio <= 1.05, ratio


def _reference(exported, sentences, seq_length=128):
    """Our Python tokenizer's single-segment features and AlbertEncoder's outputs."""
    _, checkpoint, config, spm = exported
    from albert.checkpoints import load_into_model
    from albert.modeling import AlbertEncoder

    tokenizer = SentencePieceTokenizer(spm)
    features = [convert_example(InputExample(str(i), tokenizer.preprocess(s), None, "0"),
                                TASKS["sst-2"], seq_length, tokenizer)
                for i, s in enumerate(sentences)]
    inputs = {"input_word_ids": np.array([f.input_ids for f in features], np.int32),
              "input_mask": np.array([f.input_mask for f in features], np.int32),
              "input_type_ids": np.array([f.segment_ids for f in features], np.int32)}
    encoder = AlbertEncoder(config)
    load_into_model(encoder, checkpoint, "tf1")
    outputs = encoder(inputs, training=False)
    return inputs, outputs["pooled_output"].numpy(), outputs["sequence_output"].numpy()


def test_hub_keras_layers_give_the_encoder_outputs_on_real_sentences(exported, tmp_path):
    export_dir = exported[0]
    seen = _run_without_albert(f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_hub as hub
        import tensorflow_text  # registers the preprocessor's ops, as for TF Hub's models
        preprocessor = hub.KerasLayer({export_dir + '/preprocessor'!r})
        encoder = hub.KerasLayer({export_dir + '/encoder'!r})
        inputs = preprocessor(tf.constant({SENTENCES!r}))
        outputs = encoder(inputs)
        special = tf.saved_model.load({export_dir + '/preprocessor'!r}).tokenize.get_special_tokens_dict()
        assert "albert" not in sys.modules
        print(json.dumps({{"ids": inputs["input_word_ids"].numpy().tolist(),
                           "mask": inputs["input_mask"].numpy().tolist(),
                           "types": inputs["input_type_ids"].numpy().tolist(),
                           "pooled": outputs["pooled_output"].numpy().tolist(),
                           "sequence": outputs["sequence_output"].numpy().tolist(),
                           "blocks": len(outputs["encoder_outputs"]),
                           "default": outputs["default"].numpy().tolist(),
                           "special": {{k: int(v) for k, v in special.items()}}}}))
    """, tmp_path)
    inputs, pooled, sequence = _reference(exported, SENTENCES)
    np.testing.assert_array_equal(seen["ids"], inputs["input_word_ids"])
    np.testing.assert_array_equal(seen["mask"], inputs["input_mask"])
    np.testing.assert_array_equal(seen["types"], inputs["input_type_ids"])
    np.testing.assert_allclose(seen["pooled"], pooled, atol=1e-5)
    np.testing.assert_allclose(seen["default"], pooled, atol=1e-5)
    np.testing.assert_allclose(seen["sequence"], sequence, atol=1e-5)
    assert seen["blocks"] == exported[2].num_hidden_layers
    tokenizer = SentencePieceTokenizer(exported[3])
    assert seen["special"] == {"vocab_size": tokenizer.vocab_size,
                               "start_of_sequence_id": tokenizer.sp_model.PieceToId("[CLS]"),
                               "end_of_segment_id": tokenizer.sp_model.PieceToId("[SEP]"),
                               "padding_id": tokenizer.sp_model.PieceToId("<pad>"),
                               "mask_id": tokenizer.sp_model.PieceToId("[MASK]")}


# Slow tier (about 28 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_keras_3_tfsm_layer_and_the_mlm_sub_object(exported, tmp_path):
    export_dir = exported[0]
    inputs, pooled, _ = _reference(exported, SENTENCES, seq_length=24)
    np.save(tmp_path / "ids.npy", inputs["input_word_ids"])
    np.save(tmp_path / "mask.npy", inputs["input_mask"])
    seen = _run_without_albert(f"""
        import json
        import keras, numpy as np, tensorflow as tf
        ids, mask = np.load("ids.npy"), np.load("mask.npy")
        inputs = {{"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}}
        layer = keras.layers.TFSMLayer({export_dir + '/encoder'!r}, call_endpoint="serve",
                                       call_training_endpoint="serve_training")
        served = layer(inputs)
        trained = layer(inputs, training=True)
        loaded = tf.saved_model.load({export_dir + '/encoder'!r})
        mlm = loaded.mlm(dict(inputs, masked_lm_positions=tf.constant([[1, 2]] * len(ids))))
        sop = loaded.sop(inputs)
        info = loaded.tokenization_info()
        print(json.dumps({{"pooled": np.asarray(served["pooled_output"]).tolist(),
                           "dropout_changes": float(np.abs(np.asarray(trained["pooled_output"])
                                                           - np.asarray(served["pooled_output"])).max()),
                           "weights": len(layer.trainable_weights),
                           "mlm": list(mlm["mlm_logits"].shape),
                           "sop": np.exp(sop["sop_log_probs"].numpy()).tolist(),
                           "sop_pooled": sop["pooled_output"].numpy().tolist(),
                           "info": [info["vocab_file"].numpy().decode().rsplit("/", 1)[-1],
                                    bool(info["do_lower_case"].numpy())],
                           "assets": sorted(p.numpy().decode().rsplit("/", 1)[-1] for p in
                                            (loaded.albert_config_file.asset_path,
                                             loaded.sp_model_file.asset_path))}}))
    """, tmp_path)
    np.testing.assert_allclose(seen["pooled"], pooled, atol=1e-5)
    assert seen["dropout_changes"] > 0   # training=True applies dropout
    assert seen["weights"] == len(AlbertPretrainer(exported[2]).encoder.trainable_weights)
    assert seen["mlm"] == [3, 2, exported[2].vocab_size]
    # The original hub module's `sop` and `tokenization_info` signatures.
    assert np.asarray(seen["sop"]).shape == (3, 2)
    np.testing.assert_allclose(seen["sop_pooled"], pooled, atol=1e-5)
    from albert.checkpoints import load_into_model
    pretrainer = AlbertPretrainer(exported[2])
    load_into_model(pretrainer, exported[1], "tf1")
    expected = tf.nn.softmax(pretrainer.sentence_order(tf.constant(pooled))).numpy()
    np.testing.assert_allclose(seen["sop"], expected, atol=1e-5)
    assert seen["info"] == ["30k-clean.model", True]
    assert seen["assets"] == ["30k-clean.model", "albert_config.json"]


# `slow` (about 30 s, two training runs of the tutorial's classifier); CI runs it.
@pytest.mark.slow
def test_the_tutorial_classifier_trains_the_encoder_only_when_trainable(exported, tmp_path):
    export_dir = exported[0]
    seen = _run_without_albert(f"""
        import json
        import numpy as np, tensorflow as tf, tensorflow_hub as hub, tensorflow_text, tf_keras

        def changed(trainable):
            preprocessor = hub.KerasLayer({export_dir + '/preprocessor'!r})
            encoder = hub.KerasLayer({export_dir + '/encoder'!r}, trainable=trainable)
            text = tf_keras.layers.Input(shape=(), dtype=tf.string)
            pooled = encoder(preprocessor(text))["pooled_output"]
            logits = tf_keras.layers.Dense(1)(tf_keras.layers.Dropout(0.1)(pooled))
            model = tf_keras.Model(text, logits)
            model.compile(optimizer=tf_keras.optimizers.Adam(1e-3),
                          loss=tf_keras.losses.BinaryCrossentropy(from_logits=True))
            before = [v.numpy().copy() for v in encoder.weights]
            model.fit(np.array({SENTENCES!r} * 4), np.array([1, 0, 1] * 4), epochs=2, verbose=0)
            return (sum(not np.array_equal(b, v.numpy()) for b, v in zip(before, encoder.weights)),
                    len(encoder.trainable_weights))

        print(json.dumps({{"frozen": changed(False), "trainable": changed(True)}}))
    """, tmp_path)
    encoder_weights = len(AlbertPretrainer(exported[2]).encoder.trainable_weights)
    assert seen["frozen"] == [0, 0]
    changed, trainable = seen["trainable"]
    # every encoder variable trains (plus the dropout seed generator's state)
    assert trainable == encoder_weights and changed >= encoder_weights


def test_bert_pack_inputs_truncates_pairs_as_the_project_does(exported, tmp_path):
    export_dir, _, _, spm = exported
    first, second = SENTENCES[0] * 3, SENTENCES[1] * 2
    seen = _run_without_albert(f"""
        import json
        import tensorflow as tf, tensorflow_text
        preprocessor = tf.saved_model.load({export_dir + '/preprocessor'!r})
        a = preprocessor.tokenize(tf.constant([{first!r}]))
        b = preprocessor.tokenize(tf.constant([{second!r}]))
        packed = {{str(length): {{n: v.numpy().tolist() for n, v in
                                 preprocessor.bert_pack_inputs([a, b], seq_length=length).items()}}
                  for length in (16, 33)}}
        ids, starts, ends = preprocessor.tokenize_with_offsets(tf.constant([{first!r}]))
        packed["offsets"] = [ids.to_list(), starts.to_list(), ends.to_list(), a.to_list()]
        print(json.dumps(packed))
    """, tmp_path)
    tokenizer = SentencePieceTokenizer(spm)
    for length in (16, 33):
        pair = convert_example(InputExample("0", tokenizer.preprocess(first),
                                            tokenizer.preprocess(second), "0"),
                               TASKS["mrpc"], length, tokenizer)
        assert seen[str(length)]["input_word_ids"] == [pair.input_ids]
        assert seen[str(length)]["input_mask"] == [pair.input_mask]
        assert seen[str(length)]["input_type_ids"] == [pair.segment_ids]
    # tokenize_with_offsets: the same ids, and the in-graph tokenizer's input offsets
    import tensorflow as tf

    from albert.tokenization.in_graph import InGraphSentencePieceTokenizer

    ids, starts, ends, tokenized = seen["offsets"]
    assert ids == tokenized
    expected = InGraphSentencePieceTokenizer(tokenizer).tokenize_with_offsets(tf.constant([first]))
    assert [starts, ends] == [expected[1].to_list(), expected[2].to_list()]


@pytest.mark.parametrize("problem", ["fit", "spm", "existing"])
def test_an_export_mistake_ends_with_one_line(exported, tmp_path, problem):
    export_dir, checkpoint, config, spm = exported
    config_file = os.path.join(checkpoint, "albert_config.json")
    args = [f"--init_checkpoint={checkpoint}", f"--albert_config_file={config_file}",
            f"--spm_model_file={spm}", f"--export_dir={tmp_path / 'out'}"]
    expected = []
    if problem == "fit":
        other = tmp_path / "other.json"
        other.write_text(json.dumps(dict(config.to_dict(), hidden_size=48)))
        args[1] = f"--albert_config_file={other}"
        expected = ["does not fit the config"]
    elif problem == "spm":
        args[2] = f"--spm_model_file={tmp_path / 'missing.model'}"
        expected = ["missing.model"]
    else:
        os.makedirs(tmp_path / "out" / "encoder")
        (tmp_path / "out" / "encoder" / "saved_model.pb").write_text("mine")
        expected = ["already holds encoder; pass --overwrite"]
    result = run_script("-m", "albert.export", *args)
    assert_clean_failure(result, *expected)
    if problem == "existing":
        assert (tmp_path / "out" / "encoder" / "saved_model.pb").read_text() == "mine"
        assert sorted(os.listdir(tmp_path / "out")) == ["encoder"]
    else:
        assert not (tmp_path / "out").exists()


def test_the_exported_encoder_is_a_checkpoint_the_converters_read(exported, tmp_path):
    from albert.checkpoints import detect_format, read_checkpoint

    export_dir, checkpoint, config, _ = exported
    encoder_dir = os.path.join(export_dir, "encoder")
    assert detect_format(encoder_dir) == "savedmodel"
    weights, carried = read_checkpoint(encoder_dir, "auto", heads="required")
    assert carried == config
    original, _ = read_checkpoint(checkpoint, "tf1", config, heads="required")
    assert sorted(weights) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(weights[name], value, err_msg=name)
    # and back: savedmodel -> tf1 -> the same tensors
    result = run_script("convert_checkpoint.py", f"--init_checkpoint={encoder_dir}",
                        "--input_format=auto", "--output_format=tf1",
                        f"--output_dir={tmp_path / 'tf1'}")
    assert result.returncode == 0, result.stderr[-3000:]
    again, _ = read_checkpoint(str(tmp_path / "tf1"), "tf1", config, heads="required")
    for name, value in original.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)


@pytest.mark.slow  # ~45-65 s on 2 cores: kept out of the 15-minute default suite
def test_tflite_encoder_matches_keras_with_builtin_ops_only(exported, tmp_path):
    _, checkpoint, _, spm = exported
    result = run_script("-m", "albert.export", f"--init_checkpoint={checkpoint}",
                        f"--albert_config_file={checkpoint}/albert_config.json",
                        f"--spm_model_file={spm}", f"--export_dir={tmp_path / 'out'}",
                        "--tflite", "--seq_length=24")
    assert result.returncode == 0, result.stderr[-3000:]
    content = (tmp_path / "out" / "encoder.tflite").read_bytes()
    assert b"Flex" not in content   # no TensorFlow (Flex) ops: runs on plain TFLite
    # The converter's notes on options it ignores are not the user's warnings.
    assert not re.search(r"^[IW]0000 ", result.stderr, re.M), result.stderr
    interpreter = Interpreter(model_content=content)
    runner = interpreter.get_signature_runner("serving_default")
    inputs, pooled, sequence = _reference(exported, SENTENCES, seq_length=24)
    for row in range(len(SENTENCES)):
        outputs = runner(**{name: values[row:row + 1] for name, values in inputs.items()})
        np.testing.assert_allclose(outputs["pooled_output"], pooled[row:row + 1], atol=1e-4)
        np.testing.assert_allclose(outputs["sequence_output"], sequence[row:row + 1], atol=1e-4)


# Slow tier (about 32 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_fine_tuning_starts_from_an_exported_encoder_as_hub_module(exported, tmp_path):
    """--albert_hub_module_handle=<export>/encoder: weights and config come from the module."""
    from glue_fixtures import write_glue

    export_dir, checkpoint, config, spm = exported
    glue = write_glue(str(tmp_path / "glue"))
    output = tmp_path / "out"
    result = run_script("run_classifier.py", "--task_name=SST-2", f"--data_dir={glue}",
                        f"--albert_hub_module_handle={export_dir}/encoder",
                        f"--spm_model_file={spm}", f"--output_dir={output}",
                        "--max_seq_length=32", "--do_train", "--train_step=2",
                        "--save_checkpoints_steps=2", "--train_batch_size=2", "--noprogress")
    assert result.returncode == 0, result.stderr[-3000:]
    from albert.config import AlbertConfig

    assert AlbertConfig.from_json_file(str(output / "albert_config.json")) == config
    assert "Setting aside 7 head variables" in result.stderr   # the MLM / SOP heads


# multiple_choice is in the slow tier (19 s on 2 cores), to keep the default suite within
# 15 minutes.
@pytest.mark.parametrize("task", ["classifier",
                                  pytest.param("multiple_choice", marks=pytest.mark.slow)])
def test_fine_tuned_models_export_with_their_heads(tmp_path, synthetic_corpus, task):
    """Serialized examples in, the probabilities run_classifier.py / the Keras model give out;
    the TFLite task model gives the same logits."""
    import tensorflow as tf

    from albert.checkpoints import assign_model_weights
    from albert.finetuning_data.glue import read_examples
    from albert.modeling import AlbertClassifier, AlbertMultipleChoice
    from albert.tasks.classification import stack_features
    from glue_fixtures import write_glue
    from original_checkpoints import original_fine_tuned_checkpoint

    _, spm = synthetic_corpus
    config = tiny_config(vocab_size=1200)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(config.to_json_string())
    os.makedirs(tmp_path / "ckpt")
    outputs = 3 if task == "classifier" else 1
    values = original_fine_tuned_checkpoint(str(tmp_path / "ckpt" / "model.ckpt-9"), config,
                                            outputs)
    result = run_script("-m", "albert.export", f"--init_checkpoint={tmp_path / 'ckpt'}",
                        f"--albert_config_file={config_file}", f"--task={task}", "--tflite",
                        "--seq_length=16", f"--export_dir={tmp_path / 'export'}")
    assert result.returncode == 0, result.stderr[-3000:]

    tokenizer = SentencePieceTokenizer(spm)
    glue = write_glue(str(tmp_path / "glue"))
    examples = read_examples(TASKS["mnli"], glue, "test", tokenizer.preprocess)
    if task == "multiple_choice":   # options: eight different pairs, four per example
        examples = [InputExample("0", tokenizer.preprocess(a), tokenizer.preprocess(b),
                                 "contradiction") for a in SENTENCES for b in SENTENCES][:8]
    features = stack_features([convert_example(e, TASKS["mnli"], 16, tokenizer)
                               for e in examples], False)
    inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    if task == "classifier":
        model = AlbertClassifier(config, num_labels=3)
        # run_classifier.py's own predictions from the same checkpoint
        run = run_script("run_classifier.py", "--task_name=MNLI", f"--data_dir={glue}",
                         f"--albert_config_file={config_file}",
                         f"--init_checkpoint={tmp_path / 'ckpt'}", f"--spm_model_file={spm}",
                         f"--output_dir={tmp_path / 'out'}", "--max_seq_length=16",
                         "--do_predict", "--noprogress")
        assert run.returncode == 0, run.stderr[-3000:]
        expected = np.array([[float(v) for v in line.split("\t")] for line in
                             (tmp_path / "out" / "test_results.tsv").read_text().splitlines()])
    else:
        model = AlbertMultipleChoice(config, num_choices=4)
        inputs = {k: v.reshape(2, 4, -1) for k, v in inputs.items()}
    assign_model_weights(model, values)
    logits = model(inputs, training=False)["logits"].numpy()
    head_and_encoder = {name: value for name, value in values.items()
                        if name in model_weights(model)}
    ratio = _variable_bytes(tmp_path / "export" / task) / _weight_bytes(head_and_encoder)
    assert 1.0 <= ratio <= 1.05, ratio   # each weight once
    if task == "multiple_choice":
        expected = tf.nn.softmax(logits).numpy()

    def feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values.reshape(-1).tolist()))

    serialized = [tf.train.Example(features=tf.train.Features(feature={
        "input_ids": feature(inputs["input_word_ids"][row]),
        "input_mask": feature(inputs["input_mask"][row]),
        "segment_ids": feature(inputs["input_type_ids"][row])})).SerializeToString()
        for row in range(len(inputs["input_mask"]))]
    loaded = tf.saved_model.load(str(tmp_path / "export" / task))
    served = loaded.signatures["serving_default"](examples=tf.constant(serialized))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)

    content = (tmp_path / "export" / f"{task}.tflite").read_bytes()
    assert b"Flex" not in content
    runner = Interpreter(model_content=content).get_signature_runner("serving_default")
    for row in range(len(inputs["input_mask"])):
        lite = runner(**{name: values[row:row + 1] for name, values in inputs.items()})["logits"]
        np.testing.assert_allclose(lite, logits[row:row + 1], atol=1e-4)


# Slow tier (about 35 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_a_classifier_tflite_is_scored_on_the_glue_dev_set(tmp_path, synthetic_corpus):
    """--task_name / --data_dir: quantization_report.json holds the dev metrics of the float32
    model and of the file, as computed here from the Keras model and the file themselves."""
    from albert.checkpoints import assign_model_weights
    from albert.evaluation.glue_metrics import glue_metrics
    from albert.finetuning_data.glue import read_examples
    from albert.modeling import AlbertClassifier
    from albert.tasks.classification import classification_loss, stack_features
    from glue_fixtures import write_glue
    from original_checkpoints import original_fine_tuned_checkpoint

    _, spm = synthetic_corpus
    config = tiny_config(vocab_size=1200)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(config.to_json_string())
    os.makedirs(tmp_path / "ckpt")
    values = original_fine_tuned_checkpoint(str(tmp_path / "ckpt" / "model.ckpt-9"), config, 3)
    glue = write_glue(str(tmp_path / "glue"))
    base = ["-m", "albert.export", f"--init_checkpoint={tmp_path / 'ckpt'}",
            f"--albert_config_file={config_file}", "--task=classifier", "--seq_length=16",
            f"--spm_model_file={spm}", f"--data_dir={glue}"]

    wrong_task = run_script(*base, "--tflite", "--task_name=SST-2",
                            f"--export_dir={tmp_path / 'refused'}")
    assert_clean_failure(wrong_task, "has 3 output(s); sst-2 has 2")
    assert not (tmp_path / "refused").exists() or not os.listdir(tmp_path / "refused")

    result = run_script(*base, "--quantize=dynamic_int8", "--task_name=MNLI",
                        f"--export_dir={tmp_path / 'export'}")
    assert result.returncode == 0, result.stderr[-3000:]
    dev = json.loads((tmp_path / "export" / "quantization_report.json").read_text())["dev_set"]

    tokenizer = SentencePieceTokenizer(spm)
    examples = read_examples(TASKS["mnli"], glue, "dev", tokenizer.preprocess)
    features = stack_features([convert_example(e, TASKS["mnli"], 16, tokenizer)
                               for e in examples], False)
    labels = features.pop("label_ids")
    model = AlbertClassifier(config, num_labels=3)
    assign_model_weights(model, values)
    logits = {"float32": model(features, training=False)["logits"].numpy()}
    runner = Interpreter(model_content=(tmp_path / "export" / "classifier.tflite").read_bytes()
                         ).get_signature_runner("serving_default")
    logits["tflite"] = np.concatenate([runner(**{k: v[row:row + 1] for k, v in features.items()})
                                       ["logits"] for row in range(len(labels))])
    assert dev["task"] == "mnli" and dev["examples"] == dev["examples_in_file"] == len(examples)
    for name in ("float32", "tflite"):
        expected = glue_metrics("mnli", logits[name].argmax(-1), labels,
                                classification_loss(logits[name], labels, False))
        assert dev[name].keys() == expected.keys()
        for metric, value in expected.items():
            assert dev[name][metric] == pytest.approx(value, abs=1e-4), (name, metric)
    assert dev["prediction_agreement"] == pytest.approx(
        np.mean(logits["float32"].argmax(-1) == logits["tflite"].argmax(-1)))

    alone = run_script(*base[:-1], "--tflite", "--task_name=MNLI",
                       f"--export_dir={tmp_path / 'x'}")
    assert_clean_failure(alone, "--task_name and --data_dir go together")
