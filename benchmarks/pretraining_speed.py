"""Pretraining steps/s and peak RSS: ours vs Hugging Face AlbertForPreTraining, same shapes.

    python benchmarks/pretraining_speed.py            # ALBERT-base, seq 128, batch 8, 20 predictions

Ours runs the real training step of `albert.training.loop.Trainer` (LAMB,
global-norm clipping, MLM logits only at the masked positions), with and
without XLA. Hugging Face runs `AlbertForPreTraining` in eager PyTorch the
way its examples pretrain: MLM logits at every position with -100 labels
elsewhere, `clip_grad_norm_(1.0)`, `torch.optim.AdamW` (PyTorch has no
LAMB). Both get identical weights (converted with our name table), inputs
and float32 precision; no dropout (the v2 configs).

Each implementation runs in its own process, so peak RSS (sampled every
50 ms) is its own; processes alternate over `--rounds` rounds and the
median steps/s is reported.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def make_batch(config, batch_size, seq_length, predictions, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch_size, seq_length)).astype("int32")
    mask = np.ones_like(ids)
    type_ids = np.zeros_like(ids)
    type_ids[:, seq_length // 2:] = 1
    positions = np.stack([np.sort(rng.choice(np.arange(1, seq_length - 1), predictions, replace=False))
                          for _ in range(batch_size)]).astype("int32")
    labels = np.take_along_axis(ids, positions, axis=1)
    ids_masked = ids.copy()
    np.put_along_axis(ids_masked, positions, 4, axis=1)
    return {"input_word_ids": ids_masked, "input_mask": mask, "input_type_ids": type_ids,
            "masked_lm_positions": positions, "masked_lm_ids": labels,
            "masked_lm_weights": np.ones(positions.shape, "float32"),
            "next_sentence_labels": rng.integers(0, 2, (batch_size, 1)).astype("int32")}


def run_ours(args, config, weights, batch):
    import tensorflow as tf

    from albert.checkpoints import assign_model_weights
    from albert.tasks.pretraining import PretrainingTask
    from albert.training.distribute import create_strategy
    from albert.training.loop import Trainer, TrainerConfig, variable_names_for
    from albert.training.optimization import create_optimizer

    class InMemoryTask(PretrainingTask):
        def train_dataset(self, worker, worker_batch_size):
            return tf.data.Dataset.from_tensors(batch).repeat()

    task = InMemoryTask(config, [], None, args.seq_length, args.predictions)
    trainer = Trainer(task, create_strategy("one_device"),
                      TrainerConfig(tempfile.mkdtemp(), 10 ** 6, args.batch_size,
                                    steps_per_loop=args.steps, jit_compile=bool(args.jit)),
                      lambda names: create_optimizer("lamb", 1e-4, 10 ** 6, 0, variable_names=names),
                      variable_names_for)
    model, optimizer = trainer._build()
    assign_model_weights(model, weights)
    iterator = iter(task.train_dataset(trainer.worker, args.batch_size))
    train_steps = trainer._train_function(model, optimizer, iterator)
    train_steps(tf.constant(2))  # trace, compile, warm up
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        losses = train_steps(tf.constant(args.steps))
        float(losses["loss"][-1])
        timings.append((time.perf_counter() - start) / args.steps)
    return timings


def run_hf(args, config, weights, batch):
    import torch
    import transformers

    from albert.checkpoints import write_checkpoint

    directory = tempfile.mkdtemp()
    write_checkpoint(weights, config, directory, "hf")
    model = transformers.AlbertForPreTraining.from_pretrained(directory, attn_implementation="sdpa")
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.tensor(batch["input_word_ids"], dtype=torch.long)
    labels = torch.full_like(ids, -100)
    positions = torch.tensor(batch["masked_lm_positions"], dtype=torch.long)
    labels.scatter_(1, positions, torch.tensor(batch["masked_lm_ids"], dtype=torch.long))
    inputs = dict(input_ids=ids, attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                  token_type_ids=torch.tensor(batch["input_type_ids"], dtype=torch.long),
                  labels=labels,
                  sentence_order_label=torch.tensor(batch["next_sentence_labels"][:, 0], dtype=torch.long))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss)

    step()
    step()
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        timings.append((time.perf_counter() - start) / args.steps)
    return timings


def measure(args):
    """One implementation, in this process; prints a JSON line."""
    import keras

    from albert.checkpoints import model_weights
    from albert.config import AlbertConfig
    from albert.modeling import AlbertPretrainer

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_json_file(args.config)
    weights = model_weights(AlbertPretrainer(config))
    batch = make_batch(config, args.batch_size, args.seq_length, args.predictions)
    timings = (run_ours if args.impl == "ours" else run_hf)(args, config, weights, batch)
    print(json.dumps({"seconds_per_step": statistics.median(timings)}))


def run_process(command):
    import psutil

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root, peak = psutil.Process(process.pid), 0
    output = {}
    reader = threading.Thread(target=lambda: output.update(
        zip(("stdout", "stderr"), process.communicate())))
    reader.start()
    while process.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [root] + root.children(recursive=True)))
        except psutil.Error:
            pass
        time.sleep(0.05)
    reader.join()
    if process.returncode != 0:
        raise RuntimeError(output.get("stderr", "")[-3000:])
    result = json.loads(output["stdout"].strip().splitlines()[-1])
    result["peak_rss_mib"] = peak / 2 ** 20
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=5, help="steps per timed call")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per process")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--impl", choices=("ours", "hf"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--jit", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl:
        measure(args)
        return

    base = [sys.executable, os.path.abspath(__file__), f"--config={args.config}",
            f"--batch_size={args.batch_size}", f"--seq_length={args.seq_length}",
            f"--predictions={args.predictions}", f"--steps={args.steps}", f"--repeats={args.repeats}"]
    variants = {"ours": base + ["--impl=ours", "--jit=0"], "ours+xla": base + ["--impl=ours", "--jit=1"],
                "hf": base + ["--impl=hf"]}
    results = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, command in variants.items():
            results[name].append(run_process(command))
    summary = {}
    for name, runs in results.items():
        seconds = statistics.median(r["seconds_per_step"] for r in runs)
        summary[name] = {"steps_per_second": 1 / seconds, "ms_per_step": seconds * 1000,
                         "peak_rss_mib": max(r["peak_rss_mib"] for r in runs)}
    best_ours = max(summary["ours"]["steps_per_second"], summary["ours+xla"]["steps_per_second"])
    report = {"config": args.config, "batch_size": args.batch_size, "seq_length": args.seq_length,
              "predictions": args.predictions, "results": summary,
              "ours_best_vs_hf": best_ours / summary["hf"]["steps_per_second"]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
