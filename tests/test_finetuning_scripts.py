"""What every fine-tuning script promises, checked on each of them in turn.

run_classifier.py, run_race.py and run_squad.py (with run_squad_v1.py and
run_squad_v2.py) share their start-up: a user mistake ends with one `ERROR:`
line and a non-zero exit before anything is written, and a run into a
directory never changes what an earlier run wrote there.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import tiny_config
from glue_fixtures import write_glue
from race_fixtures import write_race
from scripts import assert_clean_failure, run_script
from squad_fixtures import write_squad

SCRIPTS = ("run_classifier.py", "run_race.py", "run_squad.py")
LOCKS = (".train.lock", ".eval.lock")


def _command(script, tmp_path, spm, vocab_size=1200, **overrides):
    """A tiny, fast run of `script` (4 steps, one checkpoint) into tmp_path/out."""
    config_file = tmp_path / f"config-{vocab_size}.json"
    config_file.write_text(tiny_config(vocab_size=vocab_size, max_position_embeddings=64)
                           .to_json_string())
    values = {"albert_config_file": config_file, "spm_model_file": spm,
              "output_dir": tmp_path / "out", "max_seq_length": 32, "train_batch_size": 4,
              "progress": False}
    if script == "run_classifier.py":
        values.update(task_name="SST-2", data_dir=write_glue(str(tmp_path / "glue")),
                      do_train=True, do_eval=True, do_predict=True, train_step=4,
                      save_checkpoints_steps=4)
    elif script == "run_race.py":
        values.update(data_dir=write_race(str(tmp_path / "race")), max_qa_length=8,
                      do_predict=True, train_step=4, save_checkpoints_steps=4)
    else:
        data = tmp_path / "squad"
        values.update(train_file=write_squad(str(data / "train.json")),
                      predict_file=write_squad(str(data / "dev.json"), for_training=False),
                      do_train=True, do_predict=True, num_train_epochs=1, max_seq_length=64,
                      doc_stride=24, max_query_length=16)
    values.update(overrides)
    return [script, *(f"--{key}" if value is True else f"--no{key}" if value is False
                      else f"--{key}={value}" for key, value in values.items()
                      if value is not None)]


def _contents(directory):
    """{relative path: bytes} of every file under `directory` (locks aside: a run holds them)."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            if name not in LOCKS:
                path = os.path.join(root, name)
                with open(path, "rb") as handle:
                    found[os.path.relpath(path, directory)] = handle.read()
    return found


