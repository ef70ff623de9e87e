"""Which tensors are alive when a step's forward and backward pass peaks, by the op that made them.

    python benchmarks/allocation_profile.py --config=configs/albert_xxlarge_v2.json --layers=4
    python benchmarks/allocation_profile.py --config=configs/albert_xxlarge_v2.json --training_step

Builds the pretraining model of `--config` (`--layers` overrides its depth: the shared-block
loop's backward pass has the same structure at every depth, and 4 applications profile in a
minute), traces forward and backward in one tf.function on a synthetic batch, runs it once to
warm up and once under TensorFlow's profiler, and reads the allocator's own events from the
trace: every allocation and deallocation with its size, address and the op that made it. It
prints one JSON report: the peak of the bytes the allocator had handed out, the live
allocations at that moment grouped by op (largest first), and the peak in each fiftieth of the
step, so that where and when a step peaks can be read without guessing.

The loss is the sum of the means of the model's floating outputs: its gradients have the
shapes of the training loss's, which is all that memory depends on. No optimizer runs, unless
`--training_step` profiles the training loop's whole step instead (LAMB and the clip, as
`benchmarks/pretraining_speed.py` runs it). Sizes
are the allocator's chunks (a request rounded up, sometimes a larger free chunk handed over
whole), so they can exceed the tensors' own sizes. Works with TensorFlow's default CPU
allocator (with oneDNN, "mklcpu") and with `TF_CPU_ALLOCATOR_USE_BFC=true`.
"""

import argparse
import collections
import dataclasses
import glob
import json
import os
import shutil
import tempfile

import albert  # noqa: F401  (sets the kernels before TensorFlow loads)
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from albert.checkpoints.keras_format import build_model
from albert.config import AlbertConfig
from albert.training.synthetic_batch import synthetic_batch

MIB = 2 ** 20


def allocator_events(trace_dir: str):
    """`[(nanoseconds, "MemoryAllocation" | "MemoryDeallocation", {stat: value})]`, in order."""
    path = sorted(glob.glob(os.path.join(trace_dir, "plugins", "profile", "*", "*.xplane.pb")))[-1]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as file:
        space.ParseFromString(file.read())
    events = []
    for plane in space.planes:
        stat_names = {key: value.name for key, value in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name not in ("MemoryAllocation", "MemoryDeallocation"):
                    continue
                stats = {}
                for stat in event.stats:
                    kind = stat.WhichOneof("value")
                    value = getattr(stat, kind)
                    stats[stat_names[stat.metadata_id]] = \
                        stat_names.get(value) if kind == "ref_value" else value
                events.append((line.timestamp_ns + event.offset_ps // 1000, name, stats))
    return sorted(events, key=lambda event: event[0])


def at_peak(events):
    """The peak of bytes allocated, and what was alive then: `{op: [bytes, count]}`."""
    live, peak, alive_at_peak = {}, 0, {}
    for _, name, stats in events:
        if name == "MemoryAllocation":
            live[stats["addr"]] = (stats.get("allocation_bytes", 0), str(stats.get("tf_op")))
        else:
            live.pop(stats["addr"], None)
        if stats.get("bytes_allocated", 0) > peak:
            peak, alive_at_peak = stats["bytes_allocated"], dict(live)
    by_op = collections.defaultdict(lambda: [0, 0])
    for size, op in alive_at_peak.values():
        by_op[op][0] += size
        by_op[op][1] += 1
    return peak, by_op


def peaks_over_time(events, parts: int = 50):
    """The peak of bytes allocated in each of `parts` equal spans of the trace (None: no event)."""
    start, end = events[0][0], events[-1][0]
    peaks = [None] * parts
    for time, _, stats in events:
        part = min(parts - 1, int((time - start) / (end - start + 1) * parts))
        peaks[part] = max(peaks[part] or 0, stats.get("bytes_allocated", 0))
    return peaks


def gradients(config, batch):
    """Forward and backward, no optimizer: a call returns a float."""
    model = build_model(config, "pretraining")
    batch = {name: tf.constant(value) for name, value in batch.items()}

    @tf.function
    def sum_of_gradients():
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True)
            loss = tf.add_n([tf.reduce_mean(tf.cast(output, tf.float32))
                             for output in tf.nest.flatten(outputs) if output.dtype.is_floating])
        found = tape.gradient(loss, model.trainable_variables)
        return tf.add_n([tf.reduce_sum(gradient) for gradient in found if gradient is not None])

    return lambda: float(sum_of_gradients())


def training_step(config, batch, args):
    """The training loop's whole step (`benchmarks/pretraining_speed.py`'s: LAMB, the clip)."""
    from pretraining_speed import pretraining_trainer, repeated_batch_steps

    trainer, strategy = pretraining_trainer(config, args.batch_size, args.seq_length,
                                            args.predictions)
    model, optimizer = trainer.build()
    steps = repeated_batch_steps(trainer, strategy, model, optimizer, batch)
    return lambda: float(steps(tf.constant(1))["loss"][-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/albert_xxlarge_v2.json")
    parser.add_argument("--layers", type=int, default=None, help="override num_hidden_layers")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=64)
    parser.add_argument("--predictions", type=int, default=10)
    parser.add_argument("--top", type=int, default=25, help="ops listed at the peak")
    parser.add_argument("--training_step", action="store_true",
                        help="profile the training loop's whole step (the optimizer included)")
    args = parser.parse_args()

    config = AlbertConfig.from_json_file(args.config)
    if args.layers:
        config = dataclasses.replace(config, num_hidden_layers=args.layers)
    batch = synthetic_batch(config, args.batch_size, args.seq_length, args.predictions)
    step = training_step(config, batch, args) if args.training_step else gradients(config, batch)
    step()
    trace_dir = tempfile.mkdtemp(prefix="allocation_profile_")
    try:
        tf.profiler.experimental.start(trace_dir)
        step()
        tf.profiler.experimental.stop()
        events = allocator_events(trace_dir)
    finally:
        shutil.rmtree(trace_dir, ignore_errors=True)
    if not events:
        raise SystemExit("ERROR: the trace holds no allocator events")
    peak, by_op = at_peak(events)
    largest = sorted(by_op.items(), key=lambda item: -item[1][0])[:args.top]
    print(json.dumps({
        "config": args.config, "layers": config.num_hidden_layers,
        "step": "training loop (LAMB)" if args.training_step else "forward and backward",
        "shape": {"batch_size": args.batch_size, "seq_length": args.seq_length,
                  "predictions": args.predictions},
        "allocators": sorted({str(stats.get("allocator_name")) for _, _, stats in events}),
        "peak_allocated_mib": round(peak / MIB, 1),
        "alive_at_peak_mib": [{"op": op, "mib": round(size / MIB, 1), "allocations": count}
                              for op, (size, count) in largest],
        "peak_mib_per_fiftieth": [None if value is None else round(value / MIB)
                                  for value in peaks_over_time(events)],
    }, indent=1))


if __name__ == "__main__":
    main()
