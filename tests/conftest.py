"""Shared fixtures: tiny configs, random inputs, repository paths."""

import dataclasses
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

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


@pytest.fixture(scope="session")
def synthetic_corpus(tmp_path_factory):
    """(corpus path, SentencePiece model path) of the seeded synthetic corpus."""
    import corpora

    directory = tmp_path_factory.mktemp("synthetic")
    corpus = corpora.write_synthetic_corpus(str(directory / "corpus.txt"))
    return corpus, corpora.train_model(corpus, str(directory / "spm"), vocab_size=1200)


@pytest.fixture(scope="session")
def demo_corpus(tmp_path_factory):
    """(demo corpus directory, SentencePiece model trained on its train.txt)."""
    import corpora
    from albert.datasets.demo_corpus import build_demo_corpus

    directory = tmp_path_factory.mktemp("demo")
    build_demo_corpus(str(directory))
    model = corpora.train_model(str(directory / "train.txt"), str(directory / "spm"), vocab_size=4000)
    return str(directory), model


@pytest.fixture(scope="session")
def synthetic_records(tmp_path_factory, synthetic_corpus):
    """Pretraining TFRecords (seq 64, 10 predictions) of the synthetic corpus: (files, model)."""
    from albert.pretraining_data.instances import InstanceConfig
    from albert.pretraining_data.masking import MaskingConfig
    from albert.pretraining_data.creation import DataConfig, create_pretraining_data

    corpus, model = synthetic_corpus
    directory = tmp_path_factory.mktemp("synthetic_records")
    config = DataConfig(instance=InstanceConfig(max_seq_length=64, masking=MaskingConfig(
        max_predictions_per_seq=10)), spm_model_file=model, dupe_factor=2)
    create_pretraining_data(corpus, str(directory / "train.tfrecord@2"), config, show_progress=False)
    return sorted(str(p) for p in directory.glob("train.tfrecord-*")), model
