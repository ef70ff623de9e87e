"""Where a small pretraining step's time goes on this CPU, and what buys steps.

    python benchmarks/pretraining_step_profile.py --input_file=demo-train.tfrecord \
        --config=demo_config.json --batch_size=64 --steps=300

Every variant is the real command, `run_pretraining.py --do_train` on the
same records (input pipeline, training-log lines and TensorBoard scalars
included), run for `--steps` steps into a fresh directory; its steady-state
time per step is the median over the logged loops after the first (which
traces and compiles). Beside them, `graph only` is the same training step fed
one constant batch from memory (`benchmarks/pretraining_speed.py`'s own
measurement): no input pipeline, no host work between steps. The gap between
that and the real command is what is not the model's arithmetic.

Variants: steps per call into the graph 1 (the default) vs 50; XLA
(`--jit_compile`) on and off; `--mixed_precision=mixed_bfloat16` only where
this CPU reports native bfloat16 arithmetic (`albert.training.cpu_features`),
otherwise listed as skipped. Variants alternate over `--rounds` rounds, all in
one process tree on one machine, so their figures compare with each other
only. The machine's load average is recorded with the results: figures taken
while other jobs ran are slower, but alternating rounds keeps the comparison
between variants fair.

Writes `--output` (JSON) with per-variant ms/step, steps/s, and the speed-up
over the default command.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from albert.training.cpu_features import cpu_features, has_native_bfloat16  # noqa: E402


def command_variants(native_bfloat16):
    """name -> extra run_pretraining.py flags (None: skipped on this CPU, with why)."""
    variants = {
        "default (1 step per call)": ["--steps_per_loop=1"],
        "50 steps per call": ["--steps_per_loop=50"],
        "50 steps per call + XLA": ["--steps_per_loop=50", "--jit_compile"],
    }
    for name, extra in (("50 steps per call + bf16", []),
                        ("50 steps per call + XLA + bf16", ["--jit_compile"])):
        variants[name] = (["--steps_per_loop=50", "--mixed_precision=mixed_bfloat16", *extra]
                          if native_bfloat16 else None)
    return variants


def run_command(args, extra):
    """Steady-state seconds per step of one real run_pretraining.py run."""
    with tempfile.TemporaryDirectory(prefix="step-profile-") as directory:
        output_dir = os.path.join(directory, "run")
        command = [sys.executable, os.path.join(REPO, "run_pretraining.py"),
                   f"--albert_config_file={args.config}", f"--input_file={args.input_file}",
                   f"--output_dir={output_dir}", "--do_train", f"--num_train_steps={args.steps}",
                   f"--train_batch_size={args.batch_size}",
                   f"--save_checkpoints_steps={args.steps}", "--keep_checkpoint_max=1",
                   f"--optimizer={args.optimizer}", f"--learning_rate={args.learning_rate}",
                   f"--num_warmup_steps={args.steps // 10}", "--noprogress", *extra]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            raise RuntimeError(completed.stderr[-3000:])
        with open(os.path.join(output_dir, "train_log.jsonl"), encoding="utf-8") as handle:
            log = [json.loads(line) for line in handle]
    # Rows of one call share examples_per_second; skip the first call's rows (tracing, XLA
    # compilation) and, with one step per call, the first 20 steps.
    skip = max(20, next(i for i, row in enumerate(log)
                        if row["examples_per_second"] != log[0]["examples_per_second"]))
    seconds = [args.batch_size / row["examples_per_second"] for row in log[skip:]]
    return statistics.median(seconds)


def run_graph_only(args):
    """The training step on one constant in-memory batch (benchmarks/pretraining_speed.py)."""
    summary_path = args.input_file + ".summary.json"
    with open(summary_path, encoding="utf-8") as handle:
        summary = json.load(handle)
    command = [sys.executable, os.path.join(REPO, "benchmarks", "pretraining_speed.py"),
               f"--config={args.config}", f"--batch_size={args.batch_size}",
               f"--seq_length={summary['max_seq_length']}",
               f"--predictions={summary['max_predictions_per_seq']}", "--steps=50",
               "--repeats=3", "--impl=ours", "--jit=0"]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(completed.stderr[-3000:])
    return json.loads(completed.stdout.strip().splitlines()[-1])["seconds_per_step"]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_file", required=True,
                        help="records written by create_pretraining_data.py (with its summary)")
    parser.add_argument("--config", required=True, help="an albert_config.json")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--optimizer", default="lamb")
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--output", default=None, help="JSON results (default: print only)")
    args = parser.parse_args()

    features = cpu_features()
    native = has_native_bfloat16(features)
    variants = command_variants(native)
    seconds = {name: [] for name, extra in variants.items() if extra is not None}
    seconds["graph only (constant batch, 50 steps per call)"] = []
    loads = []
    for round_index in range(args.rounds):
        for name, extra in variants.items():
            if extra is None:
                continue
            seconds[name].append(run_command(args, extra))
            loads.append(os.getloadavg()[0])
            print(f"round {round_index + 1}: {name}: {seconds[name][-1] * 1000:.1f} ms/step",
                  flush=True)
        seconds["graph only (constant batch, 50 steps per call)"].append(run_graph_only(args))
        loads.append(os.getloadavg()[0])
    default = statistics.median(seconds["default (1 step per call)"])
    results = {}
    for name, values in seconds.items():
        median = statistics.median(values)
        results[name] = {"ms_per_step": median * 1000, "steps_per_second": 1 / median,
                         "speedup_over_default": default / median,
                         "ms_per_step_each_round": [v * 1000 for v in values]}
    report = {"command": " ".join(sys.argv), "batch_size": args.batch_size, "steps": args.steps,
              "cpu_features": sorted(features & {"avx2", "avx512f", "avx512_bf16", "amx_bf16",
                                                 "amx_tile", "avx512_vnni"}),
              "native_bfloat16": native,
              "skipped": {name: "this CPU reports no native bfloat16 arithmetic"
                          for name, extra in variants.items() if extra is None},
              "load_average_1min_after_each_run": loads, "results": results}
    print(json.dumps(report, indent=2))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
