"""What a new user sees in the first hour: no false alarms, no silent traps, clean logs.

An `import albert` on a machine without a GPU prints no error line; a short
pretraining run says that its warm-up outlasts it; progress is log lines (no
carriage returns) when stderr is not a terminal; lock files do not outlive
the run that held them.
"""

import io
import os
import re
import subprocess
import sys
import types

import pytest

from albert import cli, native_logs
from albert.training.optimization import AlbertLearningRateSchedule
from albert.training.run_directory import RunDirectory, RunLock
from conftest import REPO
from scripts import run_script

CUINIT_LINE = ("2026-01-01 00:00:00.000000: E external/local_xla/xla/stream_executor/cuda/"
               "cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed call "
               "to cuInit: UNKNOWN ERROR (303)\n")
REAL_ERROR = "2026-01-01 00:00:00.000000: E some/other.cc:1] a real error\n"
# An error line of TensorFlow's C++ logging or of absl's.
ERROR_LINE = re.compile(r"^(\d{4}-\d\d-\d\d [\d:.]+: E |E\d{4} )")


# ------------------------------------------------------------- the GPU probe
def _fake_tensorflow(monkeypatch):
    """A `tensorflow` whose device enumeration writes what TensorFlow's C++ side writes."""
    def list_physical_devices():
        os.write(2, (CUINIT_LINE + REAL_ERROR).encode())
        return []

    fake = types.SimpleNamespace(config=types.SimpleNamespace(
        list_physical_devices=list_physical_devices))
    monkeypatch.setitem(sys.modules, "tensorflow", fake)


@pytest.mark.parametrize("gpu", [False, True])
def test_the_cuda_probe_line_is_dropped_only_where_there_is_no_gpu(monkeypatch, capfd, gpu):
    _fake_tensorflow(monkeypatch)
    monkeypatch.setattr(native_logs, "nvidia_gpu_present", lambda: gpu)
    native_logs.probe_tensorflow_devices(re.compile("other noise"))   # as the scripts do
    stderr = capfd.readouterr().err
    assert "a real error" in stderr and ERROR_LINE.match(REAL_ERROR)
    # Where there is a GPU, a failed cuInit is a broken driver: the user must see it.
    assert ("failed call to cuInit" in stderr) == gpu


def test_the_import_leaves_the_probe_to_tensorflow_where_there_is_a_gpu(monkeypatch, capfd):
    _fake_tensorflow(monkeypatch)
    monkeypatch.setattr(native_logs, "nvidia_gpu_present", lambda: True)
    native_logs.probe_tensorflow_devices()   # what `import albert` calls
    assert capfd.readouterr().err == ""      # not probed: nothing to keep out


@pytest.mark.skipif(native_logs.nvidia_gpu_present(), reason="the machine has an NVIDIA GPU")
def test_importing_the_package_and_building_a_model_prints_no_error_line():
    """In a process of its own: TensorFlow probes CUDA once per process."""
    code = ("import numpy as np, albert\n"
            "config = albert.AlbertConfig(vocab_size=30, embedding_size=8, hidden_size=16,\n"
            "    num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)\n"
            "encoder = albert.AlbertEncoder(config)\n"
            "encoder({'input_word_ids': np.array([[2, 5, 3]], 'int32'),\n"
            "         'input_mask': np.ones((1, 3), 'int32'),\n"
            "         'input_type_ids': np.zeros((1, 3), 'int32')})\n"
            "print('built')\n")
    # A user's fresh process: without the suite's log level.
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "built"
    assert "cuInit" not in result.stderr, result.stderr
    assert not [line for line in result.stderr.splitlines() if ERROR_LINE.match(line)], \
        result.stderr


# ----------------------------------------------------------------- warm-up
def test_a_warm_up_longer_than_the_run_is_described():
    # The pretraining defaults (3125 warm-up steps) in a 20-step run.
    warning = AlbertLearningRateSchedule(0.00176, 20, 3125).warmup_warning()
    assert "never reaches the peak learning rate 0.00176" in warning
    assert "ends at 1.07e-05" in warning          # 0.00176 * 19 / 3125, the last step's rate
    assert "--num_warmup_steps" in warning and "--warmup_step" in warning
    assert "from step" in AlbertLearningRateSchedule(1.0, 20, 10, 10).warmup_warning()
    # A warm-up ending at the last step still never reaches the peak.
    assert AlbertLearningRateSchedule(1.0, 20, 20).warmup_warning() is not None
    for schedule in (AlbertLearningRateSchedule(1.0, 20, 19), AlbertLearningRateSchedule(1.0, 20, 0),
                     AlbertLearningRateSchedule(1.0, 125000, 3125)):
        assert schedule.warmup_warning() is None


