"""Where a training step's memory goes: resident memory and the tensors' bytes over time.

    TF_CPU_ALLOCATOR_USE_BFC=true python benchmarks/memory_timeline.py --model=albert-xxlarge \\
        --task=pretraining --output=benchmarks/results/memory/xxlarge_timeline.json

Runs our step of `benchmarks/training_memory.py` (same weights, batch and optimizer) in this
process, for the warm-up call of two steps and one timed step, while a thread samples every
20 ms:

* the process's resident memory (what `training_memory.py` reports the peak of);
* the bytes TensorFlow's CPU allocator has handed out to live tensors. TensorFlow counts them
  only with its own best-fit allocator, `TF_CPU_ALLOCATOR_USE_BFC=true`; without it the column
  is absent.

The difference of the two is memory that is not in a tensor: TensorFlow's libraries, Python's
objects and the allocator's free blocks. The output keeps the maximum of each column per half
second, both peaks and the environment the two settings came from.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCHMARKS)

import pretraining_speed  # noqa: E402  (sets up albert's import path)
import training_memory  # noqa: E402

WRITE_INPUTS = (
    "import argparse, sys; import pretraining_speed; directory, config, *shape = sys.argv[1:]; "
    "pretraining_speed.write_inputs(argparse.Namespace(config=config, batch_size=int(shape[0]), "
    "seq_length=int(shape[1]), predictions=int(shape[2])), directory)")


class Sampler:
    """Samples (seconds, resident GiB, tensor GiB or None) from a thread until stopped."""

    def __init__(self, interval: float = 0.02):
        import psutil

        self.process = psutil.Process()
        self.interval = interval
        self.samples = []
        self.start = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def tensor_gib():
        if os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "").lower() not in ("1", "true"):
            return None
        import tensorflow as tf

        return tf.config.experimental.get_memory_info("CPU:0")["current"] / 2 ** 30

    def now(self):
        return (round(time.perf_counter() - self.start, 3),
                self.process.memory_info().rss / 2 ** 30, self.tensor_gib())

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(self.now())
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(training_memory.MODELS), required=True)
    parser.add_argument("--task", choices=training_memory.TASKS, default="pretraining")
    parser.add_argument("--output", required=True)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=64)
    parser.add_argument("--predictions", type=int, default=10)
    args = parser.parse_args()
    if os.path.exists(args.output):
        parser.error(f"--output {args.output} exists; choose another name")

    import numpy as np

    from albert.config import AlbertConfig  # before TensorFlow: its kernel settings

    config_path = os.path.join(training_memory.REPO, "configs", training_memory.MODELS[args.model])
    run = argparse.Namespace(config=config_path, batch_size=args.batch_size,
                             seq_length=args.seq_length, predictions=args.predictions, steps=1,
                             repeats=1, jit=0, remat=0)
    with tempfile.TemporaryDirectory(prefix="memory_timeline_") as inputs:
        # In a child process: building the weights here would leave its memory in this one's.
        subprocess.run([sys.executable, "-c", WRITE_INPUTS, inputs, config_path,
                        str(args.batch_size), str(args.seq_length), str(args.predictions)],
                       check=True, cwd=BENCHMARKS)
        with np.load(os.path.join(inputs, "batch.npz")) as saved:
            batch = dict(saved)

        def weights():
            with np.load(os.path.join(inputs, "weights.npz")) as saved:
                return dict(saved)

        runner = (pretraining_speed.run_ours if args.task == "pretraining"
                  else training_memory.classify_ours)
        config = AlbertConfig.from_json_file(config_path)
        with Sampler() as sampler:
            seconds = runner(run, config, weights, batch)[0]

    half_seconds = {}
    for seconds_at, resident, tensors in sampler.samples:
        row = half_seconds.setdefault(round(seconds_at * 2) / 2, [0.0, None])
        row[0] = max(row[0], resident)
        if tensors is not None:
            row[1] = max(row[1] or 0.0, tensors)
    peak_resident = max(resident for _, resident, _ in sampler.samples)
    tensor_samples = [tensors for *_, tensors in sampler.samples if tensors is not None]
    report = {
        "command": "python " + " ".join([os.path.relpath(__file__, training_memory.REPO)]
                                        + sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"), "machine": training_memory.machine(),
        "environment": {name: os.environ.get(name, "unset") for name in
                        ("TF_ENABLE_ONEDNN_OPTS", "TF_CPU_ALLOCATOR_USE_BFC")},
        "model": args.model, "task": args.task,
        "shape": {"batch_size": args.batch_size, "seq_length": args.seq_length,
                  "predictions": args.predictions, "precision": "float32"},
        "seconds_per_step": seconds,
        "peak_resident_gib": peak_resident,
        "peak_tensor_gib": max(tensor_samples) if tensor_samples else None,
        "timeline_columns": ["seconds", "resident_gib", "tensor_gib"],
        "timeline": [[at, round(resident, 3), None if tensors is None else round(tensors, 3)]
                     for at, (resident, tensors) in sorted(half_seconds.items())],
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as file:
        json.dump(report, file, indent=1)
    tensors = "" if report["peak_tensor_gib"] is None else \
        f", tensors' peak {report['peak_tensor_gib']:.2f} GiB"
    print(f"{args.model} {args.task}: {seconds:.1f} s a step, resident peak "
          f"{peak_resident:.2f} GiB{tensors}")


if __name__ == "__main__":
    main()
