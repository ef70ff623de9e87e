"""One process of `python -m albert.paper speed`: the training throughput of one model, here.

    python -m albert.paper.speed_worker --config=model.json --train_batch_size=8 \
        --seq_length=64 --max_predictions_per_seq=10 --warmup_steps=1 --steps=3 \
        --threads=2 --result=result.json

`albert.paper.speed` starts one of these per model (and, for several
workers, one per worker with TF_CONFIG naming the local cluster); it is not
meant to be run by hand.

The run is put together the way `run_pretraining.py` does it: the strategy
from `--strategy=auto` (OneDeviceStrategy alone, MultiWorkerMirroredStrategy
under a TF_CONFIG with several workers), the `PretrainingTask` (masked LM +
sentence order), its `Trainer` from `albert.run_builder.build_trainer` with
run_pretraining's default LAMB settings, and the training loop's own device
step (`albert.training.replica_step`: forward, backward, the gradient
all-reduce across workers, global-norm clip, LAMB), called `steps_per_loop`
steps at a time and read back after every call as the host loop reads it.
Only the input differs: one batch of random token ids per worker, held in
memory, so the figure is the step's and not the record reader's.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from albert.config import AlbertConfig
from albert.pretraining_data.schema import DataContract
from albert.run_builder import OptimizerSettings, RunSettings, build_trainer
from albert.tasks.pretraining import PretrainingTask
from albert.training import distribute
from albert.training.loop import TrainerConfig
from albert.training.synthetic_batch import synthetic_batch


def configure_threads(threads: int) -> None:
    """Limits TensorFlow's thread pools to `threads` (before TensorFlow runs any op)."""
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def kernel_figure_bytes(path: str, field: str) -> Optional[int]:
    """A `field:  N kB` line of a Linux /proc file, in bytes (None where there is none)."""
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_resident_bytes() -> int:
    """This process's peak resident memory so far (0 where unknown)."""
    return kernel_figure_bytes("/proc/self/status", "VmHWM") or 0


def strategy_name(strategy) -> str:
    """The strategy's public name (MultiWorkerMirroredStrategy's class is called
    CollectiveAllReduceStrategy)."""
    public = {tf.distribute.MultiWorkerMirroredStrategy: "MultiWorkerMirroredStrategy",
              tf.distribute.MirroredStrategy: "MirroredStrategy",
              tf.distribute.OneDeviceStrategy: "OneDeviceStrategy",
              tf.distribute.TPUStrategy: "TPUStrategy"}
    return public.get(type(strategy), type(strategy).__name__)


def describe_model(model) -> dict:
    """What the built model is: its trainable parameters (what the gradient all-reduce sums,
    heads included), whether it projects E to H, and how many distinct blocks its layers use."""
    encoder = model.encoder
    parameters = sum(int(np.prod(variable.shape)) for variable in model.trainable_variables)
    gradient_bytes = sum(int(np.prod(variable.shape)) * np.dtype(variable.dtype).itemsize
                         for variable in model.trainable_variables)
    return {"trainable_parameters": parameters, "allreduce_bytes_per_step": gradient_bytes,
            "embedding_projection": encoder.embedding_projection is not None,
            "attention_blocks": len(encoder.attention_blocks),
            "ffn_blocks": len(encoder.ffn_blocks)}


