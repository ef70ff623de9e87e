"""Which pretraining settings leave the unigram plateau soonest on 2 CPU cores? A resumable sweep.

    python benchmarks/pretraining_recipe.py --train_file=data/train.tfrecord \
        --eval_file=data/heldout.tfrecord --output_dir=recipe --runs=lamb-0.01,adamw-0.001

Each run is `run_pretraining.py` with one setting changed from the base
(the demo's model shape, `--steps`, `--batch`, the records of `--train_file`):
the optimizer and its learning rate, warm-up, batch size, model shape, or the
records themselves (sequence length, vocabulary size, masking budget). A run
that changes the records builds its own from `--corpus_dir` (the demo corpus:
train.txt, heldout.txt) with `create_pretraining_data.py`, the base records'
flags and its one change, under `<output_dir>/data/`, held-out records
included (in its length and pieces, masked as the base ones are). A masking
run's held-out records are the base ones padded to more masked slots, so its
numbers compare with every other run's; a run with another length or
vocabulary is evaluated on held-out pairs of its own, and only its sentence-order
accuracy and the step it left the plateau compare. A run is a name from
`RUNS` below (or `all`); finished runs (a `done` marker) are skipped, a
killed one resumes from its last checkpoint, so the sweep can run in the
background (`nohup ... &`) and be restarted at will.

Written as the runs finish:

* `<output_dir>/results.json`: per run the settings, and the curves —
  training masked-LM loss (mean of 50 steps) against step and training
  wall-clock seconds, held-out masked-LM loss / accuracy and sentence-order
  accuracy at every checkpoint, the unigram loss and the diagnostics'
  findings;
* `<output_dir>/recipe.png`: held-out masked-LM loss against wall-clock time
  and against step, one line per run.
"""

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from albert.demo import RECORD_FLAGS, masked_predictions  # noqa: E402  (the package, above)
from albert.io import write_text_atomically  # noqa: E402

