"""Figure 1: `python -m albert.paper transitions` (each layer's input against its output) and
`criteria --table=1`, on tiny random models and on stand-in transitions files."""

import json
import os

import numpy as np
import pytest

import numpy_reference
from albert.checkpoints import assign_model_weights, model_weights, write_checkpoint
from albert.modeling import AlbertEncoder
from albert.paper.__main__ import main as paper_main
from albert.paper.figure1_criteria import judge, read_runs
from albert.paper.transitions import measure, read_sequences
from albert.tokenization import load_tokenizer
from conftest import tiny_config

MAX_SEQ_LENGTH = 16
CONFIGS = {
    # E < H: layer 0's input is the projection's output.
    "all-shared": dict(embedding_size=16, hidden_size=32),
    # E = H, one group per layer: no projection, the BERT-style model.
    "not-shared": dict(embedding_size=32, hidden_size=32, num_hidden_groups=3),
    # A layer is both blocks of its group.
    "inner groups": dict(embedding_size=16, hidden_size=32, inner_group_num=2),
}
STRATEGIES = ["all-shared", "not-shared"]


@pytest.fixture(scope="module")
def text_file(synthetic_corpus, tmp_path_factory):
    """Lines of many lengths (some cut at MAX_SEQ_LENGTH), blank lines among them."""
    corpus, _ = synthetic_corpus
    with open(corpus, encoding="utf-8") as handle:
        lines = [" ".join(line.split()[:words]) for words, line in zip(
            (1, 2, 3, 4, 5, 6, 8, 10, 30, 30, 30),
            [line for line in handle.read().split("\n") if line])]
    path = tmp_path_factory.mktemp("text") / "heldout.txt"
    path.write_text("\n".join(lines[:5] + ["", "   "] + lines[5:] + ["Short."]) + "\n",
                    encoding="utf-8")
    return str(path)