def measure(config, train_batch_size: int, seq_length: int, predictions: int,
            warmup_steps: int, steps: int, log=print) -> dict:
    """Times `steps` training steps after `warmup_steps` (tracing and first-call costs).

    `train_batch_size` is the global batch: under several workers each gets its share.
    """

    strategy = distribute.create_strategy("auto")
    worker = distribute.worker_info(strategy)
    data = DataContract(files=[], record_counts=[], max_seq_length=seq_length,
                        max_predictions_per_seq=predictions, has_token_boundary=False)
    task = PretrainingTask(config, data)
    with tempfile.TemporaryDirectory(prefix="albert-speed-") as scratch:
        # run_pretraining.py's defaults (the schedule changes no work per step).
        trainer = build_trainer(task, strategy, RunSettings(
            TrainerConfig(output_dir=scratch, num_train_steps=125000,
                          train_batch_size=train_batch_size, show_progress=False),
            OptimizerSettings("lamb", 0.00176, 125000, 3125)), seq_length, predictions)
        built = time.perf_counter()
        model, optimizer = trainer.build()
        described = describe_model(model)
        log(f"built in {time.perf_counter() - built:.1f} s: "
            f"{described['trainable_parameters']:,} trainable parameters, peak memory "
            f"{peak_resident_bytes() / 2 ** 30:.2f} GiB")

        def dataset_fn(context):
            batch = synthetic_batch(config, context.get_per_replica_batch_size(train_batch_size),
                                    seq_length, predictions, seed=context.input_pipeline_id)
            return tf.data.Dataset.from_tensors(batch).repeat()

        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        train_steps = trainer.training_steps(model, optimizer, iterator)
        steps_per_loop = trainer.config.steps_per_loop

        def run(count: int, what: str) -> list:
            """`count` steps, `steps_per_loop` per call; (steps, seconds, CPU seconds of this
            process) of each call."""
            calls, done = [], 0
            while done < count:
                size = min(steps_per_loop, count - done)
                start, cpu_start = time.perf_counter(), time.process_time()
                losses = train_steps(tf.constant(size))["loss"].numpy()
                seconds = time.perf_counter() - start
                cpu_seconds = time.process_time() - cpu_start
                if not np.all(np.isfinite(losses)):
                    raise FloatingPointError(f"the loss became {losses.tolist()}")
                done += size
                calls.append((size, seconds, cpu_seconds))
                log(f"{what} step {done}/{count}: {seconds / size:.3f} s per step "
                    f"({cpu_seconds / size:.3f} s of CPU time), loss {float(losses[-1]):.3f}, "
                    f"peak memory {peak_resident_bytes() / 2 ** 30:.2f} GiB")
            return calls

        warmup = run(warmup_steps, "warm-up")
        timed = run(steps, "timed")
    seconds = sum(call[1] for call in timed)
    return {**described, "worker_index": worker.index, "workers": worker.count,
            "replicas": strategy.num_replicas_in_sync, "strategy": strategy_name(strategy),
            "tensorflow": tf.__version__,
            "jit_compile": trainer.config.jit_compile, "steps_per_loop": steps_per_loop,
            "warmup_seconds": sum(call[1] for call in warmup),
            "timed_steps": steps, "timed_seconds": seconds,
            # CPU time / wall time: about the thread count when nothing else competed for the
            # cores (a figure well below it means the measurement shared them).
            "timed_cpu_seconds": sum(call[2] for call in timed),
            "peak_memory_bytes": peak_resident_bytes(),
            "seconds_per_step_each_call": [seconds / size for size, seconds, _ in timed]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="albert_config.json of the model")
    parser.add_argument("--train_batch_size", type=int, required=True, help="global batch")
    parser.add_argument("--seq_length", type=int, required=True)
    parser.add_argument("--max_predictions_per_seq", type=int, required=True)
    parser.add_argument("--warmup_steps", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True,
                        help="TensorFlow's intra- and inter-op threads in this process")
    parser.add_argument("--name", default="model", help="the model's name in log lines")
    parser.add_argument("--result", required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    configure_threads(args.threads)

    config = AlbertConfig.from_json_file(args.config)
    worker = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0)
    chief = worker == 0

    def log(message):
        if chief:  # the workers step together: one of them speaks for all
            print(f"speed: {args.name}: {message}", flush=True)

    result = measure(config, args.train_batch_size, args.seq_length,
                     args.max_predictions_per_seq, args.warmup_steps, args.steps, log)
    result["threads"] = args.threads
    with open(args.result, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
