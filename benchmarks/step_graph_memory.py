"""What a training process holds besides its tensors: the runtime's libraries and the traced step.

    python benchmarks/step_graph_memory.py --config=configs/bert_large.json \
        --output=benchmarks/results/memory/bert_large_step_graph.json

Three kinds of fresh process, one after another:

* `imports`: the resident memory of TensorFlow (with albert and Keras, one op run) and of
  PyTorch with transformers, once imported and nothing else;
* `step`: the pretraining loop's model and optimizer built as `benchmarks/pretraining_speed.py`
  builds them; the resident memory after the build, after tracing the training step (no call)
  and after each of `--steps` calls on one synthetic batch, and the traced step's nodes
  counted by their top-level scope (forward pass, optimizer, backward pass);
* `chain`: a step of `--chain_nodes` scalar multiplies of a variable (half of its nodes are
  their constants), traced and called twice, for the memory a traced and instantiated node
  costs by itself.

Between steps the model's tensors are its weights and the optimizer's slots only, so the
`step` process's resident memory above them is what the runtime keeps: its libraries, the
traced graph, the instantiated executor and the allocator's free memory.
"""

import argparse
import collections
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCHMARKS)
sys.path.insert(0, os.path.dirname(BENCHMARKS))

from training_memory import add_step_arguments, refuse_existing, write_new_report  # noqa: E402

GIB = 2 ** 30


def resident_gib() -> float:
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    return round(kib * 1024 / GIB, 3)


def measure_imports(framework: str) -> dict:
    if framework == "tensorflow":
        import albert  # noqa: F401  (sets the kernels, as the scripts do)
        import keras  # noqa: F401
        import tensorflow as tf

        float(tf.constant(1.0) + 1)
    else:
        import torch
        import transformers  # noqa: F401

        float(torch.ones(1) + 1)
    return {"framework": framework, "resident_gib": resident_gib()}


def nodes_by_scope(graph_def) -> dict:
    """Nodes of the traced step and its function library, by their first two name scopes
    (the step's body is a while loop, so the first is `while`)."""
    counts = collections.Counter()
    for function in graph_def.library.function:
        for node in function.node_def:
            counts["/".join(node.name.split("/")[:2])] += 1
    large = {scope: count for scope, count in counts.most_common() if count >= 1000}
    large["other"] = sum(counts.values()) - sum(large.values())
    return large


def measure_step(args) -> dict:
    import numpy as np
    import tensorflow as tf

    from albert.config import AlbertConfig
    from albert.training.synthetic_batch import synthetic_batch
    from pretraining_speed import pretraining_trainer, repeated_batch_steps

    config = AlbertConfig.from_json_file(args.config)
    result = {"imported_resident_gib": resident_gib()}
    trainer, strategy = pretraining_trainer(config, args.batch_size, args.seq_length,
                                            args.predictions)
    model, optimizer = trainer.build()
    result["tensor_gib_between_steps"] = round(
        sum(int(np.prod(variable.shape)) * tf.as_dtype(variable.dtype).size
            for variable in model.variables + optimizer.variables) / GIB, 3)
    result["built_resident_gib"] = resident_gib()
    batch = synthetic_batch(config, args.batch_size, args.seq_length, args.predictions)
    train_steps = repeated_batch_steps(trainer, strategy, model, optimizer, batch)
    graph_def = train_steps.get_concrete_function(tf.constant(1)).graph.as_graph_def()
    result["traced_resident_gib"] = resident_gib()
    result["nodes"] = len(graph_def.node) + sum(
        len(function.node_def) for function in graph_def.library.function)
    result["nodes_by_scope"] = nodes_by_scope(graph_def)
    del graph_def
    result["resident_gib_after_step"] = []
    for _ in range(args.steps):
        float(train_steps(tf.constant(1))["loss"][-1])
        result["resident_gib_after_step"].append(resident_gib())
    return result


def measure_chain(nodes: int) -> dict:
    import tensorflow as tf

    variable = tf.Variable(tf.ones([4]))

    @tf.function
    def chain():
        value = variable.read_value()
        for index in range(nodes // 2):
            value = value * (1.0 + index * 1e-9)
        return value

    result = {"nodes": nodes, "start_resident_gib": resident_gib()}
    chain.get_concrete_function()
    result["traced_resident_gib"] = resident_gib()
    chain()
    chain()
    result["called_resident_gib"] = resident_gib()
    result["kib_per_node_traced"] = round(
        (result["traced_resident_gib"] - result["start_resident_gib"]) * GIB / 1024 / nodes, 2)
    result["kib_per_node_instantiated"] = round(
        (result["called_resident_gib"] - result["traced_resident_gib"]) * GIB / 1024 / nodes, 2)
    return result


def run(command) -> dict:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"ERROR: {' '.join(command[2:])} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_arguments(parser, config="configs/bert_large.json", steps=3)
    parser.add_argument("--chain_nodes", type=int, default=40000)
    parser.add_argument("--mode", choices=("tensorflow", "torch", "step", "chain"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode in ("tensorflow", "torch"):
        print(json.dumps(measure_imports(args.mode)))
        return
    if args.mode == "step":
        print(json.dumps(measure_step(args)))
        return
    if args.mode == "chain":
        print(json.dumps(measure_chain(args.chain_nodes)))
        return
    refuse_existing(args.output)
    base = [sys.executable, os.path.abspath(__file__)] + [
        f"--{name}={getattr(args, name)}" for name in
        ("config", "output", "batch_size", "seq_length", "predictions", "steps", "chain_nodes")]
    write_new_report(args.output,
                     imports=[run(base + [f"--mode={name}"]) for name in ("tensorflow", "torch")],
                     step=run(base + ["--mode=step"]), chain=run(base + ["--mode=chain"]))


if __name__ == "__main__":
    main()
