"""Feature creation from a user's CSV: peak memory against the file's size, and examples/s
beside Hugging Face `datasets.map` tokenization at the same sequence length.

    pip install datasets   # Hugging Face's side only
    python benchmarks/own_files_features.py --output=benchmarks/results/own_files_features.json

Files of 100,000 and 1,000,000 rows are written first. Each row is a movie-review sentence
(Pang & Lee's polarity data, shipped in the gensim wheel) and one of three labels. Each
measurement then runs in a fresh process, which reports its peak resident memory
(`ru_maxrss`):

* **ours**: the path `run_classifier.py --train_file` takes. It scans the file once for the
  labels (with every row checked) and writes `custom_train.tf_record` from the file again,
  streaming, with SentencePiece on each text and `max_seq_length` 128. Files of 4 MiB or
  more (both here) have their records made by one worker process a core.
* **Hugging Face**: `datasets.load_dataset("csv")`, then `.map` of `AlbertTokenizerFast`
  (made from the same SentencePiece model) with `batched=True`, truncation and padding to
  128. This is its fastest setting. It runs with `num_proc` 1 and 2, and the better one is
  kept. Its Arrow cache goes to a temporary directory, as `datasets` writes one by default.

Worker processes are watched from /proc while they run (20 times a second): each one's peak
resident memory since its exec (VmHWM) and its largest sampled proportional share (Pss, which
splits pages shared with other processes among them). A forked worker (Hugging Face's) shares
its parent's pages, so its resident figure counts them and its Pss is the fairer one; ours are
spawned and start empty.

Both sides do the same work per example: tokenize up to 128 pieces and write fixed-length
features. Ours also writes TFRecords and hashes the file; theirs writes Arrow. The machine's
CPU features are recorded, and only figures from the same run are compared.
"""

import argparse
import csv
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

SIZES = (100_000, 1_000_000)
LABELS = ("negative", "neutral", "positive")


def write_csv(path: str, rows: int, seed: int = 0) -> None:
    from albert.datasets import sources
    from albert.datasets.glue_demo import polarity_sentences

    sentences = [s for s, _ in polarity_sentences(sources.gensim_file(sources.PANG_LEE_POLARITY))]
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for _ in range(rows):
            writer.writerow([rng.choice(sentences), rng.choice(LABELS)])


def ours(path: str, spm: str, work: str) -> dict:
    from albert.finetuning_data.labelled_files import ColumnSpec
    from albert.tasks import file_classification
    from albert.tokenization import load_tokenizer

    tokenizer = load_tokenizer(spm_model_file=spm)
    start = time.perf_counter()
    task = file_classification.task_from_training_file(path, None, ColumnSpec(("text",), "label"),
                                                       None)
    cache = file_classification.plan_cache(task, path, None, "train",
                                           os.path.join(work, "custom_train.tf_record"), 128,
                                           tokenizer, checked=True)
    records = file_classification.write_cache(cache, task, 128, tokenizer)
    return {"examples": records, "seconds": time.perf_counter() - start}


def huggingface(path: str, spm: str, work: str, num_proc: int) -> dict:
    import datasets
    import transformers

    datasets.disable_progress_bars()
    tokenizer = transformers.AlbertTokenizerFast(vocab_file=spm)
    start = time.perf_counter()
    dataset = datasets.load_dataset("csv", data_files=path, cache_dir=os.path.join(work, "hf"),
                                    split="train")
    dataset = dataset.map(lambda batch: tokenizer(batch["text"], truncation=True, max_length=128,
                                                  padding="max_length"),
                          batched=True, num_proc=None if num_proc == 1 else num_proc)
    return {"examples": len(dataset), "seconds": time.perf_counter() - start}


def measure(side: str, path: str, spm: str, num_proc: int = 1) -> dict:
    """One side in a fresh process: its result and peak resident memory."""
    with tempfile.TemporaryDirectory() as work:
        result_file = os.path.join(work, "result.json")
        process = subprocess.Popen(
            [sys.executable, __file__, "--child", side, "--csv", path, "--spm", spm,
             "--work", work, "--num_proc", str(num_proc), "--result", result_file],
            cwd=REPO, stdout=subprocess.DEVNULL)
        if process.wait():
            raise RuntimeError(f"{side} failed (exit {process.returncode})")
        with open(result_file, encoding="utf-8") as handle:
            return json.load(handle)