def test_a_first_short_pretraining_run_warns_logs_progress_lines_and_leaves_no_lock(
        tmp_path, synthetic_records):
    files, _ = synthetic_records
    config = tmp_path / "albert_config.json"
    config.write_text('{"vocab_size": 1200, "embedding_size": 8, "hidden_size": 16, '
                      '"num_hidden_layers": 1, "num_attention_heads": 2, '
                      '"intermediate_size": 32, "max_position_embeddings": 64}')
    output_dir = tmp_path / "run"
    # The original's defaults but for a run of 3 steps (stderr is not a terminal here).
    result = run_script("run_pretraining.py", f"--albert_config_file={config}",
                        f"--input_file={','.join(files)}", f"--output_dir={output_dir}",
                        "--train_batch_size=4", "--num_train_steps=3",
                        "--save_checkpoints_steps=3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("does not end before the run does (3 steps)") == 1
    assert "--num_warmup_steps" in result.stderr
    assert "training: step 3/3 (100%)" in result.stderr
    assert "\r" not in result.stderr
    assert not [name for name in os.listdir(output_dir) if name.endswith(".lock")]


# ---------------------------------------------------------------- progress
def test_progress_is_log_lines_when_stderr_is_not_a_terminal(caplog, monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())   # as `2> run.log` or a pipe
    progress = cli.progress_display(2500, "tokenizing", "B", unit_scale=True)
    assert isinstance(progress, cli.LoggedProgress)
    with caplog.at_level("INFO", logger="albert"):
        progress.update(1000)   # within the interval: no line yet
        progress.close()        # where it stopped is always logged
        finished = cli.progress_display(7, "writing", "record")
        finished.update(7)
        finished.close()        # already logged at the end: not twice
    assert caplog.messages == ["tokenizing: 1.00kB/2.50kB (40%)", "writing: record 7/7 (100%)"]


def test_a_notebooks_stderr_gets_a_bar(monkeypatch):
    """Jupyter's stderr is no terminal, but redraws a line on a carriage return; log lines
    would go nowhere there (no handler)."""
    notebook_stream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})
    monkeypatch.setattr(sys, "stderr", notebook_stream())
    progress = cli.progress_display(3, "training", "step")
    assert not isinstance(progress, cli.LoggedProgress)
    progress.close()


def test_data_creation_progress_is_log_lines_in_a_redirected_log(tmp_path, synthetic_corpus):
    corpus, model = synthetic_corpus
    documents = open(corpus, encoding="utf-8").read().split("\n\n")
    text = tmp_path / "three-documents.txt"
    text.write_text("\n\n".join(documents[:3]), encoding="utf-8")
    result = run_script("create_pretraining_data.py", f"--input_file={text}",
                        f"--output_file={tmp_path / 'out.tfrecord'}", f"--spm_model_file={model}",
                        "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\r" not in result.stderr
    assert "instances: document 3/3 (100%)" in result.stderr
    # Every record written is counted, not only whole blocks of 4096.
    written = [line for line in result.stderr.splitlines() if "writing: record" in line]
    assert len(written) == 1 and "(100%)" in written[0], result.stderr


# ------------------------------------------------------------------- locks
def test_a_lock_file_goes_with_the_run_that_held_it(tmp_path):
    directory = RunDirectory(str(tmp_path))
    directory.lock("train", "eval")
    assert sorted(os.listdir(tmp_path)) == [".eval.lock", ".train.lock"]
    directory.unlock()
    assert os.listdir(tmp_path) == []


def test_a_refused_run_leaves_the_holders_lock_and_none_of_its_own(tmp_path):
    holder = RunLock(str(tmp_path), "eval")   # another run, evaluating
    holder.acquire()
    try:
        with pytest.raises(Exception, match="Another run is evaluating"):
            RunDirectory(str(tmp_path)).lock("train", "eval")
        assert os.listdir(tmp_path) == [".eval.lock"]
        assert f"pid {os.getpid()}" in (tmp_path / ".eval.lock").read_text()
    finally:
        holder.release()


def test_a_lock_won_on_a_removed_file_is_taken_again_on_the_file_at_the_path(tmp_path,
                                                                             monkeypatch):
    """The race removal opens: B opens the file, A removes it and lets go, B wins the lock
    on the removed file. B must end up holding the file at the path, so C is refused."""
    import fcntl

    first = RunLock(str(tmp_path), "train")
    first.acquire()
    real_flock = fcntl.flock
    calls = []

    def flock_after_the_holder_ends(descriptor, operation):
        calls.append(descriptor)
        if len(calls) == 1:
            first.release()   # between the second run's open and its lock
        return real_flock(descriptor, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_the_holder_ends)
    second = RunLock(str(tmp_path), "train")
    second.acquire()
    monkeypatch.setattr(fcntl, "flock", real_flock)
    try:
        assert len(calls) == 2   # won on the removed file, then on the one at the path
        with pytest.raises(Exception, match="Another run is training"):
            RunLock(str(tmp_path), "train").acquire()
    finally:
        second.release()
    assert os.listdir(tmp_path) == []

