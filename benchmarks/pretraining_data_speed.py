"""Pretraining-data creation speed and memory: ours vs the original script, side by side.

    python benchmarks/pretraining_data_speed.py --original_repo=/path/to/google-research/albert.git

Runs on the demo corpus (built if missing) with a SentencePiece vocabulary
trained on it, at max_seq_length 128 and 512 with dupe_factor 10: ours with
1 and 2 workers, and the original `create_pretraining_data.py` (single
process) when `--original_repo` points at a git directory of
google-research/albert (e.g. one brought here by the workplace's fetch tool).
The original's files are extracted from that repository into a temporary
directory at run time, with one shim: a stub `tensorflow_hub` module (the
original imports it only for TF-Hub modules, and current `tensorflow_hub`
no longer imports without `pkg_resources`). Nothing of it is copied into
this repository.

Peak RSS is the largest sum of resident memory over the whole process tree
(main process and workers), sampled every 50 ms. The memory run repeats the
input 4x: ours should stay flat (bounded by the window size), the original
grows with corpus x dupe_factor.

Parallelism must not depend on the corpus's shape: the "96 long documents"
run regroups the demo corpus's sentences into 96 documents (fewer than one
window) and times 1 and 2 workers alternately over `--rounds` rounds,
reporting the median wall time of each and their ratio (and, from one more
sampled run each, their peak RSS).

The "large" case compares this version with an earlier one of the project
on the larger corpus (`--large_corpus=DIR/train.txt` from `python -m
albert.datasets larger-corpus`) at the `tiny` paper scale's data settings
(length 64, 10 predictions, dupe_factor 5, 2 workers), alternating
`--rounds` rounds: `--baseline_repo` is a checkout of the earlier version,
e.g. `git worktree add /tmp/before <commit>` (the commit before the global
shuffle: 78a84fc).

    python benchmarks/pretraining_data_speed.py --cases=large,long \
        --large_corpus=corpus-large/train.txt --baseline_repo=/tmp/before
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def run_measured(command, env=None, cwd=None, sample_memory=True):
    """Runs a command; returns (seconds, peak RSS of its process tree in MiB).

    Without `sample_memory` the parent only waits: the sampler takes CPU
    time, which would slow a run that keeps both cores busy more than one
    that leaves a core idle.
    """
    start = time.time()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    if not sample_memory:
        stderr = process.communicate()[1]
        if process.returncode != 0:
            raise RuntimeError(f"{command[:3]} failed:\n{stderr[-3000:]}")
        return time.time() - start, float("nan")
    root = psutil.Process(process.pid)
    peak = 0
    stderr_chunks = []
    import threading

    reader = threading.Thread(target=lambda: stderr_chunks.append(process.stderr.read()))
    reader.start()
    while process.poll() is None:
        try:
            processes = [root] + root.children(recursive=True)
            peak = max(peak, sum(p.memory_info().rss for p in processes if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.05)
    reader.join()
    seconds = time.time() - start
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{''.join(stderr_chunks)[-3000:]}")
    return seconds, peak / 2 ** 20


def count_records(paths):
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(paths))


def prepare(args):
    from albert.datasets.demo_corpus import build_demo_corpus
    from albert.tokenization.training import train_sentencepiece

    os.makedirs(args.work_dir, exist_ok=True)
    corpus_dir = os.path.join(args.work_dir, "corpus")
    build_demo_corpus(corpus_dir)
    prefix = os.path.join(args.work_dir, f"spm{args.vocab_size}")
    if not os.path.exists(prefix + ".model"):
        train_sentencepiece([os.path.join(corpus_dir, "train.txt")], prefix, vocab_size=args.vocab_size)
    train = os.path.join(corpus_dir, "train.txt")
    repeated = os.path.join(args.work_dir, "train_x4.txt")
    if not os.path.exists(repeated):
        with open(train, encoding="utf-8") as handle:
            text = handle.read()
        with open(repeated, "w", encoding="utf-8") as handle:
            handle.write("\n".join([text] * 4))
    books = os.path.join(args.work_dir, "train_96_long_documents.txt")
    if not os.path.exists(books):
        with open(train, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
        per_document = len(lines) // 96
        with open(books, "w", encoding="utf-8") as handle:
            handle.write("\n\n".join("\n".join(lines[d * per_document:(d + 1) * per_document])
                                     for d in range(96)) + "\n")
    return train, repeated, books, prefix


def ours(input_file, prefix, seq, workers, output_dir, dupe_factor, documents_per_window=20,
         sample_memory=True, repo=REPO, label="ours", extra_flags=()):
    output = os.path.join(output_dir, f"ours_{seq}_{workers}.tfrecord")
    command = [sys.executable, os.path.join(repo, "create_pretraining_data.py"),
               f"--input_file={input_file}", f"--output_file={output}",
               f"--spm_model_file={prefix}.model", f"--max_seq_length={seq}",
               f"--dupe_factor={dupe_factor}", f"--num_workers={workers}", "--noprogress",
               f"--documents_per_window={documents_per_window}", *extra_flags]
    # The script's directory comes first on sys.path, so each checkout runs its own package.
    env = dict(os.environ, PYTHONPATH=repo)
    seconds, peak = run_measured(command, env=env, sample_memory=sample_memory)
    with open(output + ".summary.json", encoding="utf-8") as handle:
        summary = json.load(handle)
    # The script refuses to overwrite: the next round writes the same names.
    for written in (output, output + ".summary.json", output + ".documents.npz"):
        if os.path.exists(written):
            os.remove(written)
    return {"implementation": f"{label} ({workers} worker{'s' if workers > 1 else ''})",
            "seconds": seconds, "instances": summary["instances"],
            "instances_per_second": summary["instances"] / seconds, "peak_rss_mib": peak,
            "shuffle": summary.get("shuffle", "within windows of 1000 documents")}


def median_run(runs):
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def large_corpus_rows(args, output_dir):
    """This version vs `--baseline_repo` on the larger corpus, tiny-scale data settings."""
    corpus = args.large_corpus
    prefix = os.path.join(args.work_dir, "large-spm8000")
    if not os.path.exists(prefix + ".model"):
        from albert.tokenization.training import train_sentencepiece

        train_sentencepiece([corpus], prefix, vocab_size=8000)
    versions = [("ours", REPO)] + ([("baseline", args.baseline_repo)] if args.baseline_repo else [])
    settings = dict(seq=64, workers=2, output_dir=output_dir, dupe_factor=5,
                    documents_per_window=1000, extra_flags=["--max_predictions_per_seq=10"])
    timed = {label: [] for label, _ in versions}
    for _ in range(args.rounds):
        for label, repo in versions:
            timed[label].append(ours(corpus, prefix, repo=repo, label=label, sample_memory=False,
                                     **settings))
    rows = []
    for label, repo in versions:
        row = median_run(timed[label])
        row["peak_rss_mib"] = ours(corpus, prefix, repo=repo, label=label, **settings)["peak_rss_mib"]
        rows.append(dict(row, input="larger corpus (median)", max_seq_length=64))
    ratio = rows[0]["seconds"] / rows[1]["seconds"] if len(rows) == 2 else None
    return rows, ratio


def original(input_file, prefix, seq, output_dir, original_dir, dupe_factor):
    output = os.path.join(output_dir, f"original_{seq}.tfrecord")
    command = [sys.executable, "-m", "albert.create_pretraining_data",
               f"--input_file={input_file}", f"--output_file={output}",
               f"--spm_model_file={prefix}.model", f"--vocab_file={prefix}.vocab",
               f"--max_seq_length={seq}", f"--dupe_factor={dupe_factor}"]
    env = dict(os.environ, PYTHONPATH=original_dir, TF_CPP_MIN_LOG_LEVEL="2")
    seconds, peak = run_measured(command, env=env, cwd=original_dir)
    instances = count_records([output])
    os.remove(output)
    return {"implementation": "original (1 process)", "seconds": seconds, "instances": instances,
            "instances_per_second": instances / seconds, "peak_rss_mib": peak}


def extract_original(repo, directory):
    package = os.path.join(directory, "albert")
    os.makedirs(package)
    for name in ("create_pretraining_data.py", "tokenization.py", "__init__.py"):
        content = subprocess.run(["git", "--git-dir", repo, "show", f"HEAD:{name}"],
                                 capture_output=True, check=True).stdout
        with open(os.path.join(package, name), "wb") as handle:
            handle.write(content)
    with open(os.path.join(directory, "tensorflow_hub.py"), "w") as handle:
        handle.write("# stub: the original imports tensorflow_hub only for TF-Hub modules\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "albert-data-bench"))
    parser.add_argument("--original_repo", default=None,
                        help="git directory of google-research/albert (optional)")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--seq_lengths", default="128,512")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating 1- and 2-worker runs on the 96 long documents")
    parser.add_argument("--cases", default="demo,x4,long",
                        help="which runs: demo (demo corpus), x4 (memory), long (96 documents), "
                             "large (--large_corpus, this version vs --baseline_repo)")
    parser.add_argument("--large_corpus", default=None,
                        help="train.txt of `python -m albert.datasets larger-corpus`")
    parser.add_argument("--baseline_repo", default=None,
                        help="a checkout of an earlier version of this project (case 'large')")
    args = parser.parse_args()

    train, repeated, books, prefix = prepare(args)
    rows = []
    with tempfile.TemporaryDirectory() as output_dir, tempfile.TemporaryDirectory() as original_dir:
        if args.original_repo:
            extract_original(args.original_repo, original_dir)
        cases = set(args.cases.split(","))
        for seq in [int(s) for s in args.seq_lengths.split(",")] if "demo" in cases else []:
            for workers in (1, 2):
                rows.append(dict(ours(train, prefix, seq, workers, output_dir, args.dupe_factor),
                                 input="demo corpus", max_seq_length=seq))
            if args.original_repo:
                rows.append(dict(original(train, prefix, seq, output_dir, original_dir, args.dupe_factor),
                                 input="demo corpus", max_seq_length=seq))
        for workers in (1, 2) if "x4" in cases else ():
            rows.append(dict(ours(repeated, prefix, 128, workers, output_dir, args.dupe_factor),
                             input="demo corpus x4", max_seq_length=128))
        if args.original_repo and "x4" in cases:
            rows.append(dict(original(repeated, prefix, 128, output_dir, original_dir, args.dupe_factor),
                             input="demo corpus x4", max_seq_length=128))

        long_runs = {1: [], 2: []}
        for _ in range(args.rounds if "long" in cases else 0):
            for workers in (1, 2):
                long_runs[workers].append(ours(books, prefix, 128, workers, output_dir,
                                               args.dupe_factor, documents_per_window=1000,
                                               sample_memory=False))
        speedup = None
        if "long" in cases:
            for workers, runs in long_runs.items():
                median = median_run(runs)
                median["peak_rss_mib"] = ours(books, prefix, 128, workers, output_dir,
                                              args.dupe_factor,
                                              documents_per_window=1000)["peak_rss_mib"]
                rows.append(dict(median, input="96 long documents (median)", max_seq_length=128))
            speedup = rows[-2]["seconds"] / rows[-1]["seconds"]
        large_ratio = None
        if "large" in cases:
            if not args.large_corpus:
                parser.error("case 'large' needs --large_corpus")
            large_rows, large_ratio = large_corpus_rows(args, output_dir)
            rows.extend(large_rows)

    print("| input | seq | implementation | instances | seconds | instances/s | peak RSS (MiB) |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['input']} | {row['max_seq_length']} | {row['implementation']} | "
              f"{row['instances']:,} | {row['seconds']:.1f} | {row['instances_per_second']:,.0f} | "
              f"{row['peak_rss_mib']:,.0f} |")
    if speedup is not None:
        print(f"\n96 long documents: 2 workers are {speedup:.2f}x as fast as 1 (median of "
              f"{args.rounds} alternating rounds, whole command wall time)")
    if large_ratio is not None:
        print(f"\nLarger corpus: this version takes {large_ratio:.2f}x the baseline's time "
              f"(median of {args.rounds} alternating rounds, 2 workers)")
    print(json.dumps({"rows": rows, "long_documents_speedup_2_vs_1": speedup,
                      "large_corpus_time_vs_baseline": large_ratio}, indent=2))


if __name__ == "__main__":
    main()
