"""Dynamic masking (`--masked_lm_budget`): the input pipeline's cost per batch, three ways.

    python benchmarks/dynamic_masking.py                     # batch 64 x 512 tokens, 20 predictions
    python benchmarks/dynamic_masking.py --old_commit=9094826   # also the earlier graph ops

* `stateless_ops`: what the pipeline runs (`DynamicMasking.__call__`, the walk in
  TensorFlow ops on the stateless RNG);
* `python_numpy_function`: the same walk in Python (`mask_sequence` with
  `random.Random`, the function `create_pretraining_data` masks with), row by
  row through `tf.numpy_function`, as the first pipeline ran it;
* `old_graph_ops` (with `--old_commit`): the graph ops that reproduced
  Python's generator bit for bit (SHA-512 seeding, MT19937 in ops), read from
  that commit of this repository with `git show`.

Each runs as a `tf.data` map over the same synthetic batches, one batch at a
time (one map call in flight), then with `num_parallel_calls=AUTOTUNE`.
Reports milliseconds per batch and the CPU's features (figures compare only
within one run). The three draw different masks (each its own random stream).
"""

import argparse
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from albert.pretraining_data.inputs import DynamicMasking  # noqa: E402
from albert.pretraining_data.masking import (MaskingConfig, MaskingVocabulary,  # noqa: E402
                                             mask_sequence)
from albert.training.cpu_features import cpu_features  # noqa: E402

NAMES = ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def synthetic_batch(batch: int, length: int, predictions: int, seed: int = 0) -> dict:
    state = np.random.RandomState(seed)
    ids = state.randint(5, 30000, [batch, length]).astype(np.int32)
    ids[:, 0], ids[:, length // 2], ids[:, -1] = 2, 3, 3
    return {"input_ids": ids, "input_mask": np.ones([batch, length], np.int32),
            "token_boundary": (state.rand(batch, length) < 0.7).astype(np.int32),
            "masked_lm_positions": np.zeros([batch, predictions], np.int32),
            "masked_lm_ids": np.zeros([batch, predictions], np.int32),
            "masked_lm_weights": np.zeros([batch, predictions], np.float32)}


def python_definition(dynamic: DynamicMasking):
    """Row by row in Python through tf.numpy_function: undo the stored masks, then
    `mask_sequence` with `random.Random` seeded by the run's seed and the stream position."""
    config, vocabulary, size = dynamic.masking, dynamic.vocabulary, dynamic.masking.max_predictions_per_seq

    def remask(position, input_ids, input_mask, token_boundary, positions, ids, weights):
        length = int(input_mask.sum())
        original = input_ids.copy()
        real = (weights > 0) & (positions >= 0) & (positions < len(input_ids))
        original[positions[real]] = ids[real]
        masked = mask_sequence(original[:length].tolist(),
                               token_boundary[:length].astype(bool).tolist(),
                               random.Random(f"{dynamic.seed}/{int(position)}"), config, vocabulary)
        count = len(masked.masked_lm_positions)
        new_ids = original.copy()
        new_ids[:length] = masked.input_ids
        columns = [np.zeros(size, np.int32), np.zeros(size, np.int32), np.zeros(size, np.float32)]
        columns[0][:count], columns[1][:count] = masked.masked_lm_positions, masked.masked_lm_ids
        columns[2][:count] = 1.0
        return (new_ids.astype(np.int32), *columns)

    def remask_batch(positions, *arrays):
        rows = [remask(p, *(a[r] for a in arrays)) for r, p in enumerate(positions)]
        return tuple(np.stack(column) for column in zip(*rows))

    def call(features, positions):
        outputs = tf.numpy_function(remask_batch, [positions] + [features[n] for n in (
            "input_ids", "input_mask", "token_boundary", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights")], [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
        return dict(zip(NAMES, outputs))
    return call


def old_graph_ops(commit: str, dynamic: DynamicMasking):
    """`DynamicMasking` as it was at `commit` (its inputs, masking_ops and python_random)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    package = tempfile.mkdtemp(prefix="old_dynamic_masking_")
    os.makedirs(os.path.join(package, "old_masking"))
    open(os.path.join(package, "old_masking", "__init__.py"), "w").close()
    for name in ("inputs", "masking_ops", "python_random"):
        text = subprocess.run(["git", "show", f"{commit}:albert/pretraining_data/{name}.py"],
                              cwd=root, check=True, capture_output=True, text=True).stdout
        for module in ("inputs", "masking_ops", "python_random"):
            text = text.replace(f"albert.pretraining_data.{module} ", f"old_masking.{module} ")
        with open(os.path.join(package, "old_masking", f"{name}.py"), "w") as handle:
            handle.write(text)
    sys.path.insert(0, package)
    module = importlib.import_module("old_masking.inputs")
    return module.DynamicMasking(dynamic.masking, dynamic.vocabulary, dynamic.seed)


def milliseconds_per_batch(masking, features, batch: int, batches: int, parallel) -> float:
    dataset = tf.data.Dataset.from_tensors(features).repeat(batches + 1).enumerate()
    dataset = dataset.map(lambda i, f: masking(f, tf.range(i * batch, (i + 1) * batch,
                                                            dtype=tf.int64)),
                          num_parallel_calls=parallel)
    iterator = iter(dataset)
    next(iterator)  # tracing and the first batch
    start = time.perf_counter()
    for _ in iterator:
        pass
    return (time.perf_counter() - start) / batches * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--old_commit", default=None,
                        help="Also time the graph ops of python_random at this commit.")
    parser.add_argument("--output", default=None, help="Also write the report here (JSON).")
    args = parser.parse_args()
    features = synthetic_batch(args.batch, args.length, args.predictions)
    dynamic = DynamicMasking(MaskingConfig(masked_lm_prob=0.15,
                                           max_predictions_per_seq=args.predictions),
                             MaskingVocabulary(30000, 4, 2, 3), seed=12345)
    ways = {"stateless_ops": dynamic, "python_numpy_function": python_definition(dynamic)}
    if args.old_commit:
        ways["old_graph_ops"] = old_graph_ops(args.old_commit, dynamic)
    command = "python benchmarks/dynamic_masking.py" + "".join(
        f" {arg}" for arg in sys.argv[1:] if not arg.startswith("--output"))
    report = {"command": command, "batch": args.batch, "length": args.length,
              "predictions": args.predictions, "cpu_count": os.cpu_count(),
              "cpu_features": sorted(cpu_features()), "milliseconds_per_batch": {}}
    for parallel, label in ((None, "one_call_at_a_time"), (tf.data.AUTOTUNE, "autotune")):
        report["milliseconds_per_batch"][label] = {
            name: round(milliseconds_per_batch(way, features, args.batch, args.batches, parallel), 1)
            for name, way in ways.items()}
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