def _dead_pid():
    """The pid of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# ------------------------------------------------------------ point 1 (+ 7, 9)
# run_race.py's and run_squad.py's runs are in the slow tier (18 s each on 2 cores), to keep
# the default suite within 15 minutes.
@pytest.mark.parametrize("script", [SCRIPTS[0], *(pytest.param(script, marks=pytest.mark.slow)
                                                  for script in SCRIPTS[1:])])
def test_a_rerun_with_other_settings_is_refused_and_changes_nothing(tmp_path, synthetic_corpus,
                                                                   script):
    _, spm = synthetic_corpus
    out = tmp_path / "out"
    out.mkdir()
    # What runs killed outright left behind: removed, unless its writer still runs.
    cache = {"run_classifier.py": "sst-2_train.tf_record", "run_race.py": "race_train.tf_record",
             "run_squad.py": "train.tf_record"}[script]
    stale = out / f".{cache}.tmp-{_dead_pid()}-0123abcd"
    live = out / f".{cache}.tmp-{os.getpid()}-4567cdef"
    stale.write_bytes(b"half a file")
    live.write_bytes(b"being written")
    made = run_script(*_command(script, tmp_path, spm))
    assert made.returncode == 0, made.stderr[-3000:]
    assert not stale.exists() and live.read_bytes() == b"being written"
    settings = json.loads((out / "run_settings.json").read_text())
    assert settings["max_seq_length"] == (64 if script == "run_squad.py" else 32)
    before = _contents(out)

    longer = 48 if script != "run_squad.py" else 56
    refused = run_script(*_command(script, tmp_path, spm, max_seq_length=longer))
    assert_clean_failure(refused, "holds a run with another run_settings.json",
                         f"max_seq_length: {settings['max_seq_length']} there, {longer} here")
    assert "Traceback" not in refused.stderr and refused.stderr.count("ERROR:") == 1
    assert _contents(out) == before

    if script == "run_squad.py":
        return
    # --do_eval in the finished directory says what the journal holds (point 9); an export
    # says what it exports.
    journal = json.loads((out / "eval_results.json").read_text())
    again = run_script(*_command(script, tmp_path, spm, do_train=False, do_predict=False,
                                 **({"export_dir": tmp_path / "exported"}
                                    if script == "run_classifier.py" else {})))
    assert again.returncode == 0, again.stderr[-3000:]
    metric = "eval_accuracy"
    assert (f"the best is step {journal['best']['step']} with {metric} = "
            f"{journal['best'][metric]:.4f}") in again.stderr
    if script == "run_classifier.py":
        assert "Exporting with" in again.stderr and "Predicting with" not in again.stderr
    assert _contents(out) == before


# run_race.py's run is in the slow tier (18 s on 2 cores), to keep the default suite within
# 15 minutes.
@pytest.mark.parametrize("script", ["run_classifier.py",
                                    pytest.param("run_race.py", marks=pytest.mark.slow)])
def test_a_predict_only_run_records_its_settings(tmp_path, synthetic_corpus, script):
    """A run that only predicts (from a fine-tuned checkpoint) is protected like a trained one."""
    _, spm = synthetic_corpus
    made = run_script(*_command(script, tmp_path, spm, train_step=4))
    assert made.returncode == 0, made.stderr[-3000:]
    checkpoint = tmp_path / "out" / "model.ckpt-best"
    predict_only = dict(do_train=False, do_eval=False, init_checkpoint=checkpoint,
                        output_dir=tmp_path / "predicted")
    first = run_script(*_command(script, tmp_path, spm, **predict_only))
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "predicted" / "run_settings.json").exists()
    before = _contents(tmp_path / "predicted")
    other = dict(max_qa_length=6) if script == "run_race.py" else dict(do_lower_case=False)
    refused = run_script(*_command(script, tmp_path, spm, **predict_only, **other))
    assert_clean_failure(refused, "holds a run with another run_settings.json")
    assert _contents(tmp_path / "predicted") == before


# ---------------------------------------------------------------------- point 3
@pytest.mark.parametrize("script", [*SCRIPTS, "run_squad_v2.py"])
def test_a_config_smaller_than_the_vocabulary_is_refused_before_writing(tmp_path,
                                                                       synthetic_corpus, script):
    _, spm = synthetic_corpus
    result = run_script(*_command(script, tmp_path, spm, vocab_size=1000))
    assert_clean_failure(result, "has 1200 pieces, more than the config's vocab_size=1000")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- point 7
@pytest.mark.parametrize("script, flags, message", [
    ("run_classifier.py", {"train_batch_size": 0}, "--train_batch_size must be at least 1"),
    ("run_classifier.py", {"eval_batch_size": 0}, "--eval_batch_size must be at least 1"),
    ("run_classifier.py", {"save_checkpoints_steps": 0},
     "--save_checkpoints_steps must be at least 1"),
    ("run_race.py", {"eval_batch_size": 0}, "--eval_batch_size must be at least 1"),
    ("run_race.py", {"predict_batch_size": 0}, "--predict_batch_size must be at least 1"),
    ("run_squad.py", {"save_checkpoints_steps": 0}, "--save_checkpoints_steps must be at least 1"),
    ("run_classifier.py", {"task_name": "mismnli", "do_train": False, "do_predict": False,
                           "init_checkpoint": "INIT"}, "No checkpoint to evaluate in"),
    ("run_race.py", {"do_train": False, "init_checkpoint": "INIT"},
     "No checkpoint to evaluate in"),
    ("run_race.py", {"do_train": False, "do_eval": False}, "Nothing to predict with"),
    ("run_classifier.py", {"do_eval": False}, "only --do_eval makes it: add --do_eval"),
    ("run_classifier.py", {"do_eval": False, "do_predict": False, "export_dir": "EXPORT"},
     "only --do_eval makes it: add --do_eval"),
    ("run_race.py", {"do_eval": False}, "only --do_eval makes it: add --do_eval"),
    ("run_squad_v1.py", {"version_2_with_negative": True},
     "run_squad_v1.py runs SQuAD v1.1: --version_2_with_negative contradicts it"),
    ("run_squad_v2.py", {"version_2_with_negative": False},
     "run_squad_v2.py runs SQuAD v2.0: --noversion_2_with_negative contradicts it"),
])
def test_a_mistake_found_late_before_is_now_found_before_writing(tmp_path, synthetic_corpus,
                                                                script, flags, message):
    _, spm = synthetic_corpus
    if flags.get("init_checkpoint") == "INIT":
        flags["init_checkpoint"] = _pretrained(tmp_path)
    if flags.get("export_dir") == "EXPORT":
        flags["export_dir"] = tmp_path / "out" / "export"
    result = run_script(*_command(script, tmp_path, spm, **flags))
    assert_clean_failure(result, message)
    assert not (tmp_path / "out").exists()


def _pretrained(tmp_path):
    """A pretraining-style checkpoint (encoder only) of the tests' tiny config."""
    from albert.checkpoints import write_checkpoint
    from albert.checkpoints.weights import model_weights
    from albert.modeling import AlbertEncoder

    config = tiny_config(vocab_size=1200, max_position_embeddings=64)
    encoder = AlbertEncoder(config)
    encoder({"input_word_ids": np.zeros((1, 4), "int32")})   # builds the variables
    write_checkpoint(model_weights(encoder), config, str(tmp_path / "pretrained"), "tf1")
    return tmp_path / "pretrained" / "model.ckpt-best"