def _encoder(strategy, seed=0):
    config = tiny_config(vocab_size=1200, num_hidden_layers=3, **CONFIGS[strategy])
    encoder = AlbertEncoder(config)
    # Non-trivial LayerNorm and bias values, so every variable matters.
    rng = np.random.default_rng(seed)
    for variable in encoder.weights:
        if any(part in variable.path for part in ("gamma", "beta", "bias")):
            variable.assign(rng.normal(0.5, 0.2, variable.shape).astype("float32"))
    return encoder


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{strategy: (TF1 checkpoint directory, Hugging Face directory, weights, config)}."""
    written = {}
    for strategy in CONFIGS:
        encoder = _encoder(strategy)
        weights, config = model_weights(encoder), encoder.albert_config
        root = tmp_path_factory.mktemp(strategy)
        write_checkpoint(weights, config, str(root / "tf1"), "tf1")
        write_checkpoint(weights, config, str(root / "hf"), "hf")
        written[strategy] = (str(root / "tf1"), str(root / "hf"), weights, config)
    return written


def _reference(weights, config, sequences):
    """Per layer, the mean over every token of each sequence (run alone, no padding) of the
    L2 distance and angle between the layer's input and output, from the NumPy transcription
    of the original forward pass."""
    floats = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    distances, angles = [], []
    for sequence in sequences:
        ids = np.asarray([sequence])
        mask, type_ids = np.ones_like(ids), np.zeros_like(ids)
        embedding = numpy_reference.layer_norm(
            floats["bert/embeddings/word_embeddings"][ids]
            + floats["bert/embeddings/token_type_embeddings"][type_ids]
            + floats["bert/embeddings/position_embeddings"][:ids.shape[1]][None],
            floats, "bert/embeddings/LayerNorm")
        if config.embedding_size != config.hidden_size:
            embedding = numpy_reference.dense(embedding, floats,
                                              "bert/encoder/embedding_hidden_mapping_in")
        blocks = numpy_reference.encoder(weights, config, ids, mask, type_ids)["encoder_outputs"]
        inner = config.inner_group_num
        states = [embedding, *blocks[inner - 1::inner]]
        for before, after in zip(states[:-1], states[1:]):
            before, after = before[0], after[0]
            distances.append(np.sqrt(((after - before) ** 2).sum(-1)))
            cosine = (before * after).sum(-1) / np.sqrt((before ** 2).sum(-1)
                                                         * (after ** 2).sum(-1))
            angles.append(np.degrees(np.arccos(cosine)))
    layers = config.num_hidden_layers
    # distances[s * L + l]: sequence s, layer l.
    return ([np.concatenate(distances[layer::layers]).mean() for layer in range(layers)],
            [np.concatenate(angles[layer::layers]).mean() for layer in range(layers)])


def _run(directory, checkpoint, label, name, *extra):
    os.makedirs(directory, exist_ok=True)
    output = os.path.join(directory, f"{name}.json")
    code = paper_main(["transitions", f"--checkpoint={checkpoint}", *extra,
                       f"--label={label}", f"--output={output}"])
    assert code == 0
    with open(output, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.mark.parametrize("strategy", list(CONFIGS))
def test_transitions_equal_a_direct_computation_and_ignore_padding(
        strategy, checkpoints, text_file, synthetic_corpus, tmp_path):
    tf1, _, weights, config = checkpoints[strategy]
    spm = synthetic_corpus[1]
    sequences = read_sequences(text_file, load_tokenizer(spm_model_file=spm), MAX_SEQ_LENGTH)
    assert len(sequences) == 12 and max(map(len, sequences)) == MAX_SEQ_LENGTH
    assert len(set(map(len, sequences))) > 3   # batches of several sequences hold padding
    distances, angles = _reference(weights, config, sequences)

    found = _run(tmp_path, tf1, f"{strategy}, seed 1", "padded", f"--input_file={text_file}",
                 f"--albert_config_file={os.path.join(tf1, 'albert_config.json')}",
                 f"--spm_model_file={spm}", f"--max_seq_length={MAX_SEQ_LENGTH}",
                 "--batch_size=5")
    assert found["config"]["sharing"] == {"inner groups": "3 layers in 1 group of 2 inner "
                                                           "groups"}.get(strategy, strategy)
    assert found["checkpoint_format"] == "tf1"
    assert found["sequences"] == 12 and found["tokens"] == sum(map(len, sequences))
    assert [entry["layer"] for entry in found["layers"]] == [0, 1, 2]
    np.testing.assert_allclose([entry["l2_distance"] for entry in found["layers"]], distances,
                               rtol=1e-5)
    np.testing.assert_allclose([entry["angle_degrees"] for entry in found["layers"]], angles,
                               rtol=1e-5)
    assert found["roughness"]["angle_degrees"] == pytest.approx(
        abs(angles[1] - angles[0]) + abs(angles[2] - angles[1]), rel=1e-5)
    assert found["roughness"]["l2_distance"] == pytest.approx(
        abs(distances[1] - distances[0]) + abs(distances[2] - distances[1]), rel=1e-5)


def test_padding_does_not_count(checkpoints, text_file, synthetic_corpus):
    """Every sequence alone (no padding) against all twelve in one padded batch."""
    _, _, weights, config = checkpoints["all-shared"]
    encoder = AlbertEncoder(config)
    assign_model_weights(encoder, weights)
    sequences = read_sequences(text_file, load_tokenizer(spm_model_file=synthetic_corpus[1]),
                               MAX_SEQ_LENGTH)
    alone, padded = measure(encoder, sequences, 1), measure(encoder, sequences, len(sequences))
    assert alone.tokens == padded.tokens < len(sequences) * MAX_SEQ_LENGTH
    np.testing.assert_allclose(padded.l2_distance, alone.l2_distance, rtol=1e-5)
    np.testing.assert_allclose(padded.angle_degrees, alone.angle_degrees, rtol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_hugging_face_copy_gives_the_same_numbers(strategy, checkpoints, text_file,
                                                    synthetic_corpus, tmp_path):
    tf1, hf, _, _ = checkpoints[strategy]
    flags = [f"--input_file={text_file}", f"--spm_model_file={synthetic_corpus[1]}",
             f"--max_seq_length={MAX_SEQ_LENGTH}"]
    original = _run(tmp_path / "figure", tf1, f"{strategy}, seed 1", "tf1",
                    f"--albert_config_file={os.path.join(tf1, 'albert_config.json')}", *flags)
    # The Hugging Face directory carries its config.
    converted = _run(tmp_path / "hf", hf, f"{strategy}, seed 1", "hf", *flags)
    assert converted["checkpoint_format"] == "hf"
    for metric in ("l2_distance", "angle_degrees"):
        np.testing.assert_allclose([entry[metric] for entry in converted["layers"]],
                                   [entry[metric] for entry in original["layers"]], atol=1e-5)
    # What `criteria --table=1` reads: a real output, the only run yet, is a partial judgement.
    result = judge(read_runs(str(tmp_path / "figure"), []))
    assert not result["complete"] and list(result["runs"]) == [f"{strategy}, seed 1"]


# ------------------------------------------------------------------ the criteria
SMOOTH = {"l2_distance": [9.0, 8.5, 8.2, 8.0], "angle_degrees": [40.0, 38.0, 37.0, 36.5]}
ROUGH = {"l2_distance": [12.0, 4.0, 10.0, 3.0], "angle_degrees": [60.0, 20.0, 45.0, 10.0]}


def _stand_in(directory, label, curves, sharing=None, name=None):
    strategy = "all-shared" if "all-shared" in label else "not-shared"
    run = {"label": label, "config": {"sharing": sharing or strategy, "num_hidden_layers": 4},
           "input_file": "heldout.txt", "input_sha256": "0" * 64, "max_seq_length": 64,
           "tokens": 1000, "checkpoint": f"{label}/model.ckpt-6000",
           "layers": [{"layer": layer, "l2_distance": distance, "angle_degrees": angle}
                      for layer, (distance, angle) in enumerate(zip(curves["l2_distance"],
                                                                     curves["angle_degrees"]))]}
    path = os.path.join(directory, name or label.replace(", ", "-").replace(" ", "") + ".json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(run, handle)
    return path


def _write_pairs(directory, all_shared, not_shared, seeds=(1, 2, 3)):
    for seed in seeds:
        _stand_in(directory, f"all-shared, seed {seed}",
                  all_shared(seed) if callable(all_shared) else all_shared)
        _stand_in(directory, f"not-shared, seed {seed}",
                  not_shared(seed) if callable(not_shared) else not_shared)


def _criteria(directory, output=None, plot=None):
    output = output or os.path.join(directory, "criteria.json")
    code = paper_main(["criteria", "--table=1", f"--figure_dir={directory}",
                       f"--output={output}", *([f"--plot={plot}"] if plot else [])])
    with open(output, encoding="utf-8") as handle:
        return code, json.load(handle)


def test_smooth_all_shared_against_rough_not_shared_passes(tmp_path, capsys):
    _write_pairs(str(tmp_path), SMOOTH, ROUGH)
    plot = str(tmp_path / "figure1.png")
    code, result = _criteria(str(tmp_path), plot=plot)
    assert code == 0 and result["complete"]
    assert result["criteria"]["a"]["passes"] is True
    assert result["criteria"]["b"]["passes"] is True
    seed = result["criteria"]["a"]["seeds"]["2"]
    assert seed["angle_degrees"]["all-shared"] == pytest.approx(3.5)
    assert seed["angle_degrees"]["not-shared"] == pytest.approx(40 + 25 + 35)
    run = result["runs"]["all-shared, seed 3"]
    assert run["mean_over_layers"]["l2_distance"] == pytest.approx(np.mean(SMOOTH["l2_distance"]))
    assert os.path.getsize(plot) > 0
    assert os.path.exists(tmp_path / "criteria.md")
    assert "| (a) | all-shared's transitions are smoother" in capsys.readouterr().out


def test_the_reverse_fails_and_one_seed_suffices_to_fail(tmp_path):
    reverse = str(tmp_path / "reverse")
    os.makedirs(reverse)
    _write_pairs(reverse, ROUGH, SMOOTH)
    assert _criteria(reverse)[1]["criteria"]["a"]["passes"] is False
    # Smoother in two seeds and in the L2 distance of the third, not in its angle.
    one_off = str(tmp_path / "one-off")
    os.makedirs(one_off)
    rough_angle = {"l2_distance": SMOOTH["l2_distance"], "angle_degrees": ROUGH["angle_degrees"]}
    _write_pairs(one_off, lambda seed: rough_angle if seed == 3 else SMOOTH, ROUGH)
    result = _criteria(one_off)[1]["criteria"]["a"]
    assert result["passes"] is False
    assert result["seeds"]["3"]["l2_distance"]["all_shared_smoother"] is True
    assert result["seeds"]["3"]["angle_degrees"]["all_shared_smoother"] is False


def test_an_angle_below_one_degree_fails_b(tmp_path):
    vanishing = {"l2_distance": SMOOTH["l2_distance"], "angle_degrees": [1.5, 1.2, 0.9, 1.1]}
    _write_pairs(str(tmp_path), lambda seed: vanishing if seed == 2 else SMOOTH, ROUGH)
    code, result = _criteria(str(tmp_path))
    assert code == 0
    assert result["criteria"]["a"]["passes"] is True
    entry = result["criteria"]["b"]
    assert entry["passes"] is False
    assert entry["seeds"]["2"] == {"min_angle_degrees": 0.9, "at_layer": 2,
                                   "above_threshold": False}


def test_a_missing_seed_is_not_yet_judged_and_its_files_are_replaced(tmp_path, capsys):
    directory = str(tmp_path)
    _write_pairs(directory, SMOOTH, ROUGH, seeds=(1, 2))
    _stand_in(directory, "all-shared, seed 3", SMOOTH)
    plot = str(tmp_path / "figure1.png")
    code, result = _criteria(directory, plot=plot)
    assert code == 0 and not result["complete"]
    assert result["missing_runs"] == ["not-shared, seed 3"]
    for key in ("a", "b"):
        entry = result["criteria"][key]
        assert entry["status"] == "not yet judged" and entry["passes"] is None
    assert set(result["criteria"]["a"]["provisional"]["seeds"]) == {"1", "2"}
    assert set(result["criteria"]["b"]["provisional"]["seeds"]) == {"1", "2", "3"}
    assert "**Partial**" in capsys.readouterr().out
    # The last run arrives: the partial files are replaced by the complete judgement, which is
    # then never overwritten.
    _stand_in(directory, "not-shared, seed 3", ROUGH)
    code, result = _criteria(directory, plot=plot)
    assert code == 0 and result["complete"] and result["criteria"]["a"]["passes"] is True
    capsys.readouterr()
    assert paper_main(["criteria", "--table=1", f"--figure_dir={directory}",
                       f"--output={directory}/criteria.json", f"--plot={plot}"]) == 1
    assert "complete judgement" in capsys.readouterr().err


@pytest.mark.parametrize("stranger, message", [
    ("notes.txt", "holds notes.txt"),
    ("label", "is not a run of Figure 1's criteria"),
    ("seed", "seed 4 was not pre-registered"),
    ("sharing", "labelled all-shared but its config is not-shared"),
    ("twice", "one run per strategy and seed"),
])
def test_anything_else_in_the_directory_is_an_error(stranger, message, tmp_path, capsys):
    directory = str(tmp_path)
    _write_pairs(directory, SMOOTH, ROUGH, seeds=(1,))
    if stranger == "notes.txt":
        (tmp_path / "notes.txt").write_text("x")
    elif stranger == "label":
        _stand_in(directory, "shared-FFN, seed 1", SMOOTH)
    elif stranger == "seed":
        _stand_in(directory, "all-shared, seed 4", SMOOTH)
    elif stranger == "sharing":
        _stand_in(directory, "all-shared, seed 2", SMOOTH, sharing="not-shared")
    else:
        _stand_in(directory, "E=768, strategy=all-shared, seed 1", SMOOTH, name="again.json")
    assert paper_main(["criteria", "--table=1", f"--figure_dir={directory}",
                       f"--output={directory}/criteria.json"]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("ERROR: ") and message in error[0]
    assert not os.path.exists(tmp_path / "criteria.json")


# ------------------------------------------------------------------ CLI errors
def _error(capsys, *argv):
    capsys.readouterr()
    assert paper_main(list(argv)) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), captured.err
    return lines[0]


def test_a_missing_input_file_or_an_existing_output_is_one_error_line(
        checkpoints, text_file, synthetic_corpus, tmp_path, capsys):
    tf1 = checkpoints["all-shared"][0]
    flags = [f"--checkpoint={tf1}", f"--spm_model_file={synthetic_corpus[1]}", "--label=x",
             f"--albert_config_file={os.path.join(tf1, 'albert_config.json')}"]
    missing = str(tmp_path / "absent.txt")
    assert "--input_file=" in _error(capsys, "transitions", *flags, f"--input_file={missing}",
                                     f"--output={tmp_path / 'out.json'}")
    assert not os.path.exists(tmp_path / "out.json")
    existing = tmp_path / "existing.json"
    existing.write_text("{}")
    assert "exists" in _error(capsys, "transitions", *flags, f"--input_file={text_file}",
                              f"--output={existing}")
    assert existing.read_text() == "{}"
    assert "No checkpoint" in _error(capsys, "transitions", f"--checkpoint={tmp_path / 'none'}",
                                     f"--spm_model_file={synthetic_corpus[1]}", "--label=x",
                                     f"--input_file={text_file}",
                                     f"--output={tmp_path / 'out.json'}")
