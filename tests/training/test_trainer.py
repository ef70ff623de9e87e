"""The training loop as a library: run directories, kills at any point, loss scaling, ram://."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert import io
from albert.config import AlbertConfig
from albert.pretraining_data.schema import load_data_contract
from albert.tasks.pretraining import PretrainingTask
from albert.training.checkpointing import TrainingCheckpoints
from albert.training.loop import Trainer, TrainerConfig, variable_names_for
from albert.training.optimization import AlbertLearningRateSchedule, create_optimizer
from albert.training.run_directory import RunLock, read_train_log
from scripts import assert_clean_failure, run_script

TINY = dict(vocab_size=1200, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


class Killed(BaseException):
    """Stands for the process dying at a chosen point."""


def _trainer(files, output_dir, steps=30, every=10, eval_files=None, masked_lm_budget=0.0,
             **config):
    contract = load_data_contract(files)
    task = PretrainingTask(config=AlbertConfig(**TINY), train_data=contract,
                           eval_data=load_data_contract(eval_files) if eval_files else None,
                           masked_lm_budget=masked_lm_budget)
    task.check_inputs()
    return Trainer(
        task, tf.distribute.OneDeviceStrategy("/cpu:0"),
        TrainerConfig(output_dir=output_dir, num_train_steps=steps, train_batch_size=8,
                      save_checkpoints_steps=every, max_eval_steps=2, show_progress=False,
                      **config),
        make_optimizer=lambda names: create_optimizer("lamb", 0.005, steps, 3,
                                                      variable_names=names,
                                                      gradients_summed_by_caller=True),
        variable_names=variable_names_for)


def _journal(output_dir):
    with open(os.path.join(output_dir, "eval_results.json")) as handle:
        return json.load(handle)


# Two of the three kill points are in the slow tier (about 26 s each on 2 cores), to keep the
# default suite within 15 minutes.
@pytest.mark.parametrize("kill_point", ["before_evaluation",
                                        pytest.param("before_best_copy", marks=pytest.mark.slow),
                                        pytest.param("inside_best_copy", marks=pytest.mark.slow)])
def test_every_checkpoint_is_evaluated_exactly_once_whatever_happens(
        tmp_path, synthetic_records, monkeypatch, kill_point):
    files, _ = synthetic_records
    output_dir = str(tmp_path / "run")
    trainer = _trainer(files, output_dir, eval_files=files[:1])
    original_copy = TrainingCheckpoints.copy_to_best
    calls = {"n": 0}

    def die_at_checkpoint_20(step, *args):
        if step == 20:
            raise Killed()

    if kill_point == "before_evaluation":
        monkeypatch.setattr(trainer, "evaluate_and_track",
                            lambda step, model: die_at_checkpoint_20(step) or
                            Trainer.evaluate_and_track(trainer, step, model))
    elif kill_point == "before_best_copy":
        monkeypatch.setattr(TrainingCheckpoints, "copy_to_best",
                            lambda self, step: die_at_checkpoint_20(step) or
                            original_copy(self, step))
    else:
        def half_copy(self, step):
            calls["n"] += 1
            if step == 20:   # new data renamed into place, index not yet
                io.write_text_atomically(os.path.join(self.output_dir, ".model.ckpt-best.copying"),
                                         "20\n")
                data = "model.ckpt-best.data-00000-of-00001"
                io.copy(os.path.join(self.output_dir, "model.ckpt-20.data-00000-of-00001"),
                        os.path.join(self.output_dir, data))
                raise Killed()
            original_copy(self, step)
        monkeypatch.setattr(TrainingCheckpoints, "copy_to_best", half_copy)
    # Make checkpoint 20 the best, whatever the metric does.
    monkeypatch.setattr(trainer, "evaluate", lambda model: {
        "masked_lm_accuracy": float(trainer.optimizer.iterations.numpy())})
    with pytest.raises(Killed):
        trainer.train(do_eval=True)
    monkeypatch.undo()

    resumed = _trainer(files, output_dir, eval_files=files[:1])
    monkeypatch.setattr(resumed, "evaluate", lambda model: {
        "masked_lm_accuracy": float(resumed.optimizer.iterations.numpy())})
    resumed.train(do_eval=True)
    journal = _journal(output_dir)
    assert [e["step"] for e in journal["evaluations"]] == [10, 20, 30]
    assert journal["best"] == {"step": 30, "masked_lm_accuracy": 30.0}
    assert TrainingCheckpoints(output_dir).best_is_copy_of(30)
    text = open(os.path.join(output_dir, "eval_results.txt")).read()
    assert text.count("global_step = ") == 3


def test_an_unfinished_best_copy_is_repaired_before_anything_else(tmp_path, synthetic_records,
                                                                    monkeypatch):
    files, _ = synthetic_records
    output_dir = str(tmp_path / "run")
    trainer = _trainer(files, output_dir, steps=20, eval_files=files[:1])
    monkeypatch.setattr(trainer, "evaluate", lambda model: {
        "masked_lm_accuracy": 20.0 - float(trainer.optimizer.iterations.numpy())})
    trainer.train(do_eval=True)   # best: step 10
    # Killed inside a copy of checkpoint 20: its data is in place, its marker too.
    best_data = os.path.join(output_dir, "model.ckpt-best.data-00000-of-00001")
    io.copy(os.path.join(output_dir, "model.ckpt-20.data-00000-of-00001"), best_data)
    io.write_text_atomically(os.path.join(output_dir, ".model.ckpt-best.copying"), "20\n")
    checkpoints = TrainingCheckpoints(output_dir)
    assert not checkpoints.best_is_copy_of(10)
    _trainer(files, output_dir, steps=20, eval_files=files[:1]).evaluate_checkpoints()
    assert checkpoints.best_is_copy_of(10)
    assert [e["step"] for e in _journal(output_dir)["evaluations"]] == [10, 20]


def test_a_skipped_float16_step_still_counts(tmp_path, synthetic_records):
    """Overflowing steps skip the update but advance global_step and the schedule with the data."""
    files, _ = synthetic_records
    output_dir = str(tmp_path / "run")
    try:
        trainer = _trainer(files, output_dir, steps=30, every=10, mixed_precision="mixed_float16",
                           initial_loss_scale=2.0 ** 40)
        trainer.train()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    for step in (10, 20, 30):
        reader = tf.train.load_checkpoint(os.path.join(output_dir, f"model.ckpt-{step}"))
        assert int(reader.get_tensor("global_step")) == step
    state = json.load(open(os.path.join(output_dir, "training_state-30.json")))
    scales = [value for value in state["optimizer"] if isinstance(value, float)]
    assert scales and max(scales) < 2.0 ** 40   # several steps overflowed and were skipped
    schedule = AlbertLearningRateSchedule(0.005, 30, 3)
    with open(os.path.join(output_dir, "train_log.jsonl")) as handle:
        for line in handle:
            record = json.loads(line)
            # Logged from the device step, in float32.
            assert record["learning_rate"] == pytest.approx(float(schedule(record["step"] - 1)),
                                                            rel=1e-5)


def _snapshot(directory):
    return {path: (open(path, "rb").read() if os.path.isfile(path) else None)
            for path in (os.path.join(root, name) for root, dirs, names in os.walk(directory)
                         for name in dirs + names)}


def test_a_refused_rerun_writes_nothing(tmp_path, synthetic_records):
    files, _ = synthetic_records
    output_dir = str(tmp_path / "run")
    _trainer(files, output_dir, steps=10).train()
    before = _snapshot(output_dir)
    other = tmp_path / "other_config.json"
    other.write_text(json.dumps(dict(TINY, hidden_size=48)))
    result = run_script("run_pretraining.py", f"--albert_config_file={other}",
                        f"--input_file={','.join(files)}", f"--output_dir={output_dir}",
                        "--train_batch_size=8", "--num_train_steps=20", "--noprogress")
    assert_clean_failure(result, "holds a run with another albert_config.json")
    assert _snapshot(output_dir) == before


# Slow tier (about 38 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_a_resumed_run_must_read_on_in_the_same_order(tmp_path, synthetic_records):
    from albert.errors import InputError

    files, _ = synthetic_records
    output_dir = str(tmp_path / "run")
    _trainer(files, output_dir, steps=10).train()
    order_file = os.path.join(output_dir, "data_order.json")
    assert json.load(open(order_file)) == {"train_batch_size": 8, "random_seed": 12345,
                                           "shuffle_buffer_size": 100, "input_shards": 1,
                                           "bucket_window": 0}
    before = _snapshot(output_dir)
    # A resume that forgot --random_seed=7 (or brought another) would mix two orders.
    with pytest.raises(InputError, match=r"another data_order.json \(random_seed: 12345 there, "
                                         r"7 here\)"):
        _trainer(files, output_dir, steps=20, random_seed=7).train()
    assert _snapshot(output_dir) == before
    # Evaluating reads no training data: its settings are not checked.
    _trainer(files, output_dir, steps=20, eval_files=files, random_seed=7).evaluate_checkpoints()
    # A directory from before the order was recorded gets it on its next start.
    os.remove(order_file)
    _trainer(files, output_dir, steps=20, random_seed=7).train()
    assert json.load(open(order_file))["random_seed"] == 7


def test_a_run_with_dynamic_masks_resumes_only_with_masks_drawn_alike(tmp_path,
                                                                      synthetic_records):
    from albert.errors import InputError
    from albert.pretraining_data.masking_ops import MASKING_VERSION

    files, _ = synthetic_records
    output_dir = str(tmp_path / "run")
    _trainer(files, output_dir, steps=4, every=4, masked_lm_budget=0.15).train()
    order_file = os.path.join(output_dir, "data_order.json")
    order = json.load(open(order_file))
    assert (order["dynamic_masking"], order["masked_lm_budget"]) == (MASKING_VERSION, 0.15)
    before = _snapshot(output_dir)
    # The same masks at another rate: another data order.
    with pytest.raises(InputError, match=r"another data_order.json \(masked_lm_budget: 0.15 "
                                         r"there, 0.2 here\)"):
        _trainer(files, output_dir, steps=8, every=4, masked_lm_budget=0.2).train()
    assert _snapshot(output_dir) == before
    # A run begun before the masks were drawn this way recorded no version.
    del order["dynamic_masking"]
    io.write_text_atomically(order_file, json.dumps(order))
    before = _snapshot(output_dir)
    with pytest.raises(InputError, match=r"another data_order.json \(dynamic_masking: None "
                                         rf"there, '{MASKING_VERSION}' here\)"):
        _trainer(files, output_dir, steps=8, every=4, masked_lm_budget=0.15).train()
    assert _snapshot(output_dir) == before


def test_a_second_run_on_the_same_directory_is_refused(tmp_path, synthetic_records):
    files, _ = synthetic_records
    output_dir = str(tmp_path / "run")
    _trainer(files, output_dir, steps=10).train()
    before = _snapshot(output_dir)
    lock = RunLock(output_dir, "train")   # as if another run were training there
    lock.acquire()
    try:
        config = tmp_path / "albert_config.json"
        config.write_text(json.dumps(TINY))
        result = run_script("run_pretraining.py", f"--albert_config_file={config}",
                            f"--input_file={','.join(files)}", f"--output_dir={output_dir}",
                            "--train_batch_size=8", "--num_train_steps=20", "--noprogress")
    finally:
        lock.release()
    assert_clean_failure(result, "Another run is training in", f"pid {os.getpid()}")
    assert _snapshot(output_dir) == before


# Slow tier: about 30 s, moved to keep the default suite within 15 minutes (docs/testing.md).
@pytest.mark.slow
def test_a_whole_run_on_tensorflows_in_memory_file_system(tmp_path, synthetic_corpus):
    """Data creation, pretraining with evaluation, resume and conversion: every path ram://."""
    from albert.checkpoints import read_checkpoint, write_checkpoint
    from albert.pretraining_data.instances import InstanceConfig
    from albert.pretraining_data.masking import MaskingConfig
    from albert.pretraining_data.creation import DataConfig, create_pretraining_data

    corpus, model = synthetic_corpus
    root = f"ram://albert-test-{os.getpid()}"
    io.makedirs(root)
    io.copy(corpus, f"{root}/corpus.txt")
    io.copy(model, f"{root}/spm.model")
    config = DataConfig(instance=InstanceConfig(max_seq_length=64, masking=MaskingConfig(
        max_predictions_per_seq=10)), spm_model_file=f"{root}/spm.model", dupe_factor=1)
    summary = create_pretraining_data(f"{root}/corpus.txt", f"{root}/data/train.tfrecord@2",
                                      config, show_progress=False)
    assert io.listdir(f"{root}/data") == ["train.tfrecord-00000-of-00002",
                                          "train.tfrecord-00001-of-00002",
                                          "train.tfrecord.documents.npz",
                                          "train.tfrecord.summary.json"]
    files = io.glob(f"{root}/data/train.tfrecord-*")
    assert load_data_contract(files).total_records == summary["instances"]

    _trainer(files, f"{root}/run", steps=10, every=5, eval_files=files[:1]).train(do_eval=True)
    _trainer(files, f"{root}/run", steps=20, every=5, eval_files=files[:1]).train(do_eval=True)
    names = io.listdir(f"{root}/run")
    for expected in ("albert_config.json", "checkpoint", "eval_results.json", "eval_results.txt",
                     "model.ckpt-20.index", "model.ckpt-best.index", "train_log-000000020.jsonl",
                     "training_state-20.json", "tensorboard"):
        assert expected in names, expected
    # On an object store the step log is written in parts (never appended to).
    assert "train_log.jsonl" not in names
    assert [record["step"] for record in read_train_log(f"{root}/run")] == list(range(1, 21))
    assert [e["step"] for e in io.read_json(f"{root}/run/eval_results.json")["evaluations"]] == [
        5, 10, 15, 20]

    weights, albert_config = read_checkpoint(f"{root}/run", "tf1",
                                             AlbertConfig.from_json_file(f"{root}/run/albert_config.json"))
    for output_format in ("hf", "keras", "tf1"):
        written = write_checkpoint(weights, albert_config, f"{root}/{output_format}", output_format)
        assert written and all(io.exists(path) for path in written)
        back, _ = read_checkpoint(f"{root}/{output_format}", output_format, albert_config)
        for name, value in weights.items():
            np.testing.assert_array_equal(back[name], value)
    assert not os.path.exists("ram:")
