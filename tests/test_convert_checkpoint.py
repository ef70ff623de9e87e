import os

import numpy as np
import tensorflow as tf

from albert.checkpoints import model_weights, write_checkpoint
from albert.modeling import AlbertPretrainer
from conftest import tiny_config
from scripts import assert_clean_failure, run_script


def _tf1_checkpoint(tmp_path, config):
    weights = model_weights(AlbertPretrainer(config))
    write_checkpoint(weights, config, str(tmp_path / "tf1"), "tf1")
    return weights


def test_tf1_to_hf_to_tf1_through_the_command_line(tmp_path):
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2)
    weights = _tf1_checkpoint(tmp_path, config)
    config_file = str(tmp_path / "tf1" / "albert_config.json")
    first = run_script("convert_checkpoint.py", f"--albert_config_file={config_file}",
                       f"--init_checkpoint={tmp_path / 'tf1'}", "--input_format=tf1",
                       "--output_format=hf", f"--output_dir={tmp_path / 'hf'}")
    assert first.returncode == 0, first.stderr
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "model.safetensors"]
    second = run_script("convert_checkpoint.py", f"--init_checkpoint={tmp_path / 'hf'}",
                        "--input_format=hf", "--output_format=tf1",
                        f"--output_dir={tmp_path / 'back'}")
    assert second.returncode == 0, second.stderr
    reader = tf.train.load_checkpoint(str(tmp_path / "back" / "model.ckpt-best"))
    for name, value in weights.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)


def test_mismatched_config_fails_cleanly_and_writes_nothing(tmp_path, repo_path):
    _tf1_checkpoint(tmp_path, tiny_config())
    result = run_script("convert_checkpoint.py",
                        f"--albert_config_file={repo_path('configs', 'albert_base_v2.json')}",
                        f"--init_checkpoint={tmp_path / 'tf1'}", "--output_format=keras",
                        f"--output_dir={tmp_path / 'out'}")
    assert_clean_failure(result, "does not fit the config", "mis-shaped")
    assert not (tmp_path / "out").exists()
    assert [name for name in os.listdir(tmp_path) if name.startswith(".")] == []


def test_invalid_config_file_fails_cleanly(tmp_path):
    _tf1_checkpoint(tmp_path, tiny_config())
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 99, "hidden_size": 30, "num_attention_heads": 4}')
    result = run_script("convert_checkpoint.py", f"--albert_config_file={bad}",
                        f"--init_checkpoint={tmp_path / 'tf1'}", f"--output_dir={tmp_path / 'out'}")
    assert_clean_failure(result, "not a multiple of num_attention_heads")


def test_existing_output_is_not_overwritten(tmp_path):
    config = tiny_config()
    _tf1_checkpoint(tmp_path, config)
    args = ["convert_checkpoint.py", f"--init_checkpoint={tmp_path / 'tf1'}",
            f"--albert_config_file={tmp_path / 'tf1' / 'albert_config.json'}",
            "--output_format=tf1", f"--output_dir={tmp_path / 'tf1'}"]
    before = (tmp_path / "tf1" / "model.ckpt-best.index").read_bytes()
    assert_clean_failure(run_script(*args), "already holds")
    assert (tmp_path / "tf1" / "model.ckpt-best.index").read_bytes() == before


def test_missing_checkpoint_fails_cleanly(tmp_path, repo_path):
    result = run_script("convert_checkpoint.py",
                        f"--albert_config_file={repo_path('configs', 'tiny.json')}",
                        f"--init_checkpoint={tmp_path / 'nope'}", f"--output_dir={tmp_path / 'out'}")
    assert_clean_failure(result, "No checkpoint")


def test_tf1_to_a_keras_hub_preset_with_its_tokenizer_and_back(tmp_path, synthetic_corpus):
    import pytest

    pytest.importorskip("keras_hub")
    _, spm = synthetic_corpus
    config = tiny_config(num_hidden_layers=2, vocab_size=1200)
    weights = _tf1_checkpoint(tmp_path, config)
    config_file = str(tmp_path / "tf1" / "albert_config.json")
    result = run_script("convert_checkpoint.py", f"--albert_config_file={config_file}",
                        f"--init_checkpoint={tmp_path / 'tf1'}", "--output_format=keras_hub",
                        f"--spm_model_file={spm}", f"--output_dir={tmp_path / 'preset'}")
    assert result.returncode == 0, result.stderr
    assert "neither lower-cases nor strips accents" in result.stderr
    assert "no sentence-order head" in result.stderr
    assert (tmp_path / "preset" / "assets" / "tokenizer" / "vocabulary.spm").exists()
    back = run_script("convert_checkpoint.py", f"--init_checkpoint={tmp_path / 'preset'}",
                      "--input_format=auto", "--output_format=tf1",
                      f"--output_dir={tmp_path / 'back'}")
    assert back.returncode == 0, back.stderr
    reader = tf.train.load_checkpoint(str(tmp_path / "back" / "model.ckpt-best"))
    for name, value in weights.items():
        if not name.startswith("cls/seq_relationship"):
            np.testing.assert_array_equal(reader.get_tensor(name), value)
