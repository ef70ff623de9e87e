"""Held-out curves of several pretraining runs side by side: a JSON file and a PNG.

    python benchmarks/compare_runs.py --output=results/shuffle \
        "windowed shuffle=/runs/old" "global shuffle=/runs/new"

Each argument is `label=run directory` (a run_pretraining.py --output_dir
evaluated with --do_eval). Writes `<output>.json` (per run: step, held-out
masked-LM loss and accuracy, sentence-order accuracy; the training masked-LM
loss averaged over the 50 steps before each evaluation) and `<output>.png`
(three panels against step).
"""

import argparse
import json
import os

PANELS = (("masked_lm_loss", "held-out masked-LM loss"),
          ("masked_lm_accuracy", "held-out masked-LM accuracy"),
          ("sentence_order_accuracy", "held-out sentence-order accuracy"))


def read_run(directory):
    with open(os.path.join(directory, "eval_results.json"), encoding="utf-8") as handle:
        journal = json.load(handle)
    with open(os.path.join(directory, "train_log.jsonl"), encoding="utf-8") as handle:
        log = [json.loads(line) for line in handle]
    by_step = {row["step"]: row for row in log}
    curve = []
    for entry in journal["evaluations"]:
        before = [by_step[s]["masked_lm_loss"] for s in range(entry["step"] - 49, entry["step"] + 1)
                  if s in by_step]
        curve.append({"step": entry["step"],
                      **{key: entry[key] for key, _ in PANELS},
                      "train_masked_lm_loss_mean50": sum(before) / len(before) if before else None})
    return curve


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="label=run directory")
    parser.add_argument("--output", required=True, help="path prefix of the .json and .png")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    runs = {}
    for item in args.runs:
        label, _, directory = item.partition("=")
        runs[label] = read_run(directory)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output + ".json", "w", encoding="utf-8") as handle:
        json.dump({"runs": runs, "directories": dict(item.split("=", 1) for item in args.runs)},
                  handle, indent=1)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PANELS), figsize=(15, 4.2))
    for axis, (key, name) in zip(axes, PANELS):
        for label, curve in runs.items():
            axis.plot([p["step"] for p in curve], [p[key] for p in curve], marker=".", label=label)
        axis.set_xlabel("step")
        axis.set_title(name, fontsize=10)
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if args.title:
        figure.suptitle(args.title, fontsize=10)
    figure.tight_layout()
    figure.savefig(args.output + ".png", dpi=110)
    for label, curve in runs.items():
        last = curve[-1]
        print(f"{label}: step {last['step']}: " +
              ", ".join(f"{key} {last[key]:.4f}" for key, _ in PANELS))


if __name__ == "__main__":
    main()