# ---------------------------------------------------------------------- point 8
@pytest.mark.parametrize("script", [*SCRIPTS, "run_squad_v1.py", "run_squad_v2.py",
                                    "run_pretraining.py"])
def test_help_lists_the_shared_flags(script):
    shown = run_script(script, "--help")
    shared = ("strategy", "cpu_devices", "mixed_precision", "random_seed",
              "gradient_accumulation_steps", "rematerialize", "allow_unknown_config_keys")
    if script != "run_pretraining.py":
        shared += ("init_encoder_only", "use_tpu", "tpu_name", "num_tpu_cores",
                   "iterations_per_loop", "digit_comma_rule")
    for flag in shared:
        assert f"--{flag}:" in shown.stdout or f"--[no]{flag}:" in shown.stdout, (script, flag)
    if script.startswith("run_squad_v"):
        fixed = "true" if script == "run_squad_v2.py" else "false"
        full = run_script(script, "--helpfull").stdout
        entry = full[full.index("--[no]version_2_with_negative"):].split("\n  --")[0]
        assert f"Fixed to {fixed}" in entry and f"(default: '{fixed}')" in entry


@pytest.mark.parametrize("command", [["convert_checkpoint.py"], ["-m", "albert.export"]])
def test_help_of_the_converters_lists_the_config_flag(command):
    assert "--[no]allow_unknown_config_keys:" in run_script(*command, "--help").stdout


# ---------------------------------------------------------------------- point 6
def _interrupt_when(args, ready, timeout=300, to_group=False, signum=signal.SIGINT):
    """Runs `python args` until `ready()`, then sends `signum` to it (to its process group with
    `to_group`, as a terminal's Ctrl-C does); returns (exit status, stderr)."""
    from conftest import REPO

    # A suite started in the background by a shell without job control (`nohup ... &`) has
    # SIGINT ignored, and children inherit that: give the run the terminal's default, as a
    # user pressing Ctrl-C has it.
    process = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               # A crash prints every thread's Python stack (see below).
                               env=dict(os.environ, PYTHONPATH=REPO, PYTHONFAULTHANDLER="1"),
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None and not ready():
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be interrupted"
    if to_group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    try:
        _, stderr = process.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        # The whole group: a child the run left behind would keep stderr open.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        pytest.fail(f"it or a process it started still ran 180 s after "
                    f"{signal.Signals(signum).name}:\n" + "\n".join(
            line for line in stderr.splitlines() if "Step " not in line and "Decoded" not in line
            and "Ran the model" not in line)[-3000:])
    if process.returncode < 0:
        # Killed by a signal (once seen: SIGABRT after the Ctrl-C, not reproduced since): show
        # the fatal error's head and the threads' stacks, which the tail of stderr cuts off.
        start = max(stderr.find("Fatal Python error"), 0)
        pytest.fail(f"killed by signal {-process.returncode} after "
                    f"{signal.Signals(signum).name}:\n"
                    + stderr[start:start + 6000])
    return process.returncode, stderr


# run_squad.py's run stays in the default suite; the others are in the slow tier (32 s and 27 s on
# 2 cores), to keep the default suite within 15 minutes: all three stop through the same loop.
@pytest.mark.parametrize("script", [*(pytest.param(script, marks=pytest.mark.slow)
                                      for script in SCRIPTS[:2]), SCRIPTS[2]])
