"""Shared fixtures: tiny configs, random inputs, repository paths."""

import dataclasses
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One thread per TensorFlow op in the tests and in the processes they start: parallel workers
# already keep every core busy, and a tiny model's ops only pay for a thread pool's hand-offs
# (tests/training/test_trainer.py: 62 s with one thread, 72-83 s with the default, one worker).
# Inter-op threads stay as they are: collectives across devices need several.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

# The package first, as the scripts import it: its TensorFlow settings (oneDNN's CPU kernels)
# apply only if they are made before TensorFlow loads.
import albert  # noqa: E402,F401
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert.native_logs import probe_tensorflow_devices  # noqa: E402

# TensorFlow lists its devices below, before any test imports albert: let the package's probe do
# it first, so that a machine without a GPU does not end the run with the "failed call to
# cuInit" line (dropped only where there is no NVIDIA GPU).
probe_tensorflow_devices()

# Two logical CPU devices, so the distributed input path runs under
# MirroredStrategy in-process (tests/records/test_streams.py). Default placement
# stays on the first.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))

from albert.config import AlbertConfig  # noqa: E402

TINY = dict(vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=3,
            num_hidden_groups=1, inner_group_num=1, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)


def tiny_config(**overrides) -> AlbertConfig:
    return AlbertConfig(**{**TINY, **overrides})


def random_inputs(config: AlbertConfig, batch_size=3, sequence_length=10, num_predictions=4,
                  seed=0):
    """Encoder and pretrainer inputs with padding in some rows."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch_size, sequence_length)).astype("int32")
    mask = np.ones_like(ids)
    lengths = [sequence_length] + list(rng.integers(num_predictions + 1, sequence_length, batch_size - 1))
    for row, length in enumerate(lengths):
        mask[row, length:] = 0
    type_ids = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        type_ids[row, length // 2:length] = 1
    positions = np.stack([
        np.sort(rng.choice(np.arange(1, length), size=num_predictions, replace=False))
        for length in lengths]).astype("int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": type_ids,
            "masked_lm_positions": positions}


def encoder_inputs(inputs):
    return {key: inputs[key] for key in ("input_word_ids", "input_mask", "input_type_ids")}


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(1234)


@pytest.fixture
def repo_path():
    return lambda *parts: os.path.join(REPO, *parts)


def replace(config, **changes):
    return dataclasses.replace(config, **changes)


def built_once(tmp_path_factory, name, build):
    """A directory `build(directory)` fills once per test run, shared by the parallel workers.

    The first worker to ask builds it under a lock; the others wait and reuse it. Builders
    write deterministic file names, so every worker sees the same paths.
    """
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent   # the run's directory, above each worker's own
    directory = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / ".complete").exists():
            directory.mkdir(exist_ok=True)
            build(directory)
            (directory / ".complete").touch()
    return directory


@pytest.fixture(scope="session")
def synthetic_corpus(tmp_path_factory):
    """(corpus path, SentencePiece model path) of the seeded synthetic corpus."""
    import corpora

    def build(directory):
        corpora.train_model(corpora.write_synthetic_corpus(str(directory / "corpus.txt")),
                            str(directory / "spm"), vocab_size=1200)

    directory = built_once(tmp_path_factory, "synthetic", build)
    return str(directory / "corpus.txt"), str(directory / "spm.model")


@pytest.fixture(scope="session")
def demo_corpus(tmp_path_factory):
    """(demo corpus directory, SentencePiece model trained on its train.txt)."""
    import corpora
    from albert.datasets.demo_corpus import build_demo_corpus

    def build(directory):
        build_demo_corpus(str(directory))
        corpora.train_model(str(directory / "train.txt"), str(directory / "spm"), vocab_size=4000)

    directory = built_once(tmp_path_factory, "demo", build)
    return str(directory), str(directory / "spm.model")


@pytest.fixture(scope="session")
def synthetic_records(tmp_path_factory, synthetic_corpus):
    """Pretraining TFRecords (seq 64, 10 predictions) of the synthetic corpus: (files, model)."""
    from albert.pretraining_data.instances import InstanceConfig
    from albert.pretraining_data.masking import MaskingConfig
    from albert.pretraining_data.creation import DataConfig, create_pretraining_data

    corpus, model = synthetic_corpus
    config = DataConfig(instance=InstanceConfig(max_seq_length=64, masking=MaskingConfig(
        max_predictions_per_seq=10)), spm_model_file=model, dupe_factor=2)
    directory = built_once(tmp_path_factory, "synthetic_records", lambda directory: (
        create_pretraining_data(corpus, str(directory / "train.tfrecord@2"), config,
                                show_progress=False)))
    return sorted(str(p) for p in directory.glob("train.tfrecord-*")), model


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pytest.ini): one worker more than there are cores, at most 4. Many tests
    wait on processes they started, so a third worker keeps 2 cores busy; more workers than
    that only compete for memory and cores."""
    return min((os.cpu_count() or 1) + 1, 4)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ALBERT_TEST_TIMELINE=F, each test's worker, start and end are appended to F as JSON
    lines: what every worker did when, to see which module ends a parallel run last."""
    path = os.environ.get("ALBERT_TEST_TIMELINE")
    start = time.time()
    yield
    if path:
        row = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "test": item.nodeid,
               "start": start, "end": time.time()}
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
