"""Peak memory of the gradient all-reduce between workers, by the size of the tensors summed.

    python benchmarks/allreduce_memory.py --output=benchmarks/results/memory/allreduce_2_workers.json

Each case starts two local workers (`MultiWorkerMirroredStrategy`, TF_CONFIG on localhost, the
ring implementation, as `run_pretraining.py` runs several workers on CPUs). In one
`tf.function` step each worker makes `count` tensors of `mib` MiB, as a backward pass makes
gradients, and then, as the global-norm clip does, reads every one of them twice: once for the
norm, then scaled by it. With `--reduce` the tensors are first summed across the workers by
the replica context's `all_reduce` in packs of the training step's size
(`ALL_REDUCE_PACK_BYTES`), as `albert.training.replica_step` sums gradients; without it the
step is the same minus the sum. Every worker reports its peak resident memory (`VmHWM`) after
three warm-up steps and one timed step; the difference between the two cases at one size is
what the all-reduce adds on top of the tensors themselves.

Cases: 8 tensors of 256 MiB (ALBERT-xxlarge's feed-forward kernels are 256 MiB each) and 64 of
32 MiB, 2 GiB in both.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCHMARKS)
sys.path.insert(0, os.path.dirname(BENCHMARKS))

CASES = ((8, 256), (64, 32))
GIB = 2 ** 30


def peak_gib() -> float:
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    return round(kib * 1024 / GIB, 3)


def worker(index: int, ports, count: int, mib: int, reduce: bool) -> dict:
    os.environ["TF_CONFIG"] = json.dumps(
        {"cluster": {"worker": [f"localhost:{port}" for port in ports]},
         "task": {"type": "worker", "index": index}})
    import tensorflow as tf

    from albert.training.replica_step import ALL_REDUCE_PACK_BYTES

    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING))
    rows = mib * 2 ** 20 // 4 // 1024
    options = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=ALL_REDUCE_PACK_BYTES)

    def replica_step():
        tensors = [tf.random.normal([rows, 1024], seed=seed) for seed in range(count)]
        if reduce:
            tensors = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, tensors, options=options)
        norm = tf.add_n([tf.reduce_sum(tf.square(tensor)) for tensor in tensors])
        return tf.add_n([tf.reduce_sum(tensor * norm) for tensor in tensors])

    step = tf.function(lambda: strategy.run(replica_step))
    for _ in range(3):
        step()
    start = time.perf_counter()
    step()
    return {"worker": index, "peak_gib": peak_gib(),
            "seconds_per_step": round(time.perf_counter() - start, 2)}


def free_ports(number: int):
    sockets = [socket.socket() for _ in range(number)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def run_case(count: int, mib: int, reduce: bool) -> dict:
    ports = ",".join(map(str, free_ports(2)))
    processes = [subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), f"--worker={index}", f"--ports={ports}",
         f"--count={count}", f"--mib={mib}", f"--reduce={int(reduce)}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for index in range(2)]
    workers = []
    for process in processes:
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            for other in processes:
                other.kill()
            sys.exit(f"ERROR: a worker failed:\n{stderr[-3000:]}")
        workers.append(json.loads(stdout.strip().splitlines()[-1]))
    result = {"tensors": count, "mib_each": mib, "all_reduce": reduce, "workers": workers}
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ports", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mib", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reduce", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker, [int(port) for port in args.ports.split(",")],
                                args.count, args.mib, bool(args.reduce))))
        return
    if not args.output:
        parser.error("--output is required")
    from training_memory import refuse_existing, write_new_report

    refuse_existing(args.output)
    write_new_report(args.output, cases=[run_case(count, mib, reduce) for count, mib in CASES
                                         for reduce in (False, True)])


if __name__ == "__main__":
    main()
