"""Dynamic masking (`--masked_lm_budget`): graph ops vs the Python definition, same batches.

    python benchmarks/dynamic_masking.py            # batch 64 x 512 tokens, 20 predictions

The input pipeline draws masks in TensorFlow ops (`DynamicMasking.__call__`).
The same masks are defined in Python (`DynamicMasking.remask`, what the
pipeline ran through `tf.numpy_function` before). Both run here as a
`tf.data` map over the same synthetic batches, one batch at a time (one map
call in flight), then with `num_parallel_calls=AUTOTUNE`; the masks are
checked equal on the first batch. Reports milliseconds per batch and the
CPU's features (figures compare only within one run).
"""

import argparse
import json
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from albert.pretraining_data.inputs import DynamicMasking  # noqa: E402
from albert.pretraining_data.masking import MaskingConfig, MaskingVocabulary  # noqa: E402
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
    """The masks of `remask`, row by row, through tf.numpy_function (the earlier pipeline)."""
    def remask_batch(positions, *arrays):
        rows = [dynamic.remask(p, *(a[r] for a in arrays)) for r, p in enumerate(positions)]
        return tuple(np.stack(column) for column in zip(*rows))

    def call(features, positions):
        outputs = tf.numpy_function(remask_batch, [positions] + [features[n] for n in (
            "input_ids", "input_mask", "token_boundary", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights")], [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
        return dict(zip(NAMES, outputs))
    return call


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
    parser.add_argument("--output", default=None, help="Also write the report here (JSON).")
    args = parser.parse_args()
    features = synthetic_batch(args.batch, args.length, args.predictions)
    dynamic = DynamicMasking(MaskingConfig(masked_lm_prob=0.15,
                                           max_predictions_per_seq=args.predictions),
                             MaskingVocabulary(30000, 4, 2, 3), seed=12345)
    reference = python_definition(dynamic)
    positions = tf.range(args.batch, dtype=tf.int64)
    ops_masks = dynamic(dict(features), positions)
    python_masks = reference(features, positions)
    equal = all(np.array_equal(ops_masks[n].numpy(), python_masks[n].numpy()) for n in NAMES)
    report = {"command": "python benchmarks/dynamic_masking.py",
              "batch": args.batch, "length": args.length, "predictions": args.predictions,
              "cpu_count": os.cpu_count(), "cpu_features": sorted(cpu_features()),
              "masks_equal_on_first_batch": equal, "milliseconds_per_batch": {}}
    for parallel, label in ((None, "one_call_at_a_time"), (tf.data.AUTOTUNE, "autotune")):
        report["milliseconds_per_batch"][label] = {
            "graph_ops": round(milliseconds_per_batch(dynamic, features, args.batch,
                                                      args.batches, parallel), 1),
            "python_numpy_function": round(milliseconds_per_batch(reference, features, args.batch,
                                                                  args.batches, parallel), 1)}
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
