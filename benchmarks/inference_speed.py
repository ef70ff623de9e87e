"""Classifier inference on short real sentences: ours (Keras, TFLite float / quantised) vs
Hugging Face at its best CPU configuration, float32 and int8, side by side in one run.

    python benchmarks/inference_speed.py                     # ALBERT-base, max_seq_length 128
    python benchmarks/inference_speed.py --max_seq_length=512 --output=results.json

Data: the 200 movie-review sentences of Pang & Lee's polarity data (in the
gensim wheel; SST-2's domain and lengths), tokenized as SST-2 features with a
SentencePiece model trained on the demo corpus. One random-weight
`AlbertClassifier` (2 labels), the same weights in every implementation
(converted with our name table).

Examples/s over all sentences, each implementation in its own process (rounds
interleaved; the median of `--passes` timed passes per process, then of the
rounds), batch `--batch_size`:
* `ours_keras`: the fine-tuning scripts' evaluation path (`bucketed_logits`:
  batches of similar length cut to their longest example).
* `ours_keras_full`: the same batches through the whole model (no `logits_only`:
  the last block computes every position, as Hugging Face does), to measure
  what `logits_only` saves in the same run.
* `ours_keras_xla`: the same with `--jit_compile` (XLA; lengths rounded up to
  multiples of 32 so few programs are compiled).
* `ours_keras_bf16`: the same under `--mixed_precision=mixed_bfloat16` (bfloat16
  matmuls, float32 softmax and layer norm), only on CPUs with native bfloat16.
* `ours_tflite_<mode>`: `python -m albert.export --task=classifier` TFLite
  files (`none`, `dynamic_int8`, `int8` calibrated on held-out demo-corpus
  text, `float16`) run by `TFLiteRunner` (threads = cores available) on the
  same sorted batches, each at the smallest length bucket that holds it.
* `hf_sorted_sdpa`: `AlbertForSequenceClassification` (SDPA attention), batches
  sorted by length and padded to their longest — what `group_by_length` and
  dynamic padding give, its fastest float32 CPU setting here.
* `hf_sorted_sdpa_bf16`: the same under `torch.autocast("cpu", torch.bfloat16)`,
  its bfloat16 CPU setting, only on CPUs with native bfloat16.
* `hf_sorted_int8`: the same after `torch.ao.quantization.quantize_dynamic`
  (int8 `nn.Linear`), its standard CPU int8.
Each implementation's prediction agreement and largest logit difference with
`ours_keras` are reported beside its rate (random weights: logits are small, so
the difference says more than the agreement), and the CPU's features (AVX-512, VNNI, AMX) with it: compare
figures measured in the same run only.

How close each float forward is to the hardware: `matmul_gflops_per_second`
divides the matmul arithmetic each implementation does on these batches
(counted from the config and the batch widths; `ours_keras` skips most of the
last block) by its time, and `matmul_ceiling_gflops_per_second` is one
`[256, H] x [H, I]` float32 matmul repeated in each framework's usual way, in the
same run: TensorFlow, 50 matmuls on different left operands in one traced
function (its executor may overlap them); PyTorch, 50 eager calls. An
implementation near its ceiling gets faster only by doing less work.
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from report_output import print_and_write

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

TFLITE_MODES = ("none", "dynamic_int8", "int8", "float16")
IMPLEMENTATIONS = ("ours_keras", "ours_keras_full", "ours_keras_xla", "ours_keras_bf16",
                   *(f"ours_tflite_{mode}" for mode in TFLITE_MODES),
                   "hf_sorted_sdpa", "hf_sorted_sdpa_bf16", "hf_sorted_int8")
# Measured only where the CPU computes bfloat16 in hardware (emulated, it is slower than float32).
BFLOAT16_IMPLEMENTATIONS = ("ours_keras_bf16", "hf_sorted_sdpa_bf16")
# Float32 matmul throughput of each framework alone, measured beside the implementations.
CEILINGS = ("tf_matmul", "torch_matmul")
# Implementations that run exactly the sorted batches' widths (the FLOP count applies).
EXACT_WIDTH_IMPLEMENTATIONS = ("ours_keras", "ours_keras_full", "ours_keras_bf16",
                               "hf_sorted_sdpa", "hf_sorted_sdpa_bf16")
# Those whose last block computes token 0 alone (`bucketed_logits`, `logits_only`).
TOKEN0_IMPLEMENTATIONS = ("ours_keras", "ours_keras_bf16")


def prepare(work_dir: str, max_seq_length: int, config_path: str):
    """(features .npz, checkpoint dir, spm model, calibration file), made once per work_dir."""
    from albert.checkpoints import model_weights, write_checkpoint
    from albert.config import AlbertConfig
    from albert.finetuning_data.glue import TASKS, InputExample, convert_examples
    from albert.datasets import sources
    from albert.datasets.demo_corpus import build_demo_corpus
    from albert.datasets.glue_demo import polarity_sentences
    from albert.modeling import AlbertClassifier
    from albert.tokenization import SentencePieceTokenizer
    from albert.tokenization.training import train_sentencepiece

    import keras

    corpus = os.path.join(work_dir, "corpus")
    build_demo_corpus(corpus)
    spm = os.path.join(work_dir, "spm8000")
    if not os.path.exists(spm + ".model"):
        train_sentencepiece([os.path.join(corpus, "train.txt")], spm, vocab_size=8000)
    tokenizer = SentencePieceTokenizer(spm + ".model")
    features_path = os.path.join(work_dir, f"features_{max_seq_length}.npz")
    if not os.path.exists(features_path):
        sentences = polarity_sentences(sources.gensim_file(sources.PANG_LEE_POLARITY))
        examples = [InputExample(str(i), tokenizer.preprocess(text), None, str(label))
                    for i, (text, label) in enumerate(sentences)]
        features = convert_examples(examples, TASKS["sst-2"], max_seq_length, tokenizer)
        np.savez(features_path,
                 input_word_ids=np.array([f.input_ids for f in features], np.int32),
                 input_mask=np.array([f.input_mask for f in features], np.int32),
                 input_type_ids=np.array([f.segment_ids for f in features], np.int32))
    calibration = os.path.join(work_dir, "calibration.txt")
    if not os.path.exists(calibration):
        with open(os.path.join(corpus, "heldout.txt"), encoding="utf-8") as handle:
            lines = [line for line in handle.read().split("\n") if line.strip()][:400]
        with open(calibration, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    checkpoint = os.path.join(work_dir, "classifier")
    if not os.path.exists(os.path.join(checkpoint, "albert_config.json")):
        keras.utils.set_random_seed(0)
        config = AlbertConfig.from_json_file(config_path)
        model = AlbertClassifier(config, num_labels=2)
        write_checkpoint(model_weights(model), config, checkpoint, "tf1")
    return features_path, checkpoint, spm + ".model", calibration


def sorted_batches(features, batch_size):
    """Row indices in batches of similar length (sorted by length), and each batch's width."""
    lengths = features["input_mask"].sum(axis=1)
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        yield rows, int(lengths[rows].max())