def test_ctrl_c_ends_with_one_line_saying_where_the_run_stopped(tmp_path, synthetic_corpus,
                                                               script):
    _, spm = synthetic_corpus
    endless = ({"num_train_epochs": 100000} if script == "run_squad.py"
               else {"train_step": 100000})
    args = _command(script, tmp_path, spm, save_checkpoints_steps=3, **endless)
    status, stderr = _interrupt_when(
        args, lambda: (tmp_path / "out" / "model.ckpt-3.index").exists())
    assert status == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    match = re.fullmatch(r"Interrupted: stopped at step (\d+); the same command resumes from "
                         r"(.*)model\.ckpt-(\d+)", last)
    assert match, last
    assert int(match.group(3)) <= int(match.group(1)) and int(match.group(3)) % 3 == 0
    if script != "run_classifier.py":
        return
    # The same command (a shorter run of it) resumes there; progress goes to the log as lines
    # when stderr is not a terminal.
    resumed = run_script(*_command(script, tmp_path, spm, save_checkpoints_steps=3,
                                   train_step=int(match.group(3)) + 3, progress=True))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resumed from {match.group(2)}model.ckpt-{match.group(3)}" in resumed.stderr
    assert "\r" not in resumed.stderr
    assert f"training: step {int(match.group(3)) + 3}/{int(match.group(3)) + 3} (100%)" in \
        resumed.stderr


def _endless_paper_reproduction(tmp_path, synthetic_corpus):
    corpus, spm = synthetic_corpus
    out = tmp_path / "paper"
    return out, ["-m", "albert.paper", "reproduce", "--table=5", "--scale=tiny",
                 f"--corpus={corpus}", f"--heldout={corpus}", f"--spm_model_file={spm}",
                 f"--output_dir={out}", "--glue_dir=none", "--num_train_steps=100000"]


# slow: the default suite keeps every script's own Ctrl-C test; this one is the paper
# runner's, which starts a training process of its own (two TensorFlow starts)
@pytest.mark.slow
def test_ctrl_c_stops_a_paper_reproduction_with_one_line(tmp_path, synthetic_corpus):
    out, args = _endless_paper_reproduction(tmp_path, synthetic_corpus)
    status, stderr = _interrupt_when(
        args, lambda: any(out.glob("runs/*/pretraining/train_log.jsonl")), to_group=True)
    assert status == 130, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert re.fullmatch(r"Interrupted: stopped during run_pretraining\.py; the same reproduce "
                        r"command goes on from there \(finished cells are kept\)", lines[-1])
    # ... after the step's own line
    assert any(re.fullmatch(r"Interrupted: stopped at step \d+; the same command .*", line)
               for line in lines[:-1]), stderr[-3000:]


# slow: as above, for SIGTERM (the default suite keeps run_pretraining.py's own SIGTERM tests)
@pytest.mark.slow
def test_sigterm_to_a_paper_reproduction_reaches_its_step_which_saves_first(tmp_path,
                                                                          synthetic_corpus):
    """`kill <runner>` alone (not its process group): the runner passes it on to the training
    step and waits, instead of dying and leaving the step training on, orphaned."""
    out, args = _endless_paper_reproduction(tmp_path, synthetic_corpus)
    status, stderr = _interrupt_when(
        args, lambda: any(log.stat().st_size for log in
                          out.glob("runs/*/pretraining/train_log.jsonl")),
        signum=signal.SIGTERM)
    assert status == 143, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert lines[-1] == ("Preempted: stopped during run_pretraining.py by SIGTERM; the same "
                         "reproduce command goes on from there (finished cells are kept)")
    saved = [re.fullmatch(r"Preempted: SIGTERM at step (\d+): saved (.*model\.ckpt-(\d+)); the "
                          r"same command resumes from it", line) for line in lines[:-1]]
    saved = [match for match in saved if match]
    assert saved, stderr[-3000:]
    assert saved[0].group(1) == saved[0].group(3)
    assert os.path.exists(saved[0].group(2) + ".index")


def _keras_hub_preset(tmp_path, spm):
    pytest.importorskip("keras_hub")
    from albert.checkpoints import model_weights, write_checkpoint
    from albert.modeling import AlbertPretrainer

    config = tiny_config(vocab_size=1200, max_position_embeddings=64)
    preset = tmp_path / "preset"
    write_checkpoint(model_weights(AlbertPretrainer(config)), config, str(preset), "keras_hub",
                     spm_model_file=spm)
    return preset


# run_race.py's run is in the slow tier (21 s on 2 cores), to keep the default suite within
# 15 minutes; both scripts read a preset through the same code.
@pytest.mark.parametrize("script", ["run_classifier.py",
                                    pytest.param("run_race.py", marks=pytest.mark.slow)])