def _high_water_mark_mb() -> float:
    """This process's peak resident memory since its exec (VmHWM; ru_maxrss would include
    the parent's memory at the fork)."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


class WorkerMemory:
    """Peaks of this process's descendants, sampled from /proc on a thread while they run
    (getrusage's ru_maxrss for children would count the parent's pages at each fork)."""

    def __init__(self, interval_s: float = 0.05):
        self.resident_mb, self.proportional_mb = {}, {}
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()

    @staticmethod
    def _descendants(root: int) -> list:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", encoding="ascii") as handle:
                        # The command name (field 2) may hold spaces: the parent follows ") S ".
                        parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue   # it ended while we looked
        found, frontier = [], [root]
        while frontier:
            parent = frontier.pop()
            children = [pid for pid, ppid in parents.items() if ppid == parent]
            found += children
            frontier += children
        return found

    @staticmethod
    def _field_mb(path: str, name: str) -> float:
        with open(path, encoding="ascii") as handle:
            for line in handle:
                if line.startswith(name):
                    return int(line.split()[1]) / 1024
        raise OSError(f"no {name} in {path}")

    def _watch(self) -> None:
        while not self._stop.wait(self._interval_s):
            for pid in self._descendants(os.getpid()):
                try:
                    resident = self._field_mb(f"/proc/{pid}/status", "VmHWM:")
                    proportional = self._field_mb(f"/proc/{pid}/smaps_rollup", "Pss:")
                except OSError:
                    continue   # it ended, or is a kernel-side zombie without memory maps
                self.resident_mb[pid] = max(resident, self.resident_mb.get(pid, 0.0))
                self.proportional_mb[pid] = max(proportional, self.proportional_mb.get(pid, 0.0))


def child(args) -> None:
    with WorkerMemory() as workers:
        if args.child == "ours":
            result = ours(args.csv, args.spm, args.work)
        else:
            result = huggingface(args.csv, args.spm, args.work, args.num_proc)
    result["examples_per_second"] = result["examples"] / result["seconds"]
    result["peak_rss_mb"] = _high_water_mark_mb()
    # Worker processes (ours, datasets' num_proc; a multiprocessing resource tracker counts
    # too): how many were seen, and the largest one's peaks.
    result["worker_processes_seen"] = len(workers.resident_mb)
    result["largest_worker_peak_rss_mb"] = max(workers.resident_mb.values(), default=0.0)
    result["largest_worker_peak_pss_mb"] = max(workers.proportional_mb.values(), default=0.0)
    with open(args.result, "w", encoding="utf-8") as handle:
        json.dump(result, handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=None)
    parser.add_argument("--spm_model_file", default=None,
                        help="a SentencePiece model (default: one trained here on the sentences)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="rows of the files, smallest first (memory growth: last − first)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--csv", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--spm", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--work", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--num_proc", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from albert.training.cpu_features import cpu_features

    with tempfile.TemporaryDirectory() as work:
        spm = args.spm_model_file
        if spm is None:
            text = os.path.join(work, "sentences.txt")
            write_csv(os.path.join(work, "vocab.csv"), 20_000)
            with open(os.path.join(work, "vocab.csv"), encoding="utf-8") as handle:
                sentences = [row[0] for row in csv.reader(handle)][1:]
            with open(text, "w", encoding="utf-8") as handle:
                handle.write("\n".join(sentences) + "\n")
            subprocess.run([sys.executable, "-m", "albert.tokenization", "train",
                            f"--input={text}", f"--model_prefix={work}/spm",
                            "--vocab_size=1000"], check=True, cwd=REPO)
            spm = os.path.join(work, "spm.model")
        rows = {}
        sizes = [int(value) for value in args.sizes.split(",")]
        for size in sizes:
            path = os.path.join(work, f"train-{size}.csv")
            write_csv(path, size)
            mine = measure("ours", path, spm)
            theirs = [measure("huggingface", path, spm, num_proc) for num_proc in (1, 2)]
            best = max(theirs, key=lambda r: r["examples_per_second"])
            best["num_proc"] = 1 + theirs.index(best)
            rows[str(size)] = {"file_mb": os.path.getsize(path) / 2**20, "ours": mine,
                               "huggingface_best": best, "huggingface_all": theirs}
            print(json.dumps({size: rows[str(size)]}), flush=True)
    small, large = rows[str(sizes[0])], rows[str(sizes[-1])]
    report = {
        "command": "python benchmarks/own_files_features.py --output="
                   "benchmarks/results/own_files_features.json",
        "machine": {"processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "cpu_features": sorted(cpu_features())},
        "max_seq_length": 128, "rows": rows,
        "ours_peak_rss_growth_mb": large["ours"]["peak_rss_mb"] - small["ours"]["peak_rss_mb"],
        "huggingface_peak_rss_growth_mb": (large["huggingface_best"]["peak_rss_mb"]
                                           - small["huggingface_best"]["peak_rss_mb"]),
        "speed_ratio_ours_over_huggingface": {
            size: rows[size]["ours"]["examples_per_second"]
            / rows[size]["huggingface_best"]["examples_per_second"] for size in rows}}
    from report_output import print_and_write
    print_and_write(report, args.output)


if __name__ == "__main__":
    main()
