"""--restarts=N: seeds in <output_dir>/seed-<s>/, resumable after a kill, the best predicts."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from glue_fixtures import classifier_command, write_learnable_sst2
from scripts import assert_clean_failure, run_script


def _command(tmp_path, spm, out, **overrides):
    """Three seeds of 24 steps, a checkpoint (and evaluation) every 4, predictions."""
    values = dict(train_step=24, save_checkpoints_steps=4, warmup_step=None, do_predict=True,
                  random_seed=7, restarts=3)
    return classifier_command(tmp_path, spm, out, **dict(values, **overrides))


def checkpoint_listed(run_dir, step):
    """True once model.ckpt-<step> is listed in the run's `checkpoint` state file: the moment
    a resumed run can see it. Its .index file appears a little earlier, and a kill between the
    two leaves a checkpoint that the resumed run rightly ignores."""
    state = run_dir / "checkpoint"
    return state.exists() and f'"model.ckpt-{step}"' in state.read_text()


def _kill_when(args, ready, timeout=300):
    """Runs `python args` until `ready()`, then kills it outright (SIGKILL)."""
    process = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None and not ready():
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()


@pytest.mark.slow  # ~45-65 s on 2 cores: kept out of the 15-minute default suite
def test_restarts_resume_after_a_kill_in_the_second_seed_and_predict_with_the_best(
        tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    write_learnable_sst2(tmp_path / "glue")
    out = tmp_path / "out"
    args = _command(tmp_path, spm, out)
    _kill_when(args, lambda: checkpoint_listed(out / "seed-8", 8))
    assert json.loads((out / "seed-7" / "eval_results.json").read_text())["best"]
    assert not (out / "seed-8" / "model.ckpt-24.index").exists(), "seed 8 was not interrupted"
    assert not (out / "seed-9").exists() and not (out / "restarts.json").exists()
    first_log = (out / "seed-7" / "train_log.jsonl").read_text()

    resumed = run_script(*args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resumed from {out}/seed-8/model.ckpt-" in resumed.stderr
    assert "Already trained to step 24" in resumed.stderr   # seed 7 is reused, not retrained
    assert (out / "seed-7" / "train_log.jsonl").read_text() == first_log

    summary = json.loads((out / "restarts.json").read_text())
    assert summary["metric"] == "eval_accuracy"
    assert [s["seed"] for s in summary["seeds"]] == [7, 8, 9]
    for seed in summary["seeds"]:
        journal = json.loads((out / f"seed-{seed['seed']}" / "eval_results.json").read_text())
        assert len(journal["evaluations"]) == 6   # every checkpoint evaluated once
        assert (seed["step"], seed["eval_accuracy"]) == (journal["best"]["step"],
                                                         journal["best"]["eval_accuracy"])
    values = [s["eval_accuracy"] for s in summary["seeds"]]
    assert summary["best"]["eval_accuracy"] == max(values)
    assert abs(summary["mean"] - sum(values) / 3) < 1e-12
    assert "Restarts: best dev eval_accuracy of each seed" in resumed.stderr
    best_dir = out / f"seed-{summary['best']['seed']}"
    assert f"Predicting with {best_dir}/model.ckpt-best" in resumed.stderr
    for seed in (7, 8, 9):   # the seeds train and evaluate; only <output_dir> predicts
        assert not (out / f"seed-{seed}" / "test_results.tsv").exists()

    # The predictions are those of a predict-only run from the best seed's model.ckpt-best.
    alone = run_script(*_command(tmp_path, spm, tmp_path / "alone", restarts=None,
                                 do_train=False, do_eval=False,
                                 init_checkpoint=best_dir / "model.ckpt-best"))
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert (out / "test_results.tsv").read_text() == \
        (tmp_path / "alone" / "test_results.tsv").read_text()


# Slow tier (about 32 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_restarts_need_dev_evaluation_and_their_own_directory(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    write_learnable_sst2(tmp_path / "glue")
    refused = run_script(*_command(tmp_path, spm, tmp_path / "out", do_eval=False))
    assert_clean_failure(refused, "--restarts picks the best seed on dev")
    assert not (tmp_path / "out").exists()
    single = run_script(*_command(tmp_path, spm, tmp_path / "single", restarts=None,
                                  train_step=4, do_predict=False))
    assert single.returncode == 0, single.stderr[-3000:]
    refused = run_script(*_command(tmp_path, spm, tmp_path / "single"))
    assert_clean_failure(refused, "holds a run without --restarts")
    assert not (tmp_path / "single" / "seed-7").exists()


# Slow tier (about 30 s a script on 2 cores), to keep the default suite within 15 minutes;
# test_finetuning_scripts.py's preset restarts keep --restarts in the default suite.
@pytest.mark.slow
@pytest.mark.parametrize("script", ["run_race.py", "run_squad.py"])
def test_restarts_of_race_and_squad_predict_from_the_best_seed(tmp_path, synthetic_corpus,
                                                               script):
    from test_finetuning_scripts import _command as script_command

    _, spm = synthetic_corpus
    extra = {"do_eval": True} if script == "run_race.py" else {}
    result = run_script(*script_command(script, tmp_path, spm, restarts=2, random_seed=3,
                                        **extra))
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "out"
    summary = json.loads((out / "restarts.json").read_text())
    assert [s["seed"] for s in summary["seeds"]] == [3, 4]
    assert summary["metric"] == ("eval_accuracy" if script == "run_race.py" else "f1")
    best_dir = out / f"seed-{summary['best']['seed']}"
    assert f"Predicting with {best_dir}/model.ckpt-best" in result.stderr
    predictions = "predictions.tsv" if script == "run_race.py" else "predictions.json"
    assert (out / predictions).exists()
    if script == "run_squad.py":
        # Every seed decodes its own checkpoints; the final predictions are the best seed's.
        assert (out / predictions).read_text() == (best_dir / predictions).read_text()