# The demo's model shape: H=128, E=64, 4 all-shared layers, 8k vocabulary.
DEMO_MODEL = {"vocab_size": 8000, "embedding_size": 64, "hidden_size": 128,
              "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 512,
              "max_position_embeddings": 64, "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0}

# name: run_pretraining.py flags (and "model": config changes) that differ from the base.
RUNS = {
    "lamb-0.01": {"optimizer": "lamb", "learning_rate": 0.01},
    "lamb-0.02": {"optimizer": "lamb", "learning_rate": 0.02},
    "lamb-0.005": {"optimizer": "lamb", "learning_rate": 0.005},
    "adamw-0.001": {"optimizer": "adamw", "learning_rate": 0.001},
    "adamw-0.0005": {"optimizer": "adamw", "learning_rate": 0.0005},
    "adamw-0.002": {"optimizer": "adamw", "learning_rate": 0.002},
    "adamw-0.001-batch32": {"optimizer": "adamw", "learning_rate": 0.001, "train_batch_size": 32},
    "adamw-0.001-warmup0.3": {"optimizer": "adamw", "learning_rate": 0.001, "warmup_fraction": 0.3},
    "adamw-0.001-L2": {"optimizer": "adamw", "learning_rate": 0.001,
                       "model": {"num_hidden_layers": 2}},
    # Batch size at a fixed number of examples (steps scale inversely), LAMB's rate by the
    # square-root rule from 0.01 at batch 64.
    "lamb-0.014-batch128": {"optimizer": "lamb", "learning_rate": 0.014,
                            "train_batch_size": 128, "num_train_steps": "half"},
    "lamb-0.007-batch32": {"optimizer": "lamb", "learning_rate": 0.007,
                           "train_batch_size": 32, "num_train_steps": "double"},
    "lamb-0.01-warmup0.02": {"optimizer": "lamb", "learning_rate": 0.01, "warmup_fraction": 0.02},
    "lamb-0.01-warmup0.3": {"optimizer": "lamb", "learning_rate": 0.01, "warmup_fraction": 0.3},
    "lamb-0.01-H256": {"optimizer": "lamb", "learning_rate": 0.01,
                       "model": {"hidden_size": 256, "intermediate_size": 1024}},
    "lamb-0.01-L2": {"optimizer": "lamb", "learning_rate": 0.01, "model": {"num_hidden_layers": 2}},
    "lamb-0.01-E128": {"optimizer": "lamb", "learning_rate": 0.01, "model": {"embedding_size": 128}},
    # The paper runner's `tiny` shape (ALBERT-base widths / 8, depth / 2: H=96, E=16, 6 layers,
    # 12 heads of 8, dropout 0.1) on the same records.
    "lamb-0.01-tiny-shape": {"optimizer": "lamb", "learning_rate": 0.01,
                             "model": {"hidden_size": 96, "embedding_size": 16,
                                       "intermediate_size": 384, "num_hidden_layers": 6,
                                       "num_attention_heads": 12, "hidden_dropout_prob": 0.1,
                                       "attention_probs_dropout_prob": 0.1}},
    # Speed, not recipe: does bfloat16 (where the CPU has it natively) learn like float32?
    "lamb-0.01-bf16": {"optimizer": "lamb", "learning_rate": 0.01,
                       "mixed_precision": "mixed_bfloat16"},
    # The records ("data": create_pretraining_data.py changes). Length 128 at batch 32 sees as
    # many tokens per step as length 64 at batch 64; LAMB's rate by the square-root rule.
    "lamb-0.007-seq128-batch32": {"optimizer": "lamb", "learning_rate": 0.007,
                                  "train_batch_size": 32, "data": {"max_seq_length": 128},
                                  "model": {"max_position_embeddings": 128}},
    "lamb-0.01-vocab16k": {"optimizer": "lamb", "learning_rate": 0.01,
                           "data": {"vocab_size": 16000}, "model": {"vocab_size": 16000}},
    "lamb-0.01-mask0.2": {"optimizer": "lamb", "learning_rate": 0.01,
                          "data": {"masked_lm_prob": 0.2}},
    "lamb-0.01-mask0.3": {"optimizer": "lamb", "learning_rate": 0.01,
                          "data": {"masked_lm_prob": 0.3}},
}

# The base records: the demo's (albert/demo.py) at length 64.
BASE_DATA = {"max_seq_length": 64, "vocab_size": 8000, "masked_lm_prob": 0.15}

STEP_SCALES = {"half": 0.5, "double": 2.0}


def run_flags(settings, steps, batch):
    flags = {"train_batch_size": batch, "num_train_steps": steps}
    flags.update({k: v for k, v in settings.items()
                  if k not in ("model", "warmup_fraction", "data")})
    if flags["num_train_steps"] in STEP_SCALES:  # the same number of examples at another batch
        flags["num_train_steps"] = int(steps * STEP_SCALES[flags["num_train_steps"]])
    flags["num_warmup_steps"] = int(settings.get("warmup_fraction", 0.1) * flags["num_train_steps"])
    return flags


def run_checked(command, log_path):
    print(" ".join(command), flush=True)
    with open(log_path, "a", encoding="utf-8") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)


def record_files(settings, args):
    """(train file, eval file, variant directory or None) of a run."""
    change = settings.get("data")
    if not change:
        return args.train_file, args.eval_file, None
    data = dict(BASE_DATA, **change)
    directory = os.path.join(args.output_dir, "data", "-".join(
        f"{key}{data[key]}" for key in sorted(change)))
    return (os.path.join(directory, "train.tfrecord"),
            os.path.join(directory, "heldout.tfrecord"), directory)


def build_records(settings, args):
    """Make the run's own records if it changes them (the base ones are given).

    run_pretraining.py wants the held-out records in the training records' length and number
    of masked slots (as the original does), so a variant gets its own held-out records. They
    mask the base share of pieces: with the base length and vocabulary they are the base
    held-out pairs and masks again, only padded to more slots, and a masking run's numbers
    compare with every other run's."""
    train_file, eval_file, directory = record_files(settings, args)
    if directory is None:
        return train_file, eval_file
    data = dict(BASE_DATA, **settings["data"])
    os.makedirs(directory, exist_ok=True)
    log_path = os.path.join(directory, "log.txt")
    spm_model = args.spm_model_file
    if data["vocab_size"] != BASE_DATA["vocab_size"]:
        prefix = os.path.join(directory, f"spm{data['vocab_size']}")
        spm_model = prefix + ".model"
        if not os.path.exists(spm_model):  # the demo's trainer, on the demo's training text
            run_checked([sys.executable, "-m", "albert.tokenization", "train",
                         f"--input={os.path.join(args.corpus_dir, 'train.txt')}",
                         f"--model_prefix={prefix}", f"--vocab_size={data['vocab_size']}"],
                        log_path)
    slots = masked_predictions(data["max_seq_length"], data["masked_lm_prob"])
    for split, target, masked_lm_prob in (("train", train_file, data["masked_lm_prob"]),
                                          ("heldout", eval_file, BASE_DATA["masked_lm_prob"])):
        # create_pretraining_data.py renames its outputs into place only when it succeeds, so
        # an existing file is complete.
        if not os.path.exists(target):
            run_checked([sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
                         f"--input_file={os.path.join(args.corpus_dir, split + '.txt')}",
                         f"--output_file={target}", f"--spm_model_file={spm_model}",
                         f"--max_seq_length={data['max_seq_length']}",
                         f"--max_predictions_per_seq={slots}",
                         f"--masked_lm_prob={masked_lm_prob}", *RECORD_FLAGS[split]], log_path)
    return train_file, eval_file