def matmul_flops(config_path: str, features, batch_size: int, token0_last_block: bool,
                 always_projects: bool) -> int:
    """Multiply-add FLOPs (2 per MAC) of the classifier's matmuls on the sorted batches:
    embedding projection, every block application's projections, attention scores and
    context, feed-forward, pooler. With `token0_last_block` the last block's query, output,
    scores, context and feed-forward run on token 0 alone. Ours has no projection when
    E = H; Hugging Face's (`always_projects`) keeps it."""
    from albert.config import AlbertConfig
    from albert.modeling.sharing import sharing_plan

    config = AlbertConfig.from_json_file(config_path)
    hidden, inner = config.hidden_size, config.intermediate_size
    embedding = config.embedding_size
    blocks = len(sharing_plan(config).schedule)
    total = 0
    for rows, width in sorted_batches(features, batch_size):
        projects = always_projects or embedding != hidden
        macs = width * embedding * hidden if projects else 0
        full_block = 4 * width * hidden ** 2 + 2 * width ** 2 * hidden + 2 * width * hidden * inner
        if token0_last_block:
            last_block = 2 * width * hidden ** 2 + 2 * hidden ** 2 + 2 * width * hidden \
                + 2 * hidden * inner
            macs += (blocks - 1) * full_block + last_block
        else:
            macs += blocks * full_block
        macs += hidden ** 2   # pooler
        total += 2 * len(rows) * macs
    return total


def matmul_ceiling(framework: str, config: dict, repeats: int = 50) -> dict:
    """GFLOP/s of a `[256, H] x [H, I]` float32 matmul repeated (median of 5 timings)."""
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    if framework == "tf_matmul":
        import tensorflow as tf

        # A different left operand each time: the graph optimiser would compute repeats of
        # one identical matmul once.
        lefts, right = tf.random.normal([repeats, 256, hidden]), tf.random.normal([hidden, inner])

        @tf.function
        def repeated(lefts):
            return [tf.matmul(left, right) for left in tf.unstack(lefts)]

        def run():
            for product in repeated(lefts):
                product.numpy()
    else:
        import torch

        left, right = torch.randn(256, hidden), torch.randn(hidden, inner)

        def run():
            with torch.no_grad():
                for _ in range(repeats):
                    torch.matmul(left, right)

    run()
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return {"gflops_per_second": 2 * 256 * hidden * inner * repeats
            / statistics.median(timings) / 1e9}


