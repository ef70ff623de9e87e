"""Pretraining step speed and model FLOP utilisation (MFU) on this machine's accelerator or CPU.

    python benchmarks/accelerator_step.py                       # small, base, large; defaults
    python benchmarks/accelerator_step.py --models=base --seq_length=512 --batch_size=32
    python benchmarks/accelerator_step.py --models=tiny,base --compare_compilation
                                        # before/after of the loop's compilation

Runs the training loop's own device step (`albert.training.replica_step`:
forward, backward, summed gradients, global-norm clip, LAMB) over one fixed
batch fed through `distribute_datasets_from_function`, `--steps` steps per
host call, and reports steps/s, examples/s, achieved matrix-product FLOP/s
(`albert.paper.flops`: 3 x the forward pass's matmuls, a lower bound of
the work) and MFU = achieved / peak:

* on a GPU or TPU, peak is the device's dense peak for the precision from
  `PEAK_TFLOPS` (matched on the device name; unknown devices report no MFU);
* on a CPU, there is no datasheet figure for this machine: peak is the
  float32 (or bfloat16) matmul rate measured in the same run on a
  `[2048, 4096] x [4096, 4096]` product, so MFU says how close the step comes
  to what this CPU's matmul kernel reaches.

Defaults follow the device: bf16 + XLA + 100 steps per call on accelerators;
on CPUs float32 unless the CPU computes bfloat16 natively, XLA off (the
loop's CPU default, measured faster there: `--compare_compilation`).
Each variant runs in its own process (mixed precision is process-wide).
`--compare_compilation` measures, side by side, the step as the loop
compiled it before (XLA on the forward and backward pass only, one step per
call) and now (the whole step in one XLA computation, several steps per
call), and the CPU default without XLA.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# Dense peak TFLOP/s per device (bf16/fp16 tensor cores; float32 without TF32),
# from the vendors' datasheets. Matched on a substring of the device name.
PEAK_TFLOPS = {
    "H200": {"bfloat16": 989.0, "float32": 67.0},
    "H100": {"bfloat16": 989.0, "float32": 67.0},   # SXM; PCIe: 756 / 51
    "A100": {"bfloat16": 312.0, "float32": 19.5},
    "L4": {"bfloat16": 121.0, "float32": 30.3},
    "V100": {"bfloat16": 125.0, "float32": 15.7},   # fp16: V100 has no bfloat16
    "T4": {"bfloat16": 65.0, "float32": 8.1},       # fp16
    "TPU v3": {"bfloat16": 123.0 / 2},              # per core (2 per chip)
    "TPU v4": {"bfloat16": 275.0},                  # per chip (one device)
    "TPU v5 lite": {"bfloat16": 197.0},
    "TPU v5p": {"bfloat16": 459.0},
}
MODELS = {"tiny": "tiny.json", "small": None, "base": "albert_base_v2.json", "large": "albert_large_v2.json",
          "xlarge": "albert_xlarge_v2.json", "xxlarge": "albert_xxlarge_v2.json"}
# `small`: ALBERT-base's shape at a quarter of the width (a quick figure on any device).
SMALL = {"hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
         "embedding_size": 128, "num_hidden_layers": 12}


def model_config(name):
    from albert.config import AlbertConfig

    base = AlbertConfig.from_json_file(os.path.join(REPO, "configs", MODELS[name] or MODELS["base"]))
    if name == "small":
        base = AlbertConfig(**{**base.to_dict(), **SMALL})
    return base


def device_name(tf):
    for kind in ("TPU", "GPU"):
        devices = tf.config.list_logical_devices(kind)
        if devices:
            details = {}
            if kind == "GPU":
                details = tf.config.experimental.get_device_details(
                    tf.config.list_physical_devices("GPU")[0])
            return kind, details.get("device_name", devices[0].name)
    return "CPU", platform.processor() or platform.machine()


def cpu_matmul_peak(tf, dtype):
    """FLOP/s of a large matmul on this CPU (median of 5), the CPU's practical ceiling."""
    left = tf.random.normal([2048, 4096], dtype=tf.float32)
    right = tf.random.normal([4096, 4096], dtype=tf.float32)
    left, right = tf.cast(left, dtype), tf.cast(right, dtype)
    product = tf.function(lambda a, b: tf.matmul(a, b))
    product(left, right).numpy()
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        product(left, right).numpy()
        timings.append(time.perf_counter() - start)
    return 2 * 2048 * 4096 * 4096 / statistics.median(timings)