def run_one(name, args):
    directory = os.path.join(args.output_dir, name)
    if os.path.exists(os.path.join(directory, "done")):
        return directory
    settings = RUNS[name]
    train_file, eval_file = build_records(settings, args)
    os.makedirs(directory, exist_ok=True)
    config = dict(DEMO_MODEL, **settings.get("model", {}))
    config_file = os.path.join(directory, "albert_config.json")
    with open(config_file, "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    flags = run_flags(settings, args.steps, args.batch)
    command = [sys.executable, os.path.join(REPO, "run_pretraining.py"),
               f"--albert_config_file={config_file}", f"--input_file={train_file}",
               f"--eval_file={eval_file}", f"--output_dir={directory}/run", "--do_train",
               "--do_eval", f"--save_checkpoints_steps={args.eval_every}", "--keep_checkpoint_max=1",
               "--max_eval_steps=1000000", "--eval_batch_size=256", "--steps_per_loop=50",
               "--noprogress", *[f"--{k}={v}" for k, v in flags.items()]]
    run_checked(command, os.path.join(directory, "log.txt"))
    with open(os.path.join(directory, "done"), "w", encoding="utf-8") as handle:
        handle.write(" ".join(command) + "\n")
    return directory


def curves(name, directory, batch):
    with open(os.path.join(directory, "run", "train_log.jsonl"), encoding="utf-8") as handle:
        log = [json.loads(line) for line in handle]
    with open(os.path.join(directory, "run", "eval_results.json"), encoding="utf-8") as handle:
        journal = json.load(handle)
    batch = RUNS[name].get("train_batch_size", batch)
    # Training wall-clock time up to each step (evaluations excluded).
    seconds_at, elapsed = {}, 0.0
    for row in log:
        elapsed += batch / row["examples_per_second"]
        seconds_at[row["step"]] = elapsed

    def smoothed(index):
        window = log[max(0, index - 49):index + 1]
        return sum(r["masked_lm_loss"] for r in window) / len(window)

    return {
        "settings": RUNS[name],
        "train": [{"step": row["step"], "seconds": seconds_at[row["step"]],
                   "masked_lm_loss_mean50": smoothed(i),
                   "minus_unigram": row.get("masked_lm_loss_minus_unigram")}
                  for i, row in enumerate(log) if row["step"] % 50 == 0],
        "heldout": [{"step": e["step"], "seconds": seconds_at.get(e["step"]),
                     "masked_lm_loss": e["masked_lm_loss"],
                     "masked_lm_accuracy": e["masked_lm_accuracy"],
                     "sentence_order_accuracy": e["sentence_order_accuracy"],
                     "findings": [f["kind"] for f in e.get("findings", [])]}
                    for e in journal["evaluations"]],
        "findings": [f["kind"] for f in journal.get("findings", [])],
    }


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_time, by_step) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, result in results.items():
        heldout = result["heldout"]
        by_time.plot([h["seconds"] / 60 for h in heldout], [h["masked_lm_loss"] for h in heldout],
                     marker=".", label=name)
        by_step.plot([h["step"] for h in heldout], [h["masked_lm_loss"] for h in heldout],
                     marker=".", label=name)
    by_time.set_xlabel("training wall-clock minutes (2 cores)")
    by_step.set_xlabel("step")
    for axis in (by_time, by_step):
        axis.set_ylabel("held-out masked-LM loss")
        axis.grid(alpha=0.3)
    by_step.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def summary_rows(results):
    """Per run: when it left the plateau, and where it ended (the table of docs/pretraining.md)."""
    rows = []
    for name, result in results.items():
        # The first step from which the training loss stays more than 0.1 nats below unigram.
        left = None
        for row in result["train"]:
            below = row["minus_unigram"] is not None and row["minus_unigram"] < -0.1
            left = (left or row) if below else None
        last = result["heldout"][-1]
        rows.append({"run": name, "left_plateau_at_step": left and left["step"],
                     "left_plateau_at_seconds": left and round(left["seconds"]),
                     "step": last["step"], "seconds": round(last["seconds"] or 0),
                     "heldout_masked_lm_loss": round(last["masked_lm_loss"], 3),
                     "heldout_masked_lm_accuracy": round(last["masked_lm_accuracy"], 3),
                     "heldout_sentence_order_accuracy": round(last["sentence_order_accuracy"], 3),
                     "best_heldout_sentence_order_accuracy": round(
                         max(h["sentence_order_accuracy"] for h in result["heldout"]), 3)})
    return rows