def tflite_file(args, checkpoint, spm, calibration, mode) -> str:
    directory = os.path.join(args.work_dir, f"export_{args.max_seq_length}_{mode}")
    path = os.path.join(directory, "classifier.tflite")
    if not os.path.exists(path):
        command = [sys.executable, "-m", "albert.export", f"--init_checkpoint={checkpoint}",
                   f"--albert_config_file={checkpoint}/albert_config.json",
                   f"--spm_model_file={spm}", f"--export_dir={directory}",
                   "--task=classifier", f"--seq_length={args.max_seq_length}",
                   f"--quantize={mode}", "--tflite", f"--calibration_file={calibration}",
                   # The benchmark's own scratch directory: an export stopped half-way is redone.
                   "--overwrite"]
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-3000:])
    return path


def run_implementation(args):
    """{"rate": examples/s, "logits": [...], ...} of one implementation, in this process."""
    if args.impl in CEILINGS:
        with open(args.config, encoding="utf-8") as handle:
            return matmul_ceiling(args.impl, json.load(handle))
    features_path, checkpoint, spm, calibration = prepare(args.work_dir, args.max_seq_length,
                                                         args.config)
    features = dict(np.load(features_path))
    total = len(features["input_mask"])
    logits_out = np.zeros([total, 2], np.float32)
    extra = {}

    if args.impl in BFLOAT16_IMPLEMENTATIONS:
        from albert.training.cpu_features import has_native_bfloat16

        if not has_native_bfloat16():
            return {"skipped": "this CPU has no native bfloat16"}
    if args.impl.startswith("ours_keras"):
        from albert.checkpoints import load_into_model
        from albert.config import AlbertConfig
        from albert.modeling import AlbertClassifier
        from albert.tasks.finetuning import bucketed_logits, bucketed_outputs

        import keras

        if args.impl == "ours_keras_bf16":
            keras.mixed_precision.set_global_policy("mixed_bfloat16")
        jit_compile = args.impl == "ours_keras_xla"
        model = AlbertClassifier(AlbertConfig.from_json_file(f"{checkpoint}/albert_config.json"),
                                 num_labels=2)
        load_into_model(model, checkpoint, "tf1")

        def run():
            if args.impl == "ours_keras_full":
                logits_out[:] = bucketed_outputs(model, features, args.batch_size,
                                                 jit_compile)["logits"]
            else:
                logits_out[:] = bucketed_logits(model, features, args.batch_size, jit_compile)
    elif args.impl.startswith("ours_tflite_"):
        from albert.export.tflite_runner import TFLiteRunner

        path = tflite_file(args, checkpoint, spm, calibration, args.impl[len("ours_tflite_"):])
        runner = TFLiteRunner(path)
        extra = {"file_bytes": os.path.getsize(path), "threads": runner.num_threads}

        def run():
            for rows, _ in sorted_batches(features, args.batch_size):
                logits_out[rows] = runner({k: v[rows] for k, v in features.items()})["logits"]
    else:
        import torch
        import transformers

        from albert.checkpoints import read_checkpoint, write_checkpoint
        from albert.config import AlbertConfig

        config = AlbertConfig.from_json_file(f"{checkpoint}/albert_config.json")
        weights, _ = read_checkpoint(checkpoint, "tf1", config, heads="required",
                                     head="classifier")
        directory = tempfile.mkdtemp()
        write_checkpoint(weights, config, directory, "hf", head="classifier")
        model = transformers.AlbertForSequenceClassification.from_pretrained(
            directory, attn_implementation="sdpa")
        model.eval()
        if args.impl == "hf_sorted_int8":
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                           dtype=torch.qint8)
        extra = {"torch_threads": torch.get_num_threads()}

        precision = (torch.autocast("cpu", dtype=torch.bfloat16)
                     if args.impl == "hf_sorted_sdpa_bf16" else contextlib.nullcontext())

        def run():
            with torch.no_grad(), precision:
                for rows, width in sorted_batches(features, args.batch_size):
                    logits = model(**{name: torch.tensor(features[key][rows][:, :width],
                                                         dtype=torch.long)
                                      for name, key in (("input_ids", "input_word_ids"),
                                                        ("attention_mask", "input_mask"),
                                                        ("token_type_ids", "input_type_ids"))}
                                   ).logits
                    logits_out[rows] = logits.float().numpy()

    run()   # warm-up: tracing, allocation
    timings = []
    for _ in range(args.passes):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return dict(extra, rate=total / statistics.median(timings), logits=logits_out.tolist())


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=1,
                        help="timed passes over the sentences per process (median taken)")
    parser.add_argument("--implementations", default=",".join(IMPLEMENTATIONS))
    parser.add_argument("--matmul_ceiling", type=lambda text: text.lower() != "false",
                        default=True, help="also measure each framework's matmul ceiling")
    parser.add_argument("--output", default=None, help="also write the report here (JSON)")
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                           "albert-inference-bench"))
    parser.add_argument("--impl", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.work_dir = os.path.abspath(args.work_dir)   # exports run from the repository
    os.makedirs(args.work_dir, exist_ok=True)
    if args.impl:
        print(json.dumps(run_implementation(args)))
        return
    from albert.training.cpu_features import cpu_features

    names = args.implementations.split(",")
    ceilings = list(CEILINGS) if args.matmul_ceiling else []
    base = [sys.executable, os.path.abspath(__file__), f"--config={args.config}",
            f"--max_seq_length={args.max_seq_length}", f"--batch_size={args.batch_size}",
            f"--passes={args.passes}",
            f"--work_dir={args.work_dir}"]
    runs = {name: [] for name in names + ceilings}
    for round_index in range(args.rounds):
        for name in names + ceilings:
            if runs[name] and "skipped" in runs[name][0]:
                continue
            output = subprocess.run(base + [f"--impl={name}"], capture_output=True, text=True)
            if output.returncode != 0:
                raise RuntimeError(f"{name}: {output.stderr[-3000:]}")
            runs[name].append(json.loads(output.stdout.strip().splitlines()[-1]))
            if "skipped" in runs[name][-1]:
                print(f"{name}: skipped, {runs[name][-1]['skipped']}", file=sys.stderr)
                continue
            figure = (f"{runs[name][-1]['gflops_per_second']:.1f} GFLOP/s" if name in ceilings
                      else f"{runs[name][-1]['rate']:.1f} examples/s")
            print(f"round {round_index + 1}/{args.rounds} {name}: {figure}", file=sys.stderr,
                  flush=True)
    measured = [name for name in names if "skipped" not in runs[name][0]]
    reference = np.array(runs[measured[0]][0]["logits"])
    report = {"config": os.path.basename(args.config), "max_seq_length": args.max_seq_length,
              "batch_size": args.batch_size, "rounds": args.rounds, "passes": args.passes,
              "cpu_features": sorted(f for f in cpu_features()
                                     if f.startswith(("avx512", "amx", "avx2", "avx_vnni"))),
              "examples_per_second": {}, "examples_per_second_by_round": {},
              "compared_with": measured[0], "prediction_agreement": {},
              "max_abs_logit_difference": {}, "details": {}}
    skipped = [name for name in names if "skipped" in runs[name][0]]
    report["skipped"] = {name: runs[name][0]["skipped"] for name in skipped}
    for name in names:
        if name in skipped:
            continue
        report["examples_per_second"][name] = round(statistics.median(
            run["rate"] for run in runs[name]), 2)
        report["examples_per_second_by_round"][name] = [round(run["rate"], 2)
                                                        for run in runs[name]]
        logits = np.array(runs[name][0]["logits"])
        report["prediction_agreement"][name] = float(np.mean(
            logits.argmax(-1) == reference.argmax(-1)))
        report["max_abs_logit_difference"][name] = float(np.abs(logits - reference).max())
        report["details"][name] = {key: value for key, value in runs[name][0].items()
                                   if key not in ("rate", "logits")}
    rates = report["examples_per_second"]
    if ceilings:
        report["matmul_ceiling_gflops_per_second"] = {name: round(statistics.median(
            run["gflops_per_second"] for run in runs[name]), 1) for name in ceilings}
        report["matmul_ceiling_gflops_per_second_by_round"] = {
            name: [round(run["gflops_per_second"], 1) for run in runs[name]]
            for name in ceilings}
    features = dict(np.load(os.path.join(args.work_dir, f"features_{args.max_seq_length}.npz")))
    report["matmul_gflops_per_second"] = {
        name: round(matmul_flops(args.config, features, args.batch_size,
                                 name in TOKEN0_IMPLEMENTATIONS, name.startswith("hf_"))
                    * rates[name] / len(features["input_mask"]) / 1e9, 1)
        for name in EXACT_WIDTH_IMPLEMENTATIONS if name in rates}
    for ours, peer in (("ours_keras", "hf_sorted_sdpa"), ("ours_keras_full", "hf_sorted_sdpa"),
                       ("ours_keras", "ours_keras_full"), ("ours_keras_xla", "hf_sorted_sdpa"),
                       ("ours_keras_bf16", "hf_sorted_sdpa"),
                       ("ours_keras_bf16", "hf_sorted_sdpa_bf16"),
                       ("ours_tflite_none", "hf_sorted_sdpa"),
                       ("ours_tflite_dynamic_int8", "hf_sorted_int8"),
                       ("ours_tflite_int8", "hf_sorted_int8")):
        if ours in rates and peer in rates:
            report[f"{ours}_vs_{peer}"] = round(rates[ours] / rates[peer], 3)
    print_and_write(report, args.output)


if __name__ == "__main__":
    main()