def test_a_keras_hub_preset_fine_tunes_with_its_own_config_and_tokenizer(tmp_path, script,
                                                                        synthetic_corpus):
    """A KerasHub user's preset: no --albert_config_file, no --spm_model_file."""
    _, spm = synthetic_corpus
    preset = _keras_hub_preset(tmp_path, spm)
    result = run_script(*_command(script, tmp_path, spm, albert_config_file=None,
                                  spm_model_file=None, init_checkpoint=preset))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Tokenizer: the SentencePiece model of the preset" in result.stderr
    # Its predictions are written (the files of --do_predict, not merely run files).
    predictions = {"run_classifier.py": "test_results.tsv", "run_race.py": "predictions.tsv"}
    assert len((tmp_path / "out" / predictions[script]).read_text().splitlines()) >= 1


def test_restarts_from_a_preset_predict_with_the_preset_config_and_tokenizer(tmp_path,
                                                                            synthetic_corpus):
    """The final run of --restarts starts from the best seed's model.ckpt-best, which carries
    no config or tokenizer: it takes the config the seeds wrote and the preset's tokenizer."""
    _, spm = synthetic_corpus
    preset = _keras_hub_preset(tmp_path, spm)
    result = run_script(*_command("run_classifier.py", tmp_path, spm, albert_config_file=None,
                                  spm_model_file=None, init_checkpoint=preset, restarts=2))
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "out"
    best = json.loads((out / "restarts.json").read_text())["best"]["seed"]
    assert (out / "albert_config.json").read_text() == \
        (out / f"seed-{best}" / "albert_config.json").read_text()
    assert f"Predicting with {out}/seed-{best}/model.ckpt-best" in result.stderr
    assert list(out.glob("*.tsv"))


def test_without_a_config_or_a_preset_the_script_says_what_it_needs(tmp_path, synthetic_corpus):
    _, spm = synthetic_corpus
    result = run_script(*_command("run_classifier.py", tmp_path, spm, albert_config_file=None))
    assert_clean_failure(result, "--albert_config_file is required")


def test_a_resume_with_another_data_order_is_refused_before_the_caches(tmp_path,
                                                                       synthetic_corpus):
    _, spm = synthetic_corpus
    first = run_script(*_command("run_classifier.py", tmp_path, spm, do_predict=False))
    assert first.returncode == 0, first.stderr[-3000:]
    caches = tmp_path / "new-caches"
    result = run_script(*_command("run_classifier.py", tmp_path, spm, do_predict=False,
                                  train_batch_size=8, train_step=8, cached_dir=caches))
    assert_clean_failure(result, "holds a run with another data_order.json")
    assert not caches.exists()


def test_training_without_evaluation_keeps_every_checkpoint_for_the_evaluation_run(
        tmp_path, synthetic_corpus):
    """run_glue.sh trains with --nodo_eval, then evaluates: the best of all checkpoints, as
    the original, which kept every one (a checkpoint is deleted only once evaluated)."""
    _, spm = synthetic_corpus
    train = run_script(*_command("run_classifier.py", tmp_path, spm, do_eval=False,
                                 do_predict=False, train_step=12, save_checkpoints_steps=2,
                                 keep_checkpoint_max=2))
    assert train.returncode == 0, train.stderr[-3000:]
    out = tmp_path / "out"
    assert sorted(int(p.name[len("model.ckpt-"):-len(".index")])
                  for p in out.glob("model.ckpt-*.index")) == [2, 4, 6, 8, 10, 12]
    evaluate = run_script(*_command("run_classifier.py", tmp_path, spm, do_train=False,
                                    do_predict=False, train_step=12, save_checkpoints_steps=2,
                                    keep_checkpoint_max=2))
    assert evaluate.returncode == 0, evaluate.stderr[-3000:]
    journal = json.loads((out / "eval_results.json").read_text())
    assert [e["step"] for e in journal["evaluations"]] == [2, 4, 6, 8, 10, 12]


def test_the_digit_comma_rule_reaches_the_tokenizer_and_the_cache_settings(tmp_path,
                                                                           synthetic_corpus):
    """The default ("intended") is what every other run here uses."""
    _, spm = synthetic_corpus
    rule = "python3_original"
    result = run_script(*_command("run_classifier.py", tmp_path, spm, do_eval=False,
                                  do_predict=False, digit_comma_rule=rule))
    assert result.returncode == 0, result.stderr[-3000:]
    settings = [json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.settings.json")]
    assert settings and all(s["digit_comma_rule"] == rule for s in settings)
