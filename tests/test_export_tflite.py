"""TFLite exports: length buckets, batches, quantisation and its report, on real sentences."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from albert.checkpoints import model_weights, write_checkpoint
from albert.export.quantization import encode_texts
from albert.export.tflite import length_buckets
from albert.modeling import AlbertPretrainer
from albert.tokenization import SentencePieceTokenizer
from conftest import tiny_config
from scripts import assert_clean_failure, run_script

SEQ_LENGTH = 64
# Documented in docs/export.md: the largest absolute error of each mode against float32 that
# the tests accept on real sentences (a tiny random-weight model; outputs of order 1).
MAX_ABS_ERROR = {"float16": {"pooled_output": 1e-3, "sequence_output": 1e-2},
                 "dynamic_int8": {"pooled_output": 2e-2, "sequence_output": 0.1},
                 "int8": {"pooled_output": 0.25, "sequence_output": 3.0}}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, demo_corpus):
    """(checkpoint dir, SentencePiece model, calibration file of real held-out sentences)."""
    corpus_dir, spm = demo_corpus
    directory = tmp_path_factory.mktemp("tflite")
    config = tiny_config(vocab_size=4000, max_position_embeddings=128)
    write_checkpoint(model_weights(AlbertPretrainer(config)), config, str(directory / "ckpt"),
                     "tf1")
    with open(os.path.join(corpus_dir, "heldout.txt"), encoding="utf-8") as handle:
        sentences = [line for line in handle.read().split("\n") if line.strip()][:120]
    calibration = directory / "calibration.txt"
    calibration.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return str(directory / "ckpt"), spm, str(calibration), sentences


def _export(checkpoint, export_dir, *flags):
    ckpt, spm, _, _ = checkpoint
    result = run_script("-m", "albert.export", f"--init_checkpoint={ckpt}",
                        f"--albert_config_file={ckpt}/albert_config.json",
                        f"--spm_model_file={spm}", f"--export_dir={export_dir}",
                        f"--seq_length={SEQ_LENGTH}", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _run_tflite_without_albert(tflite_file, inputs, tmp_path):
    """Each signature of the file run with LiteRT in a Python that cannot import `albert`, on
    `inputs` cut to the signature's length: {signature: {output: array}}."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    script = tmp_path / "user_code.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.modules["albert"] = None   # any import of this package fails from here on
        import json
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter
        inputs = dict(np.load("inputs.npz"))
        interpreter = Interpreter(model_path={str(tflite_file)!r}, num_threads=2)
        results = {{}}
        for name in interpreter.get_signature_list():
            runner = interpreter.get_signature_runner(name)
            length = runner.get_input_details()["input_word_ids"]["shape_signature"][-1]
            outputs = runner(**{{key: value[..., :length] for key, value in inputs.items()}})
            results[name] = {{key: value.tolist() for key, value in outputs.items()}}
        print(json.dumps(results))
    """))
    env = dict(os.environ, PYTHONPATH="", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return {name: {key: np.array(value) for key, value in outputs.items()}
            for name, outputs in json.loads(result.stdout.strip().splitlines()[-1]).items()}


def _float_reference(checkpoint, inputs):
    from albert.checkpoints import load_into_model
    from albert.modeling import AlbertEncoder

    ckpt = checkpoint[0]
    from albert.config import AlbertConfig

    encoder = AlbertEncoder(AlbertConfig.from_json_file(f"{ckpt}/albert_config.json"))
    load_into_model(encoder, ckpt, "tf1")
    outputs = encoder(inputs, training=False)
    return {name: outputs[name].numpy() for name in ("pooled_output", "sequence_output")}


def test_length_buckets_of_an_export():
    assert length_buckets(64) == [16, 32, 64]
    assert length_buckets(128) == [16, 32, 64, 128]
    assert length_buckets(100) == [16, 32, 64, 100]
    assert length_buckets(8) == [8]


# `slow` (about 40 s, one TFLite model per bucket); CI runs it.
@pytest.mark.slow
def test_each_bucket_equals_the_full_length_on_real_tokens_for_a_batch(checkpoint, tmp_path):
    """A batch of short real sentences at every bucket that holds them gives what the
    full-length signature gives, at the real tokens; and what Keras gives in float32."""
    from albert.export.tflite_runner import TFLiteRunner

    _export(checkpoint, tmp_path / "out", "--tflite")
    _, spm, _, sentences = checkpoint
    encoded = encode_texts([(s, None) for s in sentences], SentencePieceTokenizer(spm), SEQ_LENGTH)
    short = np.nonzero(encoded["input_mask"].sum(axis=1) <= 16)[0][:5]
    assert len(short) >= 3
    inputs = {key: value[short] for key, value in encoded.items()}
    lengths = inputs["input_mask"].sum(axis=1)
    results = _run_tflite_without_albert(tmp_path / "out" / "encoder.tflite", inputs, tmp_path)
    assert set(results) == {"length_16", "length_32", "serving_default"}
    full = results["serving_default"]
    for name in ("length_16", "length_32"):
        np.testing.assert_allclose(results[name]["pooled_output"], full["pooled_output"],
                                   atol=1e-5)
        for row, length in enumerate(lengths):
            np.testing.assert_allclose(results[name]["sequence_output"][row, :length],
                                       full["sequence_output"][row, :length], atol=1e-5)
    reference = _float_reference(checkpoint, inputs)
    np.testing.assert_allclose(full["pooled_output"], reference["pooled_output"], atol=1e-4)
    # The runner picks the smallest bucket that holds the batch.
    runner = TFLiteRunner(str(tmp_path / "out" / "encoder.tflite"))
    assert runner.bucket_for(inputs) == 16
    np.testing.assert_allclose(runner(inputs)["pooled_output"], full["pooled_output"], atol=1e-5)


def _check_report_and_file(report, tflite_file, mode, checkpoint, tmp_path):
    _, spm, _, sentences = checkpoint
    assert report["quantization"] == mode
    assert report["file_bytes"] == os.path.getsize(tflite_file)
    assert report["file_bytes"] < report["float32_file_bytes"], report
    # int8 calibrates on the first half and measures on the other half
    assert report["examples"] == (60 if mode == "int8" else 120)
    for name, bound in MAX_ABS_ERROR[mode].items():
        assert 0 < report["outputs"][name]["max_abs_error"] <= bound, (name, report)
    # The file alone, in LiteRT, on sentences it was not calibrated on.
    inputs = encode_texts([(s, None) for s in sentences[60:70]], SentencePieceTokenizer(spm),
                          SEQ_LENGTH)
    results = _run_tflite_without_albert(tflite_file, inputs, tmp_path)
    reference = _float_reference(checkpoint, inputs)
    error = np.abs(results["serving_default"]["pooled_output"] - reference["pooled_output"]).max()
    assert error <= MAX_ABS_ERROR[mode]["pooled_output"], error


@pytest.mark.slow  # ~45-65 s on 2 cores: kept out of the 15-minute default suite
def test_int8_export_is_calibrated_on_the_users_text_and_reports_its_error(checkpoint, tmp_path):
    _, _, calibration, _ = checkpoint
    _export(checkpoint, tmp_path / "out", "--quantize=int8", f"--calibration_file={calibration}")
    report = json.loads((tmp_path / "out" / "quantization_report.json").read_text())
    _check_report_and_file(report, tmp_path / "out" / "encoder.tflite", "int8", checkpoint,
                           tmp_path)


# float16 is in the slow tier (27 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.parametrize("mode", [pytest.param("float16", marks=pytest.mark.slow),
                                  "dynamic_int8"])
def test_weight_quantized_exports_stay_within_their_bounds(checkpoint, tmp_path, mode):
    """The same writer as --quantize, called in-process (no SavedModels around it)."""
    from albert.checkpoints import load_into_model
    from albert.config import AlbertConfig
    from albert.export.hub import write_tflite
    from albert.export.quantization import read_calibration_texts
    from albert.modeling import AlbertEncoder

    ckpt, spm, calibration, _ = checkpoint
    encoder = AlbertEncoder(AlbertConfig.from_json_file(f"{ckpt}/albert_config.json"))
    load_into_model(encoder, ckpt, "tf1")
    os.makedirs(tmp_path / "out")
    write_tflite(encoder, str(tmp_path / "out"), "encoder.tflite", SEQ_LENGTH,
                 ["pooled_output", "sequence_output"], mode,
                 read_calibration_texts(calibration), SentencePieceTokenizer(spm))
    report = json.loads((tmp_path / "out" / "quantization_report.json").read_text())
    _check_report_and_file(report, tmp_path / "out" / "encoder.tflite", mode, checkpoint, tmp_path)


def test_quantization_mistakes_end_with_one_line(checkpoint, tmp_path):
    ckpt, spm, calibration, _ = checkpoint
    base = ["-m", "albert.export", f"--init_checkpoint={ckpt}",
            f"--albert_config_file={ckpt}/albert_config.json", f"--export_dir={tmp_path / 'x'}"]
    no_calibration = run_script(*base, f"--spm_model_file={spm}", "--quantize=int8")
    assert_clean_failure(no_calibration, "--calibration_file")
    no_spm = run_script(*base, "--quantize=dynamic_int8", f"--calibration_file={calibration}")
    assert_clean_failure(no_spm, "--spm_model_file")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    nothing = run_script(*base, f"--spm_model_file={spm}", "--quantize=int8",
                         f"--calibration_file={empty}")
    assert_clean_failure(nothing, "holds no text")
    assert not (tmp_path / "x").exists()


# `slow` (about 30 s, an ONNX export and its run); CI runs it.
@pytest.mark.slow
def test_onnx_export_stores_each_weight_once_and_runs_without_albert(checkpoint, tmp_path):
    """onnxruntime on real sentences, lengths and batch free, equals Keras in float32."""
    import onnx

    ckpt, spm, _, sentences = checkpoint
    _export(checkpoint, tmp_path / "out", "--onnx")
    path = tmp_path / "out" / "encoder.onnx"
    from albert.checkpoints import read_checkpoint
    from albert.checkpoints.naming import backbone_names
    from albert.config import AlbertConfig

    config = AlbertConfig.from_json_file(f"{ckpt}/albert_config.json")
    weights, _ = read_checkpoint(ckpt, "tf1", config)
    encoder_bytes = sum(weights[row.original].nbytes for row in backbone_names(config))
    graph = onnx.load(str(path)).graph
    stored = sum(int(np.prod(init.dims)) * 4 for init in graph.initializer if init.data_type == 1)
    assert 0.95 <= stored / encoder_bytes <= 1.05, (stored, encoder_bytes)

    inputs = encode_texts([(s, None) for s in sentences[:6]], SentencePieceTokenizer(spm),
                          SEQ_LENGTH)
    width = int(inputs["input_mask"].sum(axis=1).max())
    inputs = {key: value[:, :width] for key, value in inputs.items()}   # any length
    np.savez(tmp_path / "inputs.npz", **inputs)
    script = tmp_path / "user_code.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.modules["albert"] = None
        import numpy as np, onnxruntime
        session = onnxruntime.InferenceSession({str(path)!r})
        names = [output.name for output in session.get_outputs()]
        outputs = dict(zip(names, session.run(None, dict(np.load("inputs.npz")))))
        np.savez("outputs.npz", **outputs)
    """))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600, env=dict(os.environ, PYTHONPATH=""))
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = dict(np.load(tmp_path / "outputs.npz"))
    reference = _float_reference(checkpoint, inputs)
    np.testing.assert_allclose(outputs["pooled_output"], reference["pooled_output"], atol=1e-4)
    np.testing.assert_allclose(outputs["sequence_output"], reference["sequence_output"], atol=1e-4)
