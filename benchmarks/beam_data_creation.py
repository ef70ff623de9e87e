"""Pretraining-data creation on Apache Beam beside the one-machine path, one run, same corpus.

    python benchmarks/beam_data_creation.py --output=benchmarks/results/beam_data_creation.json

The demo corpus (built if missing, with a SentencePiece vocabulary trained on
it; `benchmarks/pretraining_data_speed.py` prepares both) repeated 1, 2 and 4
times, at max_seq_length 128 and dupe_factor 5 (`--dupe_factor`). For each
size, in one run: the one-machine script with 1 and 2 worker processes, and
the same script with `--beam_pipeline_options` on Beam's local runner
(FnApiRunner) in this process (1 worker) and in 2 worker processes. Every
output is checked byte for byte against the one-machine output of its size.

Reported per run: wall seconds, records per second, records per second per
worker, and memory sampled every 50 ms: the peak resident size of the main
process, of the largest worker process (the children: Beam's SDK workers, or
the pool's processes) and of the whole process tree. A Beam worker's peak
must not grow with the corpus: it holds a bundle, a block of raw documents or
a sort partition, never the corpus. (Beam's local runner itself keeps the
data between stages in the main process, so that one does grow: on a cluster
that is the runner's shuffle service, not a worker.)
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

TWO_WORKERS = "direct_num_workers=2,direct_running_mode=multi_processing"


def run_sampled(command, env):
    """(seconds, peak RSS MiB of the main process, of the largest child, of the tree)."""
    start = time.time()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    root = psutil.Process(process.pid)
    main_peak = largest = tree = 0
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(process.stderr.read()))
    reader.start()
    while process.poll() is None:
        try:
            own = root.memory_info().rss
            children = [p.memory_info().rss for p in root.children(recursive=True)
                        if p.is_running()]
            main_peak = max(main_peak, own)
            largest = max([largest, *children])
            tree = max(tree, own + sum(children))
        except psutil.Error:
            pass
        time.sleep(0.05)
    reader.join()
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{''.join(chunks)[-3000:]}")
    return time.time() - start, main_peak / 2 ** 20, largest / 2 ** 20, tree / 2 ** 20


def repeated(train: str, times: int, work_dir: str) -> str:
    if times == 1:
        return train
    path = os.path.join(work_dir, f"train_x{times}.txt")
    if not os.path.exists(path):
        with open(train, encoding="utf-8") as handle:
            text = handle.read()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join([text] * times))
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                           "albert-data-bench"))
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--sizes", default="1,2,4")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    from pretraining_data_speed import prepare

    prepare_args = argparse.Namespace(work_dir=args.work_dir, vocab_size=args.vocab_size)
    train, _, _, prefix = prepare(prepare_args)
    env = dict(os.environ, PYTHONPATH=REPO)
    engines = [("one machine", 1, ["--num_workers=1"]),
               ("one machine", 2, ["--num_workers=2"]),
               ("beam local", 1, ["--beam_pipeline_options="]),
               ("beam local", 2, [f"--beam_pipeline_options={TWO_WORKERS}"])]
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        corpus = repeated(train, size, args.work_dir)
        reference = None
        for engine, workers, flags in engines:
            output = os.path.join(args.work_dir, "out", f"{engine.replace(' ', '_')}_{workers}",
                                  "train.tfrecord")
            for stale in [output, output + ".summary.json", output + ".documents.npz"]:
                if os.path.exists(stale):
                    os.remove(stale)
            command = [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
                       f"--input_file={corpus}", f"--output_file={output}",
                       f"--spm_model_file={prefix}.model", f"--max_seq_length={args.seq_length}",
                       f"--dupe_factor={args.dupe_factor}", "--noprogress", *flags]
            seconds, main_peak, largest, tree = run_sampled(command, env)
            with open(output, "rb") as handle:
                data = handle.read()
            if reference is None:
                reference = data
            with open(output + ".summary.json", encoding="utf-8") as handle:
                records = json.load(handle)["instances"]
            row = {"corpus": f"demo corpus x{size}", "engine": engine, "workers": workers,
                   "seconds": round(seconds, 2), "records": records,
                   "records_per_second": round(records / seconds, 1),
                   "records_per_second_per_worker": round(records / seconds / workers, 1),
                   "main_process_rss_mib": round(main_peak, 1),
                   "largest_worker_rss_mib": round(largest, 1) if workers > 1 else None,
                   "process_tree_rss_mib": round(tree, 1),
                   "same_bytes_as_one_machine": data == reference}
            print(json.dumps(row), flush=True)
            rows.append(row)
    result = {"rows": rows, "command": " ".join(["python", *sys.argv]),
              "settings": {"seq_length": args.seq_length, "dupe_factor": args.dupe_factor,
                           "vocab_size": args.vocab_size},
              "machine": {"cores": os.cpu_count(), "processor": platform.processor(),
                          "python": platform.python_version()}}
    if args.output:
        os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
            handle.write("\n")


if __name__ == "__main__":
    main()