def markdown_table(results, heldout_counts):
    """The summary as the table of docs/pretraining.md (SOP in standard errors above chance).

    `heldout_counts(run)`: the sentence-label counts of the held-out records the run was
    evaluated on (a run with its own vocabulary has its own)."""
    from albert.evaluation.chance import margin_in_standard_errors

    lines = ["| run | left the plateau at step | last step | held-out MLM loss | MLM acc | "
             "SOP acc (SE above chance) | best SOP acc |", "|---|---:|---:|---:|---:|---:|---:|"]
    for row in summary_rows(results):
        counts = heldout_counts(row["run"])
        margin = margin_in_standard_errors(row["heldout_sentence_order_accuracy"],
                                           counts.majority_share, counts.total)
        lines.append(f"| {row['run']} | {row['left_plateau_at_step'] or 'never'} | {row['step']} | "
                     f"{row['heldout_masked_lm_loss']:.3f} | "
                     f"{row['heldout_masked_lm_accuracy']:.3f} | "
                     f"{row['heldout_sentence_order_accuracy']:.3f} ({margin:+.1f}) | "
                     f"{row['best_heldout_sentence_order_accuracy']:.3f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--eval_file", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--corpus_dir", help="the demo corpus (train.txt, heldout.txt) the base "
                        "records were made from; needed by runs that change the records")
    parser.add_argument("--spm_model_file", help="the base records' vocabulary; needed by runs "
                        "that change the records")
    parser.add_argument("--runs", default="all", help=f"comma-separated: {', '.join(RUNS)}")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--eval_every", type=int, default=250)
    parser.add_argument("--markdown", action="store_true",
                        help="print the finished runs' table (from results.json) and exit")
    args = parser.parse_args()
    if args.markdown:
        from albert.evaluation.chance import sentence_label_counts

        with open(os.path.join(args.output_dir, "results.json"), encoding="utf-8") as handle:
            results = json.load(handle)["runs"]
        print(markdown_table(results, lambda run: sentence_label_counts(
            record_files(RUNS[run], args)[1])))
        return
    names = list(RUNS) if args.runs == "all" else args.runs.split(",")
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        parser.error(f"unknown runs: {', '.join(unknown)}")
    if any("data" in RUNS[n] for n in names) and not (args.corpus_dir and args.spm_model_file):
        sys.exit("ERROR: runs that change the records (" + ", ".join(
            n for n in names if "data" in RUNS[n]) + ") need --corpus_dir and --spm_model_file")
    results_path = os.path.join(args.output_dir, "results.json")
    for name in names:
        run_one(name, args)
        # Every finished run in the directory, not only this invocation's: a sweep continued
        # with other --runs adds to the results instead of replacing them.
        results = {}
        for done in RUNS:
            directory = os.path.join(args.output_dir, done)
            if os.path.exists(os.path.join(directory, "done")):
                results[done] = curves(done, directory, args.batch)
        write_text_atomically(results_path, json.dumps(
            {"command": " ".join(sys.argv), "base_model": DEMO_MODEL, "steps": args.steps,
             "batch": args.batch, "summary": summary_rows(results), "runs": results}, indent=1))
        plot(results, os.path.join(args.output_dir, "recipe.png"))


if __name__ == "__main__":
    main()
