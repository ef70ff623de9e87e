"""The recipe sweep's bookkeeping: which records and flags each run gets (no training here)."""

import argparse
import importlib.util
import os

import pytest

from scripts import run_script

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "benchmarks", "pretraining_recipe.py")


@pytest.fixture(scope="module")
def recipe():
    spec = importlib.util.spec_from_file_location("pretraining_recipe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sweep_args(tmp_path):
    return argparse.Namespace(train_file="base/train.tfrecord", eval_file="base/heldout.tfrecord",
                              output_dir=str(tmp_path), corpus_dir=None, spm_model_file=None)


def test_each_record_variant_has_its_own_training_and_heldout_records(recipe, tmp_path):
    args = sweep_args(tmp_path)
    assert recipe.record_files(recipe.RUNS["lamb-0.01"], args) == (
        "base/train.tfrecord", "base/heldout.tfrecord", None)
    files = set()
    for name in ("lamb-0.007-seq128-batch32", "lamb-0.01-mask0.2", "lamb-0.01-mask0.3",
                 "lamb-0.01-vocab16k"):
        train, heldout, directory = recipe.record_files(recipe.RUNS[name], args)
        assert (train, heldout) == (os.path.join(directory, "train.tfrecord"),
                                    os.path.join(directory, "heldout.tfrecord")), name
        assert directory.startswith(str(tmp_path))
        files.update((train, heldout))
    assert len(files) == 8  # no two variants share a file
    assert recipe.RUNS["lamb-0.01-vocab16k"]["model"]["vocab_size"] == 16000


def test_record_changes_are_not_passed_to_run_pretraining(recipe):
    flags = recipe.run_flags(recipe.RUNS["lamb-0.007-seq128-batch32"], steps=1200, batch=64)
    assert flags == {"train_batch_size": 32, "num_train_steps": 1200, "optimizer": "lamb",
                     "learning_rate": 0.007, "num_warmup_steps": 120}
    assert recipe.RUNS["lamb-0.007-seq128-batch32"]["model"]["max_position_embeddings"] == 128


def test_a_record_changing_run_without_the_corpus_is_one_error_line(tmp_path):
    result = run_script(SCRIPT, "--train_file=t.tfrecord", "--eval_file=h.tfrecord",
                        f"--output_dir={tmp_path}", "--runs=lamb-0.01-mask0.2")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "ERROR: runs that change the records (lamb-0.01-mask0.2) need --corpus_dir and "
        "--spm_model_file"]
    assert os.listdir(tmp_path) == []


def test_a_masking_runs_heldout_records_are_the_base_ones_padded(recipe, tmp_path,
                                                                synthetic_corpus):
    """So a masking run's held-out numbers compare with every other run's."""
    import shutil

    import tensorflow as tf

    from corpora import first_documents

    # 40 documents give hundreds of records: enough to compare, quick to make.
    corpus = first_documents(synthetic_corpus[0], 40, tmp_path / "corpus-head.txt")
    model = synthetic_corpus[1]
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    for split in ("train", "heldout"):
        shutil.copy(corpus, corpus_dir / f"{split}.txt")
    base_heldout = str(tmp_path / "base-heldout.tfrecord")
    created = run_script("create_pretraining_data.py", f"--input_file={corpus}",
                         f"--output_file={base_heldout}", f"--spm_model_file={model}",
                         "--max_seq_length=64", "--max_predictions_per_seq=10",
                         *recipe.RECORD_FLAGS["heldout"])
    assert created.returncode == 0, created.stderr[-3000:]
    args = argparse.Namespace(train_file="unused", eval_file=base_heldout,
                              output_dir=str(tmp_path / "sweep"), corpus_dir=str(corpus_dir),
                              spm_model_file=model)
    train, heldout = recipe.build_records(recipe.RUNS["lamb-0.01-mask0.2"], args)
    assert os.path.exists(train) and heldout != base_heldout

    def read(path, slots):
        spec = {"input_ids": tf.io.FixedLenFeature([64], tf.int64),
                "masked_lm_positions": tf.io.FixedLenFeature([slots], tf.int64),
                "masked_lm_ids": tf.io.FixedLenFeature([slots], tf.int64),
                "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
        return [{k: v.numpy().tolist() for k, v in tf.io.parse_single_example(r, spec).items()}
                for r in tf.data.TFRecordDataset(path)]

    base, padded = read(base_heldout, 10), read(heldout, 13)
    assert len(base) == len(padded) > 100
    for before, after in zip(base, padded):
        assert after["input_ids"] == before["input_ids"]
        assert after["next_sentence_labels"] == before["next_sentence_labels"]
        for key in ("masked_lm_positions", "masked_lm_ids"):
            assert after[key] == before[key] + [0, 0, 0]
    # The training records mask a fifth of the pieces: up to 13 per sequence, not 10.
    trained = read(train, 13)
    assert max(sum(1 for p in r["masked_lm_positions"] if p) for r in trained) == 13
