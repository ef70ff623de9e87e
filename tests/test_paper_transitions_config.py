"""`python -m albert.paper transitions` on a training run's checkpoints: the config it finds
beside them, and the step it measured when given a directory."""

import os

import pytest

from albert.checkpoints import model_weights, write_checkpoint
from albert.checkpoints.tf1 import write_tf1
from albert.paper.figure1_criteria import judge, read_runs
from test_paper_transitions import MAX_SEQ_LENGTH, _encoder, _error, _run
from test_paper_transitions import text_file  # noqa: F401 - a fixture, used by name

STEPS = (3000, 6000)


@pytest.fixture(scope="module")
def run_directory(tmp_path_factory):
    """runs/<run>/albert_config.json beside runs/<run>/pretraining/model.ckpt-{3000,6000} (a
    different model at each step), as a reproduction lays out a run; the checkpoint state file
    names 6000 as the latest."""
    run = tmp_path_factory.mktemp("runs") / "all-shared-seed1"
    pretraining = run / "pretraining"
    os.makedirs(pretraining)
    for seed, step in enumerate(STEPS):
        encoder = _encoder("all-shared", seed=seed)
        write_tf1(model_weights(encoder), str(pretraining / f"model.ckpt-{step}"), step)
    (run / "albert_config.json").write_text(encoder.albert_config.to_json_string(),
                                            encoding="utf-8")
    (pretraining / "checkpoint").write_text(
        f'model_checkpoint_path: "model.ckpt-{STEPS[-1]}"\n' + "".join(
            f'all_model_checkpoint_paths: "model.ckpt-{step}"\n' for step in STEPS),
        encoding="utf-8")
    return run


def _flags(text_file, synthetic_corpus):
    return [f"--input_file={text_file}", f"--spm_model_file={synthetic_corpus[1]}",
            f"--max_seq_length={MAX_SEQ_LENGTH}"]


def test_a_runs_pretraining_directory_uses_the_runs_config_and_says_which_step(
        run_directory, text_file, synthetic_corpus, tmp_path, capsys):
    pretraining = str(run_directory / "pretraining")
    config_file = str(run_directory / "albert_config.json")
    flags = _flags(text_file, synthetic_corpus)
    found = _run(tmp_path / "figure", pretraining, "all-shared, seed 1", "directory", *flags)
    shown = capsys.readouterr().out
    latest = os.path.join(pretraining, "model.ckpt-6000")
    assert f"{latest} (step 6000, tf1; config: {config_file})" in shown
    assert found["checkpoint"] == pretraining   # as given, as before
    assert found["checkpoint_prefix"] == latest
    assert found["checkpoint_step"] == 6000
    assert found["albert_config_file"] == config_file
    # The latest checkpoint was measured: the same numbers as naming it and its config.
    named = _run(tmp_path / "named", latest, "all-shared, seed 1", "named", *flags,
                 f"--albert_config_file={config_file}")
    earlier = _run(tmp_path / "earlier", os.path.join(pretraining, "model.ckpt-3000"),
                   "all-shared, seed 1", "earlier", *flags)
    assert named["layers"] == found["layers"] != earlier["layers"]
    assert earlier["checkpoint_step"] == 3000 and earlier["albert_config_file"] == config_file
    assert named["checkpoint"] == latest and named["albert_config_file"] == config_file
    # What `criteria --table=1` reads still reads it.
    result = judge(read_runs(str(tmp_path / "figure"), []))
    assert result["runs"]["all-shared, seed 1"]["checkpoint"] == pretraining


def test_a_config_in_the_checkpoints_own_directory_is_used(text_file, synthetic_corpus,
                                                           tmp_path, capsys):
    """A converted or released checkpoint: model.ckpt-best with albert_config.json beside it."""
    encoder = _encoder("all-shared")
    directory = str(tmp_path / "tf1")
    write_checkpoint(model_weights(encoder), encoder.albert_config, directory, "tf1")
    found = _run(tmp_path / "out", directory, "all-shared, seed 1", "tf1",
                 *_flags(text_file, synthetic_corpus))
    assert found["albert_config_file"] == os.path.join(directory, "albert_config.json")
    assert found["checkpoint_prefix"] == os.path.join(directory, "model.ckpt-best")
    assert found["checkpoint_step"] is None
    assert "config: " + os.path.join(directory, "albert_config.json") in capsys.readouterr().out


def test_no_config_anywhere_is_one_error_line_naming_where_it_looked(
        text_file, synthetic_corpus, tmp_path, capsys):
    lone = tmp_path / "pretraining"
    os.makedirs(lone)
    encoder = _encoder("all-shared")
    write_tf1(model_weights(encoder), str(lone / "model.ckpt-10"), 10)
    line = _error(capsys, "transitions", f"--checkpoint={lone}", "--label=x",
                  f"--output={tmp_path / 'out.json'}", *_flags(text_file, synthetic_corpus))
    assert "carries no config" in line and "pass --albert_config_file" in line
    assert str(lone / "albert_config.json") in line and str(tmp_path / "albert_config.json") in line
    assert not os.path.exists(tmp_path / "out.json")
