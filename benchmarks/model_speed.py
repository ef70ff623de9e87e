"""Forward pass and training step of ALBERT, side by side: ours vs Model Garden vs Hugging Face.

    python benchmarks/model_speed.py                      # ALBERT-base, batch 8, seq 128
    python benchmarks/model_speed.py --rounds=3 --config=configs/albert_large_v2.json

All models get the same config, the same random weights (moved with our
checkpoint name table) and the same inputs, and the same toy objective (mean
squares of the sequence and pooled outputs) with plain SGD, so a training step
measures the model's forward + backward + update, not an optimizer.

The two TensorFlow models run as `tf.function`s with and without XLA
(`jit_compile`); Hugging Face runs in eager PyTorch (its normal mode, SDPA
attention). Every variant is built and warmed up first, then timed in
interleaved rounds (A, B, C, A, B, C, ...) so that drift in machine load hits
all of them alike. Reported: median milliseconds per call, each model's best
setting, and the largest output difference from ours (a sanity check that the
three compute the same function).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _inputs(config, batch_size, seq_length):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, config.vocab_size, (batch_size, seq_length)).astype("int32")
    mask = np.ones_like(ids)
    mask[:, seq_length * 3 // 4:] = 0
    type_ids = np.zeros_like(ids)
    type_ids[:, seq_length // 2:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": type_ids}


def _tf_callables(encoder, variables, inputs, jit_compile):
    """forward() and train_step() of a TF (Keras 3 or tf_keras) encoder."""
    import tensorflow as tf

    tensors = {key: tf.constant(value) for key, value in inputs.items()}

    @tf.function(jit_compile=jit_compile)
    def forward():
        return encoder(tensors, training=False)["sequence_output"]

    @tf.function(jit_compile=jit_compile)
    def train_step():
        with tf.GradientTape() as tape:
            outputs = encoder(tensors, training=True)
            loss = (tf.reduce_mean(tf.square(outputs["sequence_output"]))
                    + tf.reduce_mean(tf.square(outputs["pooled_output"])))
        gradients = tape.gradient(loss, variables)
        for variable, gradient in zip(variables, gradients):
            variable.assign_sub(1e-4 * tf.convert_to_tensor(gradient))
        return loss

    return (lambda: forward().numpy()), (lambda: train_step().numpy())


def build_ours(config, weights, inputs):
    from albert.checkpoints import assign_model_weights
    from albert.modeling import AlbertEncoder

    encoder = AlbertEncoder(config)
    assign_model_weights(encoder, weights)
    variants = {}
    for jit in (False, True):
        variants[jit] = _tf_callables(encoder, encoder.trainable_variables, inputs, jit)
    return variants


def build_model_garden(config, weights, inputs):
    from albert.checkpoints.model_garden import assign_to_model_garden, build_model_garden_encoder

    encoder = build_model_garden_encoder(config)
    assign_to_model_garden(encoder, weights, config)
    variants = {}
    for jit in (False, True):
        variants[jit] = _tf_callables(encoder, encoder.trainable_variables, inputs, jit)
    return variants


def build_hugging_face(config, weights, inputs, directory, attention):
    import torch
    import transformers

    from albert.checkpoints import write_checkpoint

    write_checkpoint(weights, config, directory, "hf")
    model = transformers.AlbertModel.from_pretrained(directory, attn_implementation=attention)
    tensors = dict(input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
                   attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                   token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)

    def forward():
        model.eval()
        with torch.no_grad():
            return model(**tensors).last_hidden_state.numpy()

    def train_step():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        outputs = model(**tensors)
        loss = outputs.last_hidden_state.square().mean() + outputs.pooler_output.square().mean()
        loss.backward()
        optimizer.step()
        return loss.item()

    return forward, train_step


def time_interleaved(functions, warmup, steps_per_round, rounds):
    """Median ms per call of each function, timed round-robin."""
    for function in functions.values():
        for _ in range(warmup):
            function()
    samples = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            for _ in range(steps_per_round):
                start = time.perf_counter()
                function()
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1000.0 for name, values in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/albert_base_v2.json")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps_per_round", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hf_attention", default="sdpa", choices=("sdpa", "eager"))
    args = parser.parse_args()

    import keras

    from albert.checkpoints import model_weights
    from albert.config import AlbertConfig
    from albert.modeling import AlbertEncoder

    keras.utils.set_random_seed(0)
    config = AlbertConfig.from_json_file(args.config)
    weights = model_weights(AlbertEncoder(config))
    inputs = _inputs(config, args.batch_size, args.seq_length)

    forward, train = {}, {}
    for name, variants in (("ours", build_ours(config, weights, inputs)),
                           ("model_garden", build_model_garden(config, weights, inputs))):
        for jit, (forward_fn, train_fn) in variants.items():
            label = f"{name}{'+xla' if jit else ''}"
            forward[label], train[label] = forward_fn, train_fn
    with tempfile.TemporaryDirectory() as directory:
        forward["hf"], train["hf"] = build_hugging_face(config, weights, inputs, directory,
                                                        args.hf_attention)

        real = inputs["input_mask"].astype(bool)
        outputs = {name: np.asarray(function())[real] for name, function in forward.items()}
        timings = {
            "forward_ms": time_interleaved(forward, args.warmup, args.steps_per_round, args.rounds),
            "train_step_ms": time_interleaved(train, args.warmup, args.steps_per_round, args.rounds),
        }

    best = {}
    for metric, values in timings.items():
        best[metric] = {
            model: min((ms, label) for label, ms in values.items() if label.split("+")[0] == model)
            for model in ("ours", "model_garden", "hf")}
    report = {
        "config": args.config, "batch_size": args.batch_size, "seq_length": args.seq_length,
        "rounds": args.rounds, "steps_per_round": args.steps_per_round, "timings": timings,
        "best_setting": {metric: {model: {"ms": ms, "setting": label} for model, (ms, label) in values.items()}
                         for metric, values in best.items()},
        "ours_vs_fastest_peer": {
            metric: min(values["model_garden"][0], values["hf"][0]) / values["ours"][0]
            for metric, values in best.items()},
        "max_abs_diff_vs_ours": {name: float(np.abs(output - outputs["ours"]).max())
                                 for name, output in outputs.items() if name != "ours"},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
