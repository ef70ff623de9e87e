"""How much of a training step's peak memory the layer weights' gradients take, per model size.

    python benchmarks/gradient_memory_probe.py --size=large --mode=all        # every gradient
    python benchmarks/gradient_memory_probe.py --size=large --mode=embeddings # no layer-weight one
    python benchmarks/gradient_memory_probe.py --size=large --mode=all --unrolled  # as before

One process per measurement (peak resident memory only grows): builds the paper's model of
`--size` (all-shared, E=128, no dropout), then runs forward and backward twice in one
tf.function on a synthetic batch (8 x 64 tokens, 10 masked), without an optimizer, and prints
one JSON line: the peak before and after the steps. `--mode=embeddings` asks only for the
embedding gradients, so no gradient of the shared layer's weights is formed: the difference
between the two modes is what those gradients cost. One gradient of the shared layer is its
parameter count times 4 bytes; its partial gradients, one per layer application, are that
times the number of layers. Where the difference lies between the two tells how many partial
gradients are alive at once before TensorFlow sums them.
"""

import argparse
import dataclasses
import json
import resource

import tensorflow as tf

from albert.checkpoints.keras_format import build_model
from albert.paper.params import albert_config
from albert.training.synthetic_batch import synthetic_batch

GIB = 2 ** 30


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # ru_maxrss: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="large", choices=("base", "large", "xlarge", "xxlarge"))
    parser.add_argument("--mode", default="all", choices=("all", "embeddings"))
    parser.add_argument("--unrolled", action="store_true",
                        help="unroll the shared block's applications (the encoder's "
                             "loop_shared_applications = False), as before the training loop")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=64)
    args = parser.parse_args()

    config = dataclasses.replace(albert_config(args.size, 128), hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    model = build_model(config, "pretraining")
    for layer in model._flatten_layers():
        if hasattr(layer, "loop_shared_applications"):
            layer.loop_shared_applications = not args.unrolled
    batch = {name: tf.constant(value) for name, value in
             synthetic_batch(config, args.batch_size, args.seq_length, 10).items()}
    wanted = model.trainable_variables
    if args.mode == "embeddings":
        wanted = [variable for variable in wanted if "embeddings" in variable.path]

    @tf.function
    def gradients(features):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = (tf.reduce_sum(outputs["mlm_logits"][..., :1])
                    + tf.reduce_sum(outputs["sentence_order_logits"]))
        return tape.gradient(loss, wanted)

    model(batch, training=False)
    layer_parameters = sum(int(tf.size(variable)) for variable in model.trainable_variables
                           if "embeddings" not in variable.path and "cls/" not in variable.path
                           and "pooler" not in variable.path)
    before = peak_gib()
    for _ in range(2):
        found = gradients(batch)
        found[0].numpy()
        del found
    print(json.dumps({
        "size": args.size, "mode": args.mode, "unrolled": args.unrolled, "layers": config.num_hidden_layers,
        "batch": [args.batch_size, args.seq_length],
        "one_layer_gradient_gib": round(layer_parameters * 4 / GIB, 3),
        "peak_before_gib": round(before, 2), "peak_after_gib": round(peak_gib(), 2),
        "step_adds_gib": round(peak_gib() - before, 2)}))


if __name__ == "__main__":
    main()
