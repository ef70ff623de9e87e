"""KerasHub presets both ways: our exports loaded by keras_hub in a process that never imports
albert, and presets keras_hub saved itself read back, with the same outputs."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from albert.checkpoints import model_weights, read_checkpoint, read_weights, write_checkpoint
from albert.checkpoints.keras_hub_preset import (MLM_OUTPUT_TOLERANCE, TOKENIZER_VOCABULARY,
                                                 detect_keras_hub)
from albert.errors import CheckpointMismatchError, ConfigError, InputError
from albert.modeling import AlbertClassifier, AlbertEncoder, AlbertPretrainer
from conftest import random_inputs, tiny_config

keras_hub = pytest.importorskip("keras_hub")  # in the test extra; skipped only where missing

# The layouts KerasHub's AlbertBackbone can hold.
LAYOUTS = {
    "one_group": dict(num_hidden_layers=2),
    "two_groups_two_inner": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
    "e_equals_h": dict(embedding_size=32, num_hidden_layers=2),
}
SPM_VOCABULARY = 1200  # the synthetic corpus's SentencePiece model
TOLERANCE = 1e-5

# Runs in a fresh interpreter that must never import albert: loads our exports with keras_hub
# alone, and saves presets of keras_hub's own models with their outputs.
KERAS_HUB_SIDE = r'''
import json, sys
import numpy as np
import keras
import keras_hub

def features(path):
    inputs = dict(np.load(path))
    return {"token_ids": inputs["input_word_ids"], "segment_ids": inputs["input_type_ids"],
            "padding_mask": inputs["input_mask"]}, inputs

def randomise(model, seed):
    rng = np.random.default_rng(seed)
    for variable in model.variables:
        if "seed_generator" not in variable.path:
            variable.assign(rng.normal(0.0, 0.3, variable.shape).astype("float32"))

jobs = json.load(open(sys.argv[1]))
results = {}
for job in jobs:
    x, inputs = features(job["inputs"])
    models = keras_hub.models
    if job["action"] == "save":
        backbone = models.AlbertBackbone(**job["backbone"])
        model = {"backbone": lambda: backbone,
                 "classifier": lambda: models.AlbertTextClassifier(backbone, num_classes=3,
                                                                   preprocessor=None),
                 "masked_lm": lambda: models.AlbertMaskedLM(backbone, preprocessor=None)}[job["kind"]]()
        randomise(model, job["seed"])
        if backbone.embedding_dim == backbone.hidden_dim:
            # What an E == H ALBERT is: no projection (the identity; a real one is refused).
            backbone.embeddings_projection.kernel.assign(np.eye(backbone.hidden_dim))
            backbone.embeddings_projection.bias.assign(np.zeros(backbone.hidden_dim))
        model.save_to_preset(job["dir"])
    elif job["kind"] == "backbone":
        model = models.AlbertBackbone.from_preset(job["dir"])
    elif job["kind"] == "classifier":
        model = models.AlbertTextClassifier.from_preset(job["dir"])
    else:
        model = models.AlbertMaskedLM.from_preset(job["dir"], preprocessor=None)
    backbone = model if job["kind"] == "backbone" else model.backbone
    out = backbone(x)
    result = {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"]}
    if job["kind"] == "classifier":
        result["logits"] = model(x)
    if job["kind"] == "masked_lm":
        result["mlm_logits"] = model({**x, "mask_positions": inputs["masked_lm_positions"]})
    if job.get("tokenizer"):
        tokenizer = models.AlbertTokenizer.from_preset(job["dir"])
        ids = [keras.ops.convert_to_numpy(tokenizer(text)) for text in job["tokenizer"]]
        result["token_ids"] = np.stack([np.pad(row, (0, 64 - len(row)), constant_values=-1)
                                        for row in ids])
    np.savez(job["outputs"], **{k: keras.ops.convert_to_numpy(v) for k, v in result.items()})
assert not any(name == "albert" or name.startswith("albert.") for name in sys.modules), \
    "the keras_hub side imported albert"
'''


def _run_keras_hub_side(tmp_path, jobs):
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps(jobs))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", KERAS_HUB_SIDE, str(spec)], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    return {job["name"]: dict(np.load(job["outputs"])) for job in jobs}


def _randomise(model, seed=3):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "seed_generator" not in variable.path:
            variable.assign(rng.normal(0.0, 0.3, variable.shape).astype("float32"))


# Text the original's preprocessing leaves as it is: lower case, no accents, plain quotes.
PLAIN_TEXT = ["the quick brown fox jumps over the lazy dog .", "a second sentence , with 42 words"]


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory, synthetic_corpus):
    """Our exports of every layout (masked LM, classifier with tokenizer, encoder with tokenizer,
    and an hf directory with spiece.model) and keras_hub's own presets, all run on the keras_hub
    side in one subprocess; returns what each side computed."""
    _, spm = synthetic_corpus
    tmp = tmp_path_factory.mktemp("keras_hub")
    ours, jobs = {}, []
    for index, (layout, overrides) in enumerate(sorted(LAYOUTS.items())):
        config = tiny_config(vocab_size=SPM_VOCABULARY, **overrides)
        inputs = random_inputs(config, batch_size=3, sequence_length=12)
        inputs_file = str(tmp / f"{layout}-inputs.npz")
        np.savez(inputs_file, **inputs)
        models = {"masked_lm": AlbertPretrainer(config),
                  "classifier": AlbertClassifier(config, num_labels=3),
                  "backbone": AlbertEncoder(config)}
        for kind, model in models.items():
            _randomise(model, seed=index)
            name = f"{layout}-{kind}"
            directory = str(tmp / name)
            write_checkpoint(model_weights(model), config, directory, "keras_hub",
                             spm_model_file=None if kind == "masked_lm" else spm)
            ours[name] = (config, model, inputs, directory)
            jobs.append({"name": name, "action": "load", "kind": kind, "dir": directory,
                         "inputs": inputs_file, "outputs": str(tmp / f"{name}-out.npz"),
                         "tokenizer": PLAIN_TEXT if kind == "backbone" else None})
        # The same encoder through Hugging Face's files and keras_hub's transformers converter.
        hf_dir = tmp / f"{layout}-hf"
        write_checkpoint(model_weights(models["backbone"]), config, str(hf_dir), "hf")
        shutil.copyfile(spm, hf_dir / "spiece.model")
        jobs.append({"name": f"{layout}-hf", "action": "load", "kind": "backbone",
                     "dir": str(hf_dir), "inputs": inputs_file,
                     "outputs": str(tmp / f"{layout}-hf-out.npz")})
        ours[f"{layout}-hf"] = (config, models["backbone"], inputs, str(hf_dir))
        # keras_hub's own presets of the same layout.
        backbone = {"vocabulary_size": config.vocab_size, "num_layers": config.num_hidden_layers,
                    "num_heads": config.num_attention_heads,
                    "embedding_dim": config.embedding_size, "hidden_dim": config.hidden_size,
                    "intermediate_dim": config.intermediate_size,
                    "num_groups": config.num_hidden_groups,
                    "num_inner_repetitions": config.inner_group_num,
                    "max_sequence_length": config.max_position_embeddings}
        for kind in ("backbone", "classifier", "masked_lm"):
            name = f"{layout}-theirs-{kind}"
            jobs.append({"name": name, "action": "save", "kind": kind, "backbone": backbone,
                         "seed": 10 + index, "dir": str(tmp / name), "inputs": inputs_file,
                         "outputs": str(tmp / f"{name}-out.npz")})
            ours[name] = (config, None, inputs, str(tmp / name))
    return ours, _run_keras_hub_side(tmp, jobs), spm


def _our_outputs(model, inputs):
    return {key: np.asarray(value) for key, value in model(inputs).items()
            if key in ("sequence_output", "pooled_output", "logits", "mlm_logits")}


def _max_difference(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_keras_hub_computes_our_outputs_from_our_export(both_ways, layout):
    ours, theirs, _ = both_ways
    for kind in ("backbone", "classifier", "masked_lm", "hf"):
        name = f"{layout}-{kind}"
        _, model, inputs, _ = ours[name]
        expected = _our_outputs(model, inputs)
        for key, value in theirs[name].items():
            if key == "token_ids":
                continue
            bound = MLM_OUTPUT_TOLERANCE if key == "mlm_logits" else TOLERANCE
            assert _max_difference(expected[key], value) <= bound, (name, key)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_presets_keras_hub_saved_read_back_give_its_outputs(both_ways, layout):
    ours, theirs, _ = both_ways
    for kind, model_class in (("backbone", AlbertEncoder), ("classifier", AlbertClassifier),
                              ("masked_lm", AlbertPretrainer)):
        name = f"{layout}-theirs-{kind}"
        config, _, inputs, directory = ours[name]
        assert detect_keras_hub(directory)
        weights, read_config = read_checkpoint(
            directory, "auto", head="classifier" if kind == "classifier" else "pretraining")
        assert read_config == config, name
        model = (model_class(config, num_labels=3) if kind == "classifier"
                 else model_class(config))
        if kind == "masked_lm":
            # The masked LM alone: our sentence-order head stays as initialised.
            from albert.tasks.pretraining import _assign
            _assign(model, weights, directory)
        else:
            from albert.checkpoints import assign_model_weights
            assign_model_weights(model, weights, directory)
        expected = _our_outputs(model, inputs)
        for key, value in theirs[name].items():
            bound = MLM_OUTPUT_TOLERANCE if key == "mlm_logits" else TOLERANCE
            assert _max_difference(expected[key], value) <= bound, (name, key)


def test_the_tokenizer_is_the_sentencepiece_model_byte_for_byte_with_the_same_ids(both_ways):
    from albert.tokenization import load_tokenizer

    ours, theirs, spm = both_ways
    directory = ours["one_group-backbone"][3]
    with open(spm, "rb") as original, open(os.path.join(directory, TOKENIZER_VOCABULARY),
                                           "rb") as stored:
        assert stored.read() == original.read()
    tokenizer = load_tokenizer(spm_model_file=spm, do_lower_case=True)
    expected = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in PLAIN_TEXT]
    found = theirs["one_group-backbone"]["token_ids"]
    for row, ids in zip(found, expected):
        assert list(row[row >= 0]) == ids


def test_export_import_export_is_bit_identical(tmp_path):
    import h5py

    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2)
    model = AlbertClassifier(config, num_labels=2)
    _randomise(model)
    first, second = tmp_path / "first", tmp_path / "second"
    write_checkpoint(model_weights(model), config, str(first), "keras_hub")
    weights, read_config = read_checkpoint(str(first), "keras_hub", heads="required",
                                           head="classifier")
    write_checkpoint(weights, read_config, str(second), "keras_hub")
    for name in ("config.json", "task.json"):
        assert (first / name).read_text() == (second / name).read_text()
    for name in ("model.weights.h5", "task.weights.h5"):
        datasets = []
        for directory in (first, second):
            found = {}
            with h5py.File(directory / name, "r") as handle:
                handle.visititems(lambda key, item: found.__setitem__(key, item[()])
                                  if isinstance(item, h5py.Dataset) else None)
            datasets.append(found)
        assert datasets[0].keys() == datasets[1].keys()
        for key in datasets[0]:
            assert datasets[0][key].dtype == datasets[1][key].dtype
            assert datasets[0][key].tobytes() == datasets[1][key].tobytes(), key


@pytest.mark.parametrize("overrides, message", [
    (dict(sharing_strategy="shared_attention", num_hidden_layers=2), "per-layer"),
    (dict(num_hidden_layers=3, num_hidden_groups=2), "divisible"),
    (dict(hidden_act="relu"), "tanh GELU"),
])
def test_models_keras_hub_cannot_hold_are_refused_and_nothing_is_written(tmp_path, overrides,
                                                                         message):
    config = tiny_config(**overrides)
    with pytest.raises(ConfigError, match=message):
        write_checkpoint(model_weights(AlbertEncoder(config)), config, str(tmp_path / "out"),
                         "keras_hub")
    assert not (tmp_path / "out").exists()


def test_heads_keras_hub_has_no_model_for_are_refused(tmp_path):
    from albert.modeling import AlbertSquadV2

    config = tiny_config(num_hidden_layers=2)
    with pytest.raises(ConfigError, match="no ALBERT model with the squad_v2 head"):
        write_checkpoint(model_weights(AlbertSquadV2(config)), config, str(tmp_path / "out"),
                         "keras_hub")
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_for_a_format_that_holds_none_is_refused(tmp_path, synthetic_corpus):
    config = tiny_config(num_hidden_layers=2)
    with pytest.raises(InputError, match="holds no tokenizer"):
        write_checkpoint(model_weights(AlbertEncoder(config)), config, str(tmp_path / "out"),
                         "hf", spm_model_file=synthetic_corpus[1])


def test_an_e_equals_h_preset_with_a_real_projection_is_refused(tmp_path):
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=99, num_layers=2, num_heads=4, embedding_dim=32, hidden_dim=32,
        intermediate_dim=37, max_sequence_length=64)
    backbone.save_to_preset(str(tmp_path))  # a random projection, not the identity
    with pytest.raises(CheckpointMismatchError, match="not the identity"):
        read_weights(str(tmp_path), "keras_hub")


def test_without_keras_hub_the_format_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # `import keras_hub` fails
    config = tiny_config(num_hidden_layers=2)
    with pytest.raises(InputError, match=r'pip install -e "\.\[keras_hub\]"'):
        write_checkpoint(model_weights(AlbertEncoder(config)), config, str(tmp_path / "out"),
                         "keras_hub")
    assert not (tmp_path / "out").exists()
