"""Peak training memory per model, ours beside Hugging Face, one run: a pretraining step and a
GLUE fine-tuning step.

    python benchmarks/training_memory.py --output=benchmarks/results/memory/training_peaks.json

For each model (ALBERT base, large, xlarge, xxlarge v2 and BERT-large, float32) and task, ours
and Hugging Face each run in a fresh process and its peak resident memory is sampled every
50 ms (`pretraining_speed.run_process`):

* pretraining: `benchmarks/pretraining_speed.py`'s processes (ours: the training loop's step
  with LAMB and global-norm clipping; Hugging Face: `AlbertForPreTraining`, eager PyTorch,
  fused AdamW, `clip_grad_norm_(1.0)`);
* classification (a GLUE fine-tuning step, SST-2's two labels): ours, `run_classifier.py`'s
  step (`ClassificationTask`, the training loop, AdamW, the clip); Hugging Face,
  `AlbertForSequenceClassification`, eager PyTorch, fused AdamW, `clip_grad_norm_(1.0)`.

Both start from the same weights (the encoder's; the classifier's head is new in both), on the
same batch of `--batch_size` sequences of `--seq_length` tokens, the shape of every sequence
fixed, so Hugging Face's best memory setting (sorted dynamic padding) is the one measured.
Each process runs a warm-up call of two steps, then `--steps` timed steps. Each model's
`python -m albert.memory` CPU estimate of the same process's peak is written beside the
measurements, recomputed on every run.

The output JSON is written after every measurement; a second run with the same --output skips
what it holds (the measurement of a large model takes minutes).
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCHMARKS)
sys.path.insert(0, BENCHMARKS)

import pretraining_speed  # noqa: E402  (sets up albert's import path)

MODELS = {"albert-base": "albert_base_v2.json", "albert-large": "albert_large_v2.json",
          "albert-xlarge": "albert_xlarge_v2.json", "albert-xxlarge": "albert_xxlarge_v2.json",
          "bert-large": "bert_large.json"}
TASKS = ("pretraining", "classification")
LABELS = 2


def classification_batch(batch: dict) -> dict:
    """SST-2's features for the pretraining batch's token rows (labels alternate)."""
    import numpy as np

    rows = len(batch["input_word_ids"])
    return {"input_word_ids": batch["input_word_ids"], "input_mask": batch["input_mask"],
            "input_type_ids": batch["input_type_ids"],
            "label_ids": (np.arange(rows) % LABELS).astype("int32"),
            "is_real_example": np.ones(rows, "int32")}


def classify_ours(args, config, weights, batch):
    import tensorflow as tf

    from albert.finetuning_data.glue import TASKS as GLUE_TASKS
    from albert.tasks.classification import ClassificationTask
    from albert.training.distribute import create_strategy
    from albert.training.loop import Trainer, TrainerConfig, variable_names_for
    from albert.training.optimization import create_optimizer

    task = ClassificationTask(config=config, glue_task=GLUE_TASKS["sst-2"],
                              max_seq_length=args.seq_length, initial_weights=weights())
    strategy = create_strategy("one_device")
    trainer = Trainer(task, strategy,
                      TrainerConfig(tempfile.mkdtemp(), 10 ** 6, args.batch_size,
                                    steps_per_loop=args.steps),
                      lambda names: create_optimizer("adamw", 1e-5, 10 ** 6, 0,
                                                     variable_names=names,
                                                     gradients_summed_by_caller=True),
                      variable_names_for)
    model, optimizer = trainer.build()
    # As the training loop does on a fresh run: the weights go into the model and the task
    # lets go of them (held, they would count in the step's peak).
    task.initialize(model)
    features = classification_batch(batch)
    dataset = strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensors(features).repeat())
    train_steps = trainer.training_steps(model, optimizer, iter(dataset))
    train_steps(tf.constant(2))  # trace, warm up
    start = time.perf_counter()
    float(train_steps(tf.constant(args.steps))["loss"][-1])
    return [(time.perf_counter() - start) / args.steps]


def classify_hf(args, config, weights, batch):
    import torch
    import transformers

    model = transformers.AlbertForSequenceClassification.from_pretrained(
        os.path.join(args.weights_dir, "hf"), num_labels=LABELS, attn_implementation="sdpa")
    model.train()
    optimizer = pretraining_speed.hf_adamw(model.parameters(), 1e-5)
    features = classification_batch(batch)
    inputs = dict(input_ids=torch.tensor(features["input_word_ids"], dtype=torch.long),
                  attention_mask=torch.tensor(features["input_mask"], dtype=torch.long),
                  token_type_ids=torch.tensor(features["input_type_ids"], dtype=torch.long),
                  labels=torch.tensor(features["label_ids"], dtype=torch.long))

    step = pretraining_speed.hf_training_step(model, optimizer, inputs)
    step()
    step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    return [(time.perf_counter() - start) / args.steps]


def add_estimates(report: dict) -> None:
    """`python -m albert.memory`'s CPU estimate of each measured process's peak, beside it."""
    from albert import memory
    from albert.config import AlbertConfig

    shape = report["shape"]
    for name, tasks in report["results"].items():
        config = AlbertConfig.from_json_file(os.path.join(REPO, "configs", MODELS[name]))
        for task, entry in tasks.items():
            predictions = shape["predictions"] if task == "pretraining" else 0
            estimate = memory.estimate(config, shape["seq_length"], predictions)
            entry["estimate_gib"] = estimate.process_peak(shape["batch_size"]) / memory.GIB
            entry["estimate_vs_ours"] = entry["estimate_gib"] / entry["ours"]["peak_gib"]


def measure_model(args, name: str, task: str, inputs: str) -> dict:
    config = os.path.join(REPO, "configs", MODELS[name])
    script = pretraining_speed.__file__ if task == "pretraining" else os.path.abspath(__file__)
    common = [sys.executable, script, f"--config={config}", f"--batch_size={args.batch_size}",
              f"--seq_length={args.seq_length}", f"--predictions={args.predictions}",
              f"--steps={args.steps}", "--repeats=1", f"--weights_dir={inputs}"]
    entry = {}
    for impl in ("ours", "hf"):
        result = pretraining_speed.run_process(common + [f"--impl={impl}"])
        entry[impl] = {"peak_gib": result["peak_rss_mib"] / 1024,
                       "seconds_per_step": result["seconds_per_step"]}
    entry["ours_vs_hf"] = entry["ours"]["peak_gib"] / entry["hf"]["peak_gib"]
    return entry


def measure(args):
    """One implementation of a classification step, in this process; prints a JSON line."""
    import numpy as np

    from albert.config import AlbertConfig

    config = AlbertConfig.from_json_file(args.config)
    with np.load(os.path.join(args.weights_dir, "batch.npz")) as saved:
        batch = dict(saved)

    def weights():
        with np.load(os.path.join(args.weights_dir, "weights.npz")) as saved:
            return dict(saved)

    runner = {"ours": classify_ours, "hf": classify_hf}[args.impl]
    timings = runner(args, config, weights, batch)
    print(json.dumps({"seconds_per_step": min(timings)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", help="results JSON (resumed if it exists); required")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=64)
    parser.add_argument("--predictions", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1, help="timed steps after the warm-up")
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--impl", choices=("ours", "hf"), help=argparse.SUPPRESS)
    parser.add_argument("--weights_dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl:
        measure(args)
        return
    if not args.output:
        parser.error("--output is required")
    models = args.models.split(",")
    unknown = sorted(set(models) - set(MODELS)) + sorted(set(args.tasks.split(",")) - set(TASKS))
    if unknown:
        parser.error(f"unknown model or task: {', '.join(unknown)}")
    report = {"command": "python " + " ".join([os.path.relpath(__file__, REPO)] + sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d"), "machine": machine(),
              # Set by `import albert` (inside machine()) unless the caller chose; inherited by
              # every measured process.
              "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset"),
              "shape": {"batch_size": args.batch_size, "seq_length": args.seq_length,
                        "predictions": args.predictions, "precision": "float32"},
              "results": {}}
    if os.path.exists(args.output):
        with open(args.output) as file:
            report["results"] = json.load(file)["results"]
    for name in models:
        for task in args.tasks.split(","):
            if task in report["results"].get(name, {}):
                continue
            inputs = tempfile.mkdtemp(prefix="training_memory_")
            try:
                pretraining_speed.write_inputs(
                    argparse.Namespace(config=os.path.join(REPO, "configs", MODELS[name]),
                                       batch_size=args.batch_size, seq_length=args.seq_length,
                                       predictions=args.predictions), inputs)
                entry = measure_model(args, name, task, inputs)
            finally:
                shutil.rmtree(inputs)
            report["results"].setdefault(name, {})[task] = entry
            print(f"{name} {task}: ours {entry['ours']['peak_gib']:.2f} GiB, Hugging Face "
                  f"{entry['hf']['peak_gib']:.2f} GiB ({entry['ours_vs_hf']:.2f}x)", flush=True)
            write_report(report, args.output)
    # Recomputed on every run: a run over finished measurements updates only these.
    add_estimates(report)
    write_report(report, args.output)
    for name, tasks in report["results"].items():
        for task, entry in tasks.items():
            print(f"{name} {task}: measured {entry['ours']['peak_gib']:.2f} GiB, estimated "
                  f"{entry['estimate_gib']:.2f} GiB ({entry['estimate_vs_ours']:.2f})")


def add_step_arguments(parser, config: str, steps: int) -> None:
    """The shape flags of the memory benchmarks that time one model's training step."""
    parser.add_argument("--config", default=config)
    parser.add_argument("--output", required=True)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=64)
    parser.add_argument("--predictions", type=int, default=10)
    parser.add_argument("--steps", type=int, default=steps)


def refuse_existing(output: str) -> None:
    """A finished report is never overwritten: one ERROR line before anything runs."""
    if os.path.exists(output):
        sys.exit(f"ERROR: {output} exists; choose another --output")


def write_new_report(output: str, **results) -> None:
    """`results` with the command that made them (from the repository root), the date and the
    machine, into `output`, which must not exist."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    report = {"command": " ".join(["python", script] + sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d"), "machine": machine(), **results}
    with open(output, "x") as file:
        json.dump(report, file, indent=1)


def write_report(report: dict, output: str) -> None:
    temporary = output + ".tmp"
    with open(temporary, "w") as file:
        json.dump(report, file, indent=2)
    os.replace(temporary, output)


def machine() -> str:
    from albert.training.cpu_features import cpu_features

    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as file:
            model = next(line.split(":", 1)[1].strip() for line in file
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    features = sorted(feature for feature in cpu_features() if feature.startswith(("avx", "amx")))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{os.cpu_count()} cores, {model} ({', '.join(features) or 'no AVX'}), "
            f"{memory:.0f} GiB")


if __name__ == "__main__":
    main()
