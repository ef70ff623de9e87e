"""Pretraining steps/s and peak RSS: ours vs Model Garden and Hugging Face, same shapes.

    python benchmarks/pretraining_speed.py            # ALBERT-base, seq 128, batch 8, 20 predictions

Ours runs the real training step of `albert.training.loop.Trainer` (fed
through `distribute_datasets_from_function`, LAMB, global-norm clipping, MLM
logits only at the masked positions), with and without XLA.

Model Garden (tf-models-official, the strongest TensorFlow peer) runs
`BertPretrainerV2` over its `AlbertEncoder` — masked-LM logits at the masked
positions only, a 2-way sentence-order dense layer on the pooled output — with its
own `LAMB` (weight decay 0.01, LayerNorm/bias excluded) and global-norm
clipping at 1.0, in a `tf.function` training step, with and without XLA.

Hugging Face runs `AlbertForPreTraining` in eager PyTorch the way its
examples pretrain: MLM logits at every position with -100 labels elsewhere,
`clip_grad_norm_(1.0)`, `torch.optim.AdamW` fused (PyTorch has no LAMB; the fused update
is its fastest on a CPU, at the same peak memory).

All get identical weights (converted with our name table), inputs and
float32 precision; no dropout (the v2 configs).

Each implementation runs in its own process, so peak RSS (sampled every
50 ms) is its own; processes alternate over `--rounds` rounds and the
median steps/s is reported. The weights and the batch are made once, by this
parent process, and written to a temporary directory; a measured process
reads only what its implementation needs (ours and Model Garden: the weights
as numpy arrays, dropped once assigned; Hugging Face: its own safetensors
checkpoint, without importing TensorFlow), so no process's peak carries
another implementation's model or libraries.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The caller's choice of TensorFlow's CPU kernels, read before `import albert`
# sets its default: 'ours@baseline' runs under it, as the baseline code would.
CALLER_ONEDNN = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A measured process of 'ours@baseline' imports albert from the baseline checkout.
ALBERT_REPO = next((arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--albert_repo=")),
                   REPO)
sys.path.insert(0, os.path.abspath(ALBERT_REPO))
if "--impl=hf" in sys.argv:  # Hugging Face's process does not load TensorFlow
    os.environ["ALBERT_LIGHTWEIGHT_IMPORT"] = "1"


def pretraining_trainer(config, batch_size, seq_length, predictions, steps_per_loop=1,
                        jit_compile=False, rematerialize=False):
    """`run_pretraining.py`'s training loop on one device (LAMB, global-norm clipping) for
    batches of this shape: `(trainer, strategy)`."""
    from albert.pretraining_data.schema import DataContract
    from albert.tasks.pretraining import PretrainingTask
    from albert.training.distribute import create_strategy
    from albert.training.loop import Trainer, TrainerConfig, variable_names_for
    from albert.training.optimization import create_optimizer

    data = DataContract(files=[], record_counts=[], max_seq_length=seq_length,
                        max_predictions_per_seq=predictions, has_token_boundary=False)
    strategy = create_strategy("one_device")
    trainer = Trainer(PretrainingTask(config, data), strategy,
                      TrainerConfig(tempfile.mkdtemp(), 10 ** 6, batch_size,
                                    steps_per_loop=steps_per_loop, jit_compile=jit_compile,
                                    rematerialize=rematerialize),
                      lambda names: create_optimizer("lamb", 1e-4, 10 ** 6, 0, variable_names=names,
                                       gradients_summed_by_caller=True),
                      variable_names_for)
    return trainer, strategy


def repeated_batch_steps(trainer, strategy, model, optimizer, batch):
    """The loop's `training_steps` fed the same batch every step, through its distributed
    input path."""
    import tensorflow as tf

    dataset = strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensors(batch).repeat())
    return trainer.training_steps(model, optimizer, iter(dataset))


def run_ours(args, config, weights, batch):
    import tensorflow as tf

    from albert.checkpoints import assign_model_weights

    trainer, strategy = pretraining_trainer(config, args.batch_size, args.seq_length,
                                            args.predictions, args.steps, bool(args.jit),
                                            bool(args.remat))
    model, optimizer = trainer.build()
    assign_model_weights(model, weights())
    train_steps = repeated_batch_steps(trainer, strategy, model, optimizer, batch)
    train_steps(tf.constant(2))  # trace, compile, warm up
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        losses = train_steps(tf.constant(args.steps))
        float(losses["loss"][-1])
        timings.append((time.perf_counter() - start) / args.steps)
    return timings


def run_model_garden(args, config, weights, batch):
    import tensorflow as tf
    import tf_keras
    from official.modeling import tf_utils
    from official.modeling.optimization import lamb
    from official.nlp.modeling import models

    from albert.checkpoints.model_garden import assign_to_model_garden, build_model_garden_encoder

    encoder = build_model_garden_encoder(config)
    assign_to_model_garden(encoder, weights(), config)
    initializer = tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)
    pretrainer = models.BertPretrainerV2(
        encoder_network=encoder, mlm_activation=tf_utils.get_activation(config.activation),
        mlm_initializer=initializer)
    sentence_order = tf_keras.layers.Dense(2, kernel_initializer=initializer)
    optimizer = lamb.LAMB(learning_rate=1e-4, weight_decay_rate=0.01,
                          exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    inputs = {name: tf.constant(batch[name]) for name in (
        "input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")}
    labels = tf.constant(batch["masked_lm_ids"])
    label_weights = tf.constant(batch["masked_lm_weights"])
    order = tf.constant(batch["next_sentence_labels"][:, 0])
    sentence_order(pretrainer(inputs)["pooled_output"])

    def step():
        with tf.GradientTape() as tape:
            outputs = pretrainer(inputs, training=True)
            mlm = tf_keras.losses.sparse_categorical_crossentropy(
                labels, tf.cast(outputs["mlm_logits"], tf.float32), from_logits=True)
            mlm = tf.reduce_sum(mlm * label_weights) / (tf.reduce_sum(label_weights) + 1e-5)
            sop = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
                order, sentence_order(outputs["pooled_output"]), from_logits=True))
            loss = mlm + sop
        variables = pretrainer.trainable_variables + sentence_order.trainable_variables
        gradients, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
        optimizer.apply_gradients(zip(gradients, variables))
        return loss

    @tf.function(jit_compile=bool(args.jit))
    def steps(count):
        loss = tf.constant(0.0)
        for _ in tf.range(count):
            loss = step()
        return loss

    steps(tf.constant(2))
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        float(steps(tf.constant(args.steps)))
        timings.append((time.perf_counter() - start) / args.steps)
    return timings


def hf_adamw(parameters, learning_rate: float):
    """Hugging Face's optimizer at its fastest on a CPU: PyTorch's fused AdamW (one kernel for
    all of a tensor's update). Its per-tensor default took 12.6 to 13.1 s a BERT-large
    pretraining step where the fused one took 9.1 to 10.3 s; at ALBERT-xxlarge they were level
    (79.6 against 82.9 s); the peak memory was the same (7.10 to 7.19 GiB, and 7.13 against
    7.11 GiB). Batch 8 x 64, 2026-12-02, scratch runs on the AVX-512 machine."""
    import torch

    return torch.optim.AdamW(parameters, lr=learning_rate, fused=True)


def hf_training_step(model, optimizer, inputs):
    """One Hugging Face training step as its examples run it: AdamW, clip_grad_norm_(1.0)."""
    import torch

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss)

    return step


def run_hf(args, config, weights, batch):
    import torch
    import transformers

    model = transformers.AlbertForPreTraining.from_pretrained(
        os.path.join(args.weights_dir, "hf"), attn_implementation="sdpa")
    model.train()
    optimizer = hf_adamw(model.parameters(), 1e-4)
    ids = torch.tensor(batch["input_word_ids"], dtype=torch.long)
    labels = torch.full_like(ids, -100)
    positions = torch.tensor(batch["masked_lm_positions"], dtype=torch.long)
    labels.scatter_(1, positions, torch.tensor(batch["masked_lm_ids"], dtype=torch.long))
    inputs = dict(input_ids=ids, attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                  token_type_ids=torch.tensor(batch["input_type_ids"], dtype=torch.long),
                  labels=labels,
                  sentence_order_label=torch.tensor(batch["next_sentence_labels"][:, 0], dtype=torch.long))

    step = hf_training_step(model, optimizer, inputs)
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
    import numpy as np

    from albert.config import AlbertConfig

    config = AlbertConfig.from_json_file(args.config)
    with np.load(os.path.join(args.weights_dir, "batch.npz")) as saved:
        batch = dict(saved)

    def weights():  # read when assigned; the arrays go once the caller drops them
        with np.load(os.path.join(args.weights_dir, "weights.npz")) as saved:
            return dict(saved)

    runner = {"ours": run_ours, "model_garden": run_model_garden, "hf": run_hf}[args.impl]
    timings = runner(args, config, weights, batch)
    print(json.dumps({"seconds_per_step": statistics.median(timings)}))


def write_inputs(args, directory):
    """The weights (numpy, and as a Hugging Face checkpoint) and the batch every process uses."""
    import keras
    import numpy as np

    from albert.checkpoints import model_weights, write_checkpoint
    from albert.config import AlbertConfig
    from albert.modeling import AlbertPretrainer
    from albert.training.synthetic_batch import synthetic_batch

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_json_file(args.config)
    weights = model_weights(AlbertPretrainer(config))
    np.savez(os.path.join(directory, "weights.npz"), **weights)
    write_checkpoint(weights, config, os.path.join(directory, "hf"), "hf")
    np.savez(os.path.join(directory, "batch.npz"),
             **synthetic_batch(config, args.batch_size, args.seq_length, args.predictions))


def variant_environment(settings):
    """This process's environment with `settings` applied (a value of None: unset)."""
    environment = dict(os.environ)
    for name, value in settings.items():
        environment.pop(name, None)
        if value is not None:
            environment[name] = value
    return environment


def run_process(command, environment=None):
    import psutil

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment)
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
    parser.add_argument("--variants", default="ours,ours+xla,model_garden,model_garden+xla,hf",
                        help="which to run, comma-separated (the largest models: ours,hf); "
                             "also ours+eigen: ours with TensorFlow's Eigen CPU kernels "
                             "(TF_ENABLE_ONEDNN_OPTS=0); ours+remat: ours with --rematerialize; "
                             "ours+bfc: ours with TF_CPU_ALLOCATOR_USE_BFC=true")
    parser.add_argument("--baseline_repo", default=None,
                        help="also run ours from this checkout (a worktree of an earlier "
                             "commit) as 'ours@baseline': before and after a change, one run")
    parser.add_argument("--impl", choices=("ours", "model_garden", "hf"), default=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--weights_dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--albert_repo", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--jit", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--remat", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl:
        measure(args)
        return

    inputs = tempfile.mkdtemp(prefix="pretraining_speed_")
    try:
        measure_all(args, parser, inputs)
    finally:
        shutil.rmtree(inputs)


def measure_all(args, parser, inputs):
    write_inputs(args, inputs)
    base = [sys.executable, os.path.abspath(__file__), f"--config={args.config}",
            f"--batch_size={args.batch_size}", f"--seq_length={args.seq_length}",
            f"--predictions={args.predictions}", f"--steps={args.steps}", f"--repeats={args.repeats}",
            f"--weights_dir={inputs}"]
    variants = {"ours": base + ["--impl=ours", "--jit=0"], "ours+xla": base + ["--impl=ours", "--jit=1"],
                "model_garden": base + ["--impl=model_garden", "--jit=0"],
                "model_garden+xla": base + ["--impl=model_garden", "--jit=1"],
                "hf": base + ["--impl=hf"],
                # TensorFlow's Eigen kernels, its default on CPUs without AVX-512 VNNI/BF16/AMX.
                "ours+eigen": base + ["--impl=ours", "--jit=0"],
                # --rematerialize: each layer's activations recomputed in the backward pass.
                "ours+remat": base + ["--impl=ours", "--jit=0", "--remat=1"],
                # TensorFlow's best-fit-with-coalescing allocator for CPU tensors, not glibc's.
                "ours+bfc": base + ["--impl=ours", "--jit=0"]}
    # The environment settings each variant runs under (None: unset, TensorFlow's own choice).
    settings = {name: {"TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS")}
                for name in variants}
    settings["ours+eigen"]["TF_ENABLE_ONEDNN_OPTS"] = "0"
    settings["ours+bfc"]["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    if args.baseline_repo:
        # This harness, with albert imported from the baseline checkout.
        variants["ours@baseline"] = base + ["--impl=ours", "--jit=0",
                                            f"--albert_repo={os.path.abspath(args.baseline_repo)}"]
        settings["ours@baseline"] = {"TF_ENABLE_ONEDNN_OPTS": CALLER_ONEDNN}
    wanted = args.variants.split(",") + (["ours@baseline"] if args.baseline_repo else [])
    unknown = sorted(set(wanted) - set(variants))
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)}")
    variants = {name: command for name, command in variants.items() if name in wanted}
    results = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, command in variants.items():
            results[name].append(run_process(command, variant_environment(settings[name])))
    summary = {}
    for name, runs in results.items():
        seconds = statistics.median(r["seconds_per_step"] for r in runs)
        summary[name] = {"steps_per_second": 1 / seconds, "ms_per_step": seconds * 1000,
                         "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
                         "environment": {key: value or "unset"
                                         for key, value in settings[name].items()}}
    def best(prefix):
        found = [v["steps_per_second"] for k, v in summary.items()
                 if k.startswith(prefix) and k != "ours@baseline"]
        return max(found) if found else None

    report = {"config": os.path.relpath(args.config, REPO),  # no path of this machine
              "batch_size": args.batch_size, "seq_length": args.seq_length,
              "predictions": args.predictions, "results": summary}
    if best("ours") and best("model_garden"):
        report["ours_best_vs_model_garden_best"] = best("ours") / best("model_garden")
    if best("ours") and "hf" in summary:
        report["ours_best_vs_hf"] = best("ours") / summary["hf"]["steps_per_second"]
    if "ours" in summary and "hf" in summary:  # the default configuration's peak
        report["ours_peak_vs_hf_peak"] = (summary["ours"]["peak_rss_mib"]
                                          / summary["hf"]["peak_rss_mib"])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
