"""Speed of the exported models: text → preprocessor → encoder, and TFLite for one sequence.

    python benchmarks/export_speed.py            # ALBERT-base v2 shape, seq_length 128

Data: the 200 movie-review sentences of Pang & Lee's polarity data (in the
gensim wheel), a SentencePiece model trained on the demo corpus, an
ALBERT-base model with random weights exported by `python -m albert.export
--tflite`.

Sentences/s from raw strings to `pooled_output`, batch 32, interleaved rounds:
* exported: `preprocessor(strings)` then `encoder(inputs)` of the SavedModels
  (tensorflow-text tokenization in the graph), as a TF-Hub user runs them;
* Python: this package's `SentencePieceTokenizer` and feature conversion,
  then `AlbertEncoder` in a `tf.function`.
Latency of one sentence: `encoder.tflite` through `TFLiteRunner` (LiteRT,
XNNPACK, threads = cores available) at the full 128 positions and at the
smallest length bucket that holds it, vs the SavedModel encoder's `serve` at 128;
then the same sentence through the quantised files (`--quantize` float16,
dynamic_int8, and int8 calibrated on held-out demo-corpus text), each at its
bucket. File sizes: each `.tflite` and the SavedModel's variables, with the
ratios the export goals are stated in (int8 latency / SavedModel latency, int8
file / float32 file) and each quantised file's `quantization_report.json`
errors against float32.

    python benchmarks/export_speed.py --output=benchmarks/results/export_speed/base_128.json
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from report_output import print_and_write

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


QUANTIZED_MODES = ("float16", "dynamic_int8", "int8")


def prepare(work_dir: str, config_path: str, seq_length: int):
    """(export dir, spm model, sentences, {mode: quantised export dir}): exports one
    random-weight model once, float32 and in every quantised mode."""
    from albert.checkpoints import model_weights
    from albert.config import AlbertConfig
    from albert.datasets import sources
    from albert.datasets.demo_corpus import build_demo_corpus
    from albert.datasets.glue_demo import polarity_sentences
    from albert.export.hub import export_hub_models
    from albert.modeling import AlbertEncoder
    from albert.tokenization import SentencePieceTokenizer
    from albert.tokenization.training import train_sentencepiece

    corpus = os.path.join(work_dir, "corpus")
    build_demo_corpus(corpus)
    prefix = os.path.join(work_dir, "spm8000")
    if not os.path.exists(prefix + ".model"):
        train_sentencepiece([os.path.join(corpus, "train.txt")], prefix, vocab_size=8000)
    sentences = [s for s, _ in polarity_sentences(sources.gensim_file(sources.PANG_LEE_POLARITY))]
    export_dir = os.path.join(work_dir, "export")
    config = AlbertConfig.from_json_file(config_path)
    weights_file = os.path.join(work_dir, "weights.npz")
    if not os.path.exists(weights_file):
        np.savez(weights_file, **model_weights(AlbertEncoder(config)))
    weights = dict(np.load(weights_file))
    tokenizer = SentencePieceTokenizer(prefix + ".model")
    if not os.path.exists(os.path.join(export_dir, "encoder.tflite")):
        export_hub_models(config, weights, tokenizer, prefix + ".model",
                          export_dir, seq_length, overwrite=True, tflite=True)
    with open(os.path.join(corpus, "heldout.txt"), encoding="utf-8") as handle:
        calibration = [(line, None) for line in handle.read().split("\n") if line.strip()][:400]
    quantized = {}
    for mode in QUANTIZED_MODES:
        quantized[mode] = os.path.join(work_dir, f"export_{mode}")
        # The report is written last: without it the export did not finish.
        if not os.path.exists(os.path.join(quantized[mode], "quantization_report.json")):
            export_hub_models(config, weights, tokenizer, prefix + ".model", quantized[mode],
                              seq_length, overwrite=True, tflite=True, quantization=mode,
                              calibration_texts=calibration)
    return export_dir, prefix + ".model", sentences, quantized


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency_runs", type=int, default=20)
    parser.add_argument("--output", default=None, help="also write the report here (JSON)")
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                          "albert-export-bench"))
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    export_dir, spm, sentences, quantized = prepare(args.work_dir, args.config, args.seq_length)

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the preprocessor's ops)

    from albert.checkpoints import load_into_model
    from albert.config import AlbertConfig
    from albert.finetuning_data.glue import TASKS, InputExample, convert_example
    from albert.modeling import AlbertEncoder
    from albert.tokenization import SentencePieceTokenizer

    preprocessor = tf.saved_model.load(os.path.join(export_dir, "preprocessor"))
    saved_encoder = tf.saved_model.load(os.path.join(export_dir, "encoder"))
    encoder = AlbertEncoder(AlbertConfig.from_json_file(args.config))
    load_into_model(encoder, os.path.join(export_dir, "encoder"))
    tokenizer = SentencePieceTokenizer(spm)
    encode = tf.function(lambda inputs: encoder(inputs, training=False)["pooled_output"])
    batches = [sentences[i:i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]

    def exported_path():
        for batch in batches:
            saved_encoder(preprocessor(tf.constant(batch)), training=False)["pooled_output"].numpy()

    def python_path():
        for batch in batches:
            features = [convert_example(InputExample("0", tokenizer.preprocess(s), None, "0"),
                                        TASKS["sst-2"], args.seq_length, tokenizer) for s in batch]
            encode({"input_word_ids": tf.constant([f.input_ids for f in features]),
                    "input_mask": tf.constant([f.input_mask for f in features]),
                    "input_type_ids": tf.constant([f.segment_ids for f in features])}).numpy()

    timings = {"exported": [], "python": []}
    exported_path(), python_path()   # warm up (tracing)
    for _ in range(args.rounds):
        for name, run in (("exported", exported_path), ("python", python_path)):
            start = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - start)

    from albert.export.tflite_runner import TFLiteRunner

    runner = TFLiteRunner(os.path.join(export_dir, "encoder.tflite"))   # threads: cores available
    one = preprocessor(tf.constant(sentences[:1]))
    one_np = {name: value.numpy() for name, value in one.items()}
    calls = {"tflite_full_length": lambda: runner(one_np, length=args.seq_length),
             "tflite_bucketed": lambda: runner(one_np),
             "savedmodel": lambda: saved_encoder.serve(one)["pooled_output"].numpy()}
    runners = {mode: TFLiteRunner(os.path.join(directory, "encoder.tflite"))
               for mode, directory in quantized.items()}
    for mode, quantized_runner in runners.items():
        calls[f"tflite_{mode}_bucketed"] = (lambda r: lambda: r(one_np))(quantized_runner)
    latencies = {name: [] for name in calls}
    for call in calls.values():
        call()   # warm up
    for _ in range(args.latency_runs):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            latencies[name].append(time.perf_counter() - start)

    report = {
        "sentences": len(sentences), "seq_length": args.seq_length, "batch_size": args.batch_size,
        "tflite_threads": runner.num_threads, "tflite_bucket_of_the_sentence": runner.bucket_for(one_np),
        "sentences_per_second": {name: round(len(sentences) / statistics.median(values), 2)
                                 for name, values in timings.items()},
        "one_sequence_latency_ms": {name: round(1000 * statistics.median(values), 1)
                                    for name, values in latencies.items()},
    }
    files = {"float32": os.path.join(export_dir, "encoder.tflite"),
             **{mode: os.path.join(directory, "encoder.tflite")
                for mode, directory in quantized.items()}}
    report["tflite_bytes"] = {mode: os.path.getsize(path) for mode, path in files.items()}
    report["savedmodel_variables_bytes"] = directory_bytes(
        os.path.join(export_dir, "encoder", "variables"))
    latency = report["one_sequence_latency_ms"]
    report["ratios"] = {
        **{f"tflite_{mode}_latency_vs_savedmodel": round(
            latency[f"tflite_{mode}_bucketed"] / latency["savedmodel"], 3)
           for mode in quantized},
        "tflite_float32_latency_vs_savedmodel": round(
            latency["tflite_bucketed"] / latency["savedmodel"], 3),
        **{f"tflite_{mode}_bytes_vs_float32": round(
            report["tflite_bytes"][mode] / report["tflite_bytes"]["float32"], 3)
           for mode in quantized}}
    report["quantization_errors"] = {}
    for mode, directory in quantized.items():
        with open(os.path.join(directory, "quantization_report.json"), encoding="utf-8") as f:
            quantization_report = json.load(f)
        report["quantization_errors"][mode] = {
            key: quantization_report[key] for key in ("examples", "outputs")}
    print_and_write(report, args.output)


if __name__ == "__main__":
    main()
