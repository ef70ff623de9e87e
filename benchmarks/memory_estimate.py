"""Peak memory of real training steps against `python -m albert.memory`'s estimate (CPU).

    python benchmarks/memory_estimate.py --output=benchmarks/results/memory_estimate/cpu.json

For each shape, runs the training loop's device step (`albert.training.replica_step`,
float32, LAMB) for two steps in a fresh process at two batch sizes, with and without
`--rematerialize`, and reads the process's peak resident memory (`peak_rss_bytes`). The
difference between the two batch sizes divided by the difference in examples is the
measured memory per example — what the estimate's `activations_per_example` predicts —
free of the constant cost of the runtime, the graph and the weights. Also reports the
time per step (the cost of rematerialisation) at the larger batch.
"""

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from accelerator_step import run_variant  # noqa: E402

SHAPES = {  # name: (config file, sequence length, predictions, two batch sizes)
    "tiny-128": ("tiny.json", 128, 20, (32, 128)),
    "base-128": ("albert_base_v2.json", 128, 20, (4, 16)),
    "base-512": ("albert_base_v2.json", 512, 20, (2, 8)),
}


def measure(args):
    import keras
    import numpy as np
    import tensorflow as tf

    from albert.config import AlbertConfig
    from albert.modeling.encoder import set_rematerialization
    from albert.pretraining_data.schema import DataContract
    from albert.tasks.pretraining import PretrainingTask
    from albert.training.loop import variable_names_for
    from albert.training.optimization import create_optimizer
    from albert.training.replica_step import train_steps_function
    from albert.training.synthetic_batch import synthetic_batch

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_json_file(os.path.join(REPO, "configs", args.config))
    data = DataContract(files=[], record_counts=[], max_seq_length=args.seq_length,
                        max_predictions_per_seq=args.predictions, has_token_boundary=False)
    task = PretrainingTask(config, data)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = task.build_model()
        if args.rematerialize:
            set_rematerialization(model)
        optimizer = create_optimizer("lamb", 1e-4, 100, 0, variable_names=variable_names_for(model),
                                     gradients_summed_by_caller=True)
        optimizer.build(model.trainable_variables)
    features = synthetic_batch(config, args.batch_size, args.seq_length, args.predictions)
    dataset = strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensors(features).repeat())
    train_steps = train_steps_function(task, strategy, model, optimizer, iter(dataset), False,
                                       task.loss_names)
    float(train_steps(tf.constant(1))["loss"][0])
    start = time.perf_counter()
    float(train_steps(tf.constant(1))["loss"][0])
    seconds = time.perf_counter() - start
    peak = peak_rss_bytes()
    print(json.dumps({"peak_bytes": peak, "seconds_per_step": seconds, "finite": bool(
        np.isfinite(seconds))}))


def peak_rss_bytes() -> int:
    """This process's peak resident memory since it started its program.

    Linux's ru_maxrss outlives exec: a process forked from a large parent (a test
    runner holding TensorFlow models) reports the parent's size as its own peak.
    VmHWM belongs to the program's own address space, made at exec.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--output", default=None)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--seq_length", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--predictions", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--batch_size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rematerialize", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.config:
        measure(args)
        return

    from albert.config import AlbertConfig
    from albert.memory import estimate

    results = []
    for name in args.shapes.split(","):
        config_file, seq_length, predictions, batches = SHAPES[name]
        config = AlbertConfig.from_json_file(os.path.join(REPO, "configs", config_file))
        expected = estimate(config, seq_length, predictions)
        for rematerialize in (0, 1):
            peaks = {}
            for batch in batches:
                peaks[batch] = run_variant([sys.executable, os.path.abspath(__file__),
                                    f"--config={config_file}", f"--seq_length={seq_length}",
                                    f"--predictions={predictions}", f"--batch_size={batch}",
                                    f"--rematerialize={rematerialize}"], [])
            small, large = batches
            measured = (peaks[large]["peak_bytes"] - peaks[small]["peak_bytes"]) / (large - small)
            predicted = (expected.rematerialized_activations_per_example if rematerialize
                         else expected.activations_per_example)
            result = {"shape": name, "rematerialize": bool(rematerialize),
                      "batches": list(batches),
                      "peak_mib": {str(b): round(peaks[b]["peak_bytes"] / 2 ** 20, 1)
                                   for b in batches},
                      "measured_mib_per_example": round(measured / 2 ** 20, 2),
                      "estimated_mib_per_example": round(predicted / 2 ** 20, 2),
                      "estimate_over_measured": round(predicted / measured, 3),
                      f"seconds_per_step_at_{large}": round(
                          peaks[large]["seconds_per_step"], 3)}
            print(json.dumps(result), flush=True)
            results.append(result)
    report = {"command": " ".join(sys.argv), "results": results}
    if args.output:
        os.makedirs(os.path.dirname(args.output), exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