def measure(args):
    """One variant in this process; prints one JSON line."""
    import keras
    import tensorflow as tf

    from albert.paper.flops import forward_flops
    from albert.pretraining_data.schema import DataContract
    from albert.tasks.pretraining import PretrainingTask
    from albert.training import distribute
    from albert.training.cpu_features import resolve_mixed_precision
    from albert.training.loop import variable_names_for
    from albert.training.optimization import AlbertLossScaleOptimizer, create_optimizer
    from albert.training.replica_step import train_steps_function
    from albert.training.synthetic_batch import synthetic_batch

    strategy = distribute.create_strategy("auto")
    steps_per_loop, jit_compile = distribute.loop_settings(
        strategy, args.steps_per_loop, 1000, None if args.jit < 0 else bool(args.jit))
    kind, name = device_name(tf)
    precision = args.precision
    if precision == "auto":
        precision = "mixed_bfloat16" if kind != "CPU" else resolve_mixed_precision("auto")
    if precision != "none":
        keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    config = model_config(args.model)
    data = DataContract(files=[], record_counts=[], max_seq_length=args.seq_length,
                        max_predictions_per_seq=args.predictions, has_token_boundary=False)
    task = PretrainingTask(config, data)
    with strategy.scope():
        model = task.build_model()
        optimizer = create_optimizer("lamb", 1e-4, 10 ** 6, 0,
                                     variable_names=variable_names_for(model),
                                     gradients_summed_by_caller=True)
        if precision == "mixed_float16":
            optimizer = AlbertLossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    features = synthetic_batch(config, args.batch_size, args.seq_length, args.predictions)
    dataset = strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensors(features).repeat())
    train_steps = train_steps_function(
        task, strategy, model, optimizer, iter(dataset), jit_compile, task.loss_names,
        whole_step=None if args.whole_step < 0 else bool(args.whole_step))
    float(train_steps(tf.constant(steps_per_loop))["loss"][-1])  # trace, compile, warm up
    # Each timing covers the same number of steps whatever the steps per call;
    # every call's losses are read, as the training loop reads them.
    calls = max(1, -(-args.timed_steps // steps_per_loop))
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(calls):
            float(train_steps(tf.constant(steps_per_loop))["loss"][-1])
        timings.append((time.perf_counter() - start) / (calls * steps_per_loop))
    seconds = statistics.median(timings)
    flops = forward_flops(config, args.batch_size, args.seq_length, args.predictions).training
    compute = "bfloat16" if precision != "none" else "float32"
    if kind == "CPU":
        peak = cpu_matmul_peak(tf, tf.bfloat16 if compute == "bfloat16" else tf.float32)
        peak_source = "measured matmul ceiling of this CPU"
    else:
        match = next((figures for key, figures in PEAK_TFLOPS.items() if key in name), None)
        peak = match.get(compute, 0) * 1e12 * strategy.num_replicas_in_sync if match else None
        peak_source = "datasheet" if match else "unknown device"
    achieved = flops / seconds
    print(json.dumps({
        "model": args.model, "device_kind": kind, "device": name,
        "replicas": strategy.num_replicas_in_sync, "precision": precision,
        "jit_compile": jit_compile, "steps_per_loop": steps_per_loop,
        "whole_step": args.whole_step, "batch_size": args.batch_size,
        "seq_length": args.seq_length, "steps_per_second": 1 / seconds,
        "examples_per_second": args.batch_size / seconds,
        "achieved_tflops": achieved / 1e12,
        "peak_tflops": peak / 1e12 if peak else None, "peak_source": peak_source,
        "mfu": achieved / peak if peak else None}))


def run_variant(base, flags):
    result = subprocess.run(base + flags, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="small,base,large")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--precision", default="auto",
                        choices=("auto", "none", "mixed_bfloat16", "mixed_float16"))
    parser.add_argument("--steps_per_loop", type=int, default=None,
                        help="default: the loop's default for the device")
    parser.add_argument("--repeats", type=int, default=3, help="timings per variant (median)")
    parser.add_argument("--timed_steps", type=int, default=20, help="steps per timing")
    parser.add_argument("--compare_compilation", action="store_true",
                        help="before/after of the loop's compilation, side by side")
    parser.add_argument("--output", default=None, help="also write the report here (JSON)")
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--jit", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--whole_step", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model:
        measure(args)
        return

    base = [sys.executable, os.path.abspath(__file__), f"--batch_size={args.batch_size}",
            f"--seq_length={args.seq_length}", f"--predictions={args.predictions}",
            f"--precision={args.precision}", f"--repeats={args.repeats}",
            f"--timed_steps={args.timed_steps}"]
    loop = [] if args.steps_per_loop is None else [f"--steps_per_loop={args.steps_per_loop}"]
    results = []
    for model in args.models.split(","):
        command = base + [f"--model={model}"]
        if args.compare_compilation:
            many = loop or ["--steps_per_loop=10"]
            variants = {
                "before: XLA on forward+backward, 1 step per call":
                    ["--jit=1", "--whole_step=0", "--steps_per_loop=1"],
                "after: whole step in one XLA computation, several steps per call":
                    ["--jit=1", "--whole_step=1", *many],
                "no XLA, 1 step per call (CPU default)": ["--jit=0", "--steps_per_loop=1"],
                "no XLA, several steps per call": ["--jit=0", *many]}
        else:
            variants = {"default": loop}
        for variant, flags in variants.items():
            result = dict(run_variant(command, flags), variant=variant)
            print(json.dumps(result), flush=True)
            results.append(result)
    report = {"command": " ".join(sys.argv), "results": results}
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
