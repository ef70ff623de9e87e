"""Damaged checkpoints as an operator meets them: a data file cut short, an index overwritten,
a damaged --init_checkpoint. The run names each one, leaves it in place and resumes from the
newest intact checkpoint, or stops with one ERROR line."""

import os
import shutil

import pytest

from albert.checkpoints import model_weights, write_checkpoint
from albert.checkpoints.keras_format import build_model
from conftest import tiny_config
from scripts import assert_clean_failure, run_script
from training.test_run_pretraining import TINY, _args, _config_file, _losses

DATA = ".data-00000-of-00001"


def _cut_in_half(path) -> bytes:
    """Truncates `path` to half its size (a copy cut short); returns the bytes left."""
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) // 2)
    with open(path, "rb") as handle:
        return handle.read()


# Slow tier (about 39 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_a_cut_newest_checkpoint_is_set_aside_and_the_run_resumes_exactly(
        tmp_path, synthetic_records):
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    reference, run = str(tmp_path / "reference"), tmp_path / "run"
    args = dict(num_train_steps=60, save_checkpoints_steps=20)
    assert run_script(*_args(config, files, reference, **args)).returncode == 0
    # The finished run's copy, its newest checkpoint cut short: the same command trains again
    # from the newest intact one (40) to 60.
    shutil.copytree(reference, run)
    damaged = _cut_in_half(run / f"model.ckpt-60{DATA}")

    resumed = run_script(*_args(config, files, str(run), **args))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    warnings = [line for line in resumed.stderr.splitlines() if "damaged" in line]
    assert any("model.ckpt-60" in line and "left in place" in line for line in warnings), warnings
    assert "Resumed from" in resumed.stderr and "model.ckpt-40" in resumed.stderr
    # Nothing deleted: the damaged bytes are kept under a name of their own once step 60 is
    # written again, and the new checkpoint 60 is whole.
    assert (run / f"model.ckpt-60.damaged{DATA}").read_bytes() == damaged
    assert os.path.getsize(run / f"model.ckpt-60{DATA}") > len(damaged)
    expected, actual = _losses(reference), _losses(run)
    assert sorted(actual) == list(range(1, 61))
    for step in range(41, 61):
        assert actual[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-6), step


# Slow tier: about 30 s, moved to keep the default suite within 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_an_unreadable_index_is_skipped_and_none_intact_is_one_error_line(
        tmp_path, synthetic_records):
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    run = tmp_path / "run"
    args = _args(config, files, str(run), num_train_steps=20, save_checkpoints_steps=10)
    assert run_script(*args).returncode == 0
    (run / "model.ckpt-20.index").write_bytes(b"not an index")
    resumed = run_script(*_args(config, files, str(run), num_train_steps=20,
                                save_checkpoints_steps=10))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "model.ckpt-20" in resumed.stderr and "damaged" in resumed.stderr
    assert "Resumed from" in resumed.stderr

    # Every checkpoint damaged: one ERROR line, every file as it was.
    (run / "model.ckpt-20.index").write_bytes(b"not an index")
    _cut_in_half(run / f"model.ckpt-10{DATA}")
    before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()}
    result = run_script(*_args(config, files, str(run), num_train_steps=30,
                               save_checkpoints_steps=10))
    assert_clean_failure(result, "no checkpoint in", "model.ckpt-10", "model.ckpt-20",
                         "left in place")
    assert len([line for line in result.stderr.splitlines() if "ERROR:" in line]) == 1
    after = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file()}
    assert {name: after.get(name) for name in before} == before


# Slow tier (about 43 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_a_damaged_state_file_lists_the_checkpoints_beside_it_and_is_kept(
        tmp_path, synthetic_records):
    """The `checkpoint` state file overwritten with bytes that are not text: the run resumes
    from the newest checkpoint beside it, instead of ending in a traceback or starting again
    over the old files, and keeps the damaged file under another name."""
    files, _ = synthetic_records
    config = _config_file(tmp_path)
    run = tmp_path / "run"
    assert run_script(*_args(config, files, str(run), num_train_steps=20,
                             save_checkpoints_steps=10)).returncode == 0
    damaged = b"\x00\xff not a state file"
    (run / "checkpoint").write_bytes(damaged)
    resumed = run_script(*_args(config, files, str(run), num_train_steps=30,
                                save_checkpoints_steps=10))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "state file" in resumed.stderr and "damaged" in resumed.stderr
    assert "Resumed from" in resumed.stderr and "model.ckpt-20" in resumed.stderr
    assert (run / "checkpoint.damaged").read_bytes() == damaged
    assert 'model_checkpoint_path: "model.ckpt-30"' in (run / "checkpoint").read_text()
    assert sorted(_losses(run)) == list(range(1, 31))


@pytest.mark.parametrize("output_format", ["tf1", "hf", "keras", "model_garden"])
def test_a_damaged_init_checkpoint_is_one_error_line(tmp_path, synthetic_records, output_format):
    files, _ = synthetic_records
    config_file = _config_file(tmp_path)
    config = tiny_config(**TINY)
    written = write_checkpoint(model_weights(build_model(config, "pretraining")), config,
                               str(tmp_path / "init"), output_format)
    biggest = max((path for path in written if os.path.isfile(path)), key=os.path.getsize)
    _cut_in_half(biggest)
    result = run_script(*_args(config_file, files, str(tmp_path / "run"), num_train_steps=5,
                               init_checkpoint=str(tmp_path / "init")))
    assert_clean_failure(result, str(tmp_path / "init"))
    errors = [line for line in result.stderr.splitlines() if "ERROR:" in line]
    assert len(errors) == 1 and ("damaged" in errors[0] or "cut short" in errors[0]), errors
    assert not (tmp_path / "run" / "model.ckpt-5.index").exists()



def test_a_full_disk_is_said_as_a_person_would(tmp_path, synthetic_records, monkeypatch):
    """What TensorFlow raises when the output file system fills up while checkpoint 20 is
    written (seen on a 3 MiB file system): one ERROR line naming the checkpoint, the directory
    and the intact checkpoint to resume from; nothing half-written left."""
    from albert.training import checkpointing
    import tensorflow as tf

    files, _ = synthetic_records
    run = tmp_path / "run"
    real_save = checkpointing.save_tensors

    def fills_the_disk_at_step_20(prefix, tensors):
        if "model.ckpt-20" in prefix:
            real_save(prefix, tensors)  # the bytes that fit, then the error
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{prefix}.data-00000-of-00001; No space left on device [Op:SaveV2]")
        return real_save(prefix, tensors)

    monkeypatch.setattr(checkpointing, "save_tensors", fills_the_disk_at_step_20)
    result = run_script(*_args(_config_file(tmp_path), files, str(run), num_train_steps=30,
                               save_checkpoints_steps=10))
    assert_clean_failure(result, "no space left on the device writing checkpoint 20 in",
                         str(run), "checkpoint 10 is intact", "run the same command")
    assert len([line for line in result.stderr.splitlines() if "ERROR:" in line]) == 1
    assert "[Op:SaveV2]" not in result.stderr and "function_node" not in result.stderr
    assert sorted(path.name for path in run.glob("model.ckpt-*")) == [
        "model.ckpt-10.data-00000-of-00001", "model.ckpt-10.index"]
    assert not list(run.glob(".model.ckpt*")) and not list(run.glob("*.tmp*"))
