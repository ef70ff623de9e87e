"""Does loading weights into a built model raise the training step's later peaks?

    python benchmarks/weight_loading_memory.py --config=configs/albert_xxlarge_v2.json \
        --output=benchmarks/results/memory/xxlarge_weight_loading.json

Fine-tuning from `--init_checkpoint`, the export and the speed benchmarks build the model and
its optimizer first and then load the weights into it (`assign_model_weights`). For each of
two modes, a fresh process builds the pretraining loop's model and optimizer the way
`benchmarks/pretraining_speed.py` does, then

* `initial`: keeps the initial weights;
* `loaded`: loads weights saved beforehand (a `.npz` made by this script's parent) with
  `assign_model_weights`,

and runs `--steps` training steps of the same synthetic batch, one call each. It records the
resident memory after the build and after loading, the peak (`getrusage`) after each step, and
whether the largest variable kept its buffer through loading (the address of its data before and
after). The same tensors are alive in both modes, so a difference in the later peaks is what
loading leaves in the process.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from pretraining_speed import pretraining_trainer, repeated_batch_steps  # noqa: E402
from training_memory import add_step_arguments, refuse_existing, write_new_report  # noqa: E402

GIB = 2 ** 30


def resident_gib() -> float:
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    return round(kib * 1024 / GIB, 3)


def peak_gib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB, 3)


def data_address(variable) -> int:
    value = variable.value.read_value()
    return value.numpy().ctypes.data  # on the CPU, the variable's own buffer, not a copy


def measure(args) -> dict:
    """One mode, in this process."""
    import numpy as np
    import tensorflow as tf

    from albert.checkpoints import assign_model_weights, model_variables
    from albert.config import AlbertConfig
    from albert.training.synthetic_batch import synthetic_batch

    config = AlbertConfig.from_json_file(args.config)
    trainer, strategy = pretraining_trainer(config, args.batch_size, args.seq_length,
                                            args.predictions)
    model, optimizer = trainer.build()
    result = {"mode": args.mode, "built_resident_gib": resident_gib()}
    largest = max(model_variables(model).values(), key=lambda variable: np.prod(variable.shape))
    address = data_address(largest)
    if args.mode == "loaded":
        with np.load(args.weights) as saved:
            assign_model_weights(model, dict(saved))
    result["largest_variable_kept_its_buffer"] = data_address(largest) == address
    result["loaded_resident_gib"] = resident_gib()
    result["peak_before_steps_gib"] = peak_gib()
    batch = synthetic_batch(config, args.batch_size, args.seq_length, args.predictions)
    train_steps = repeated_batch_steps(trainer, strategy, model, optimizer, batch)
    result["peak_after_step_gib"] = []
    for _ in range(args.steps):
        float(train_steps(tf.constant(1))["loss"][-1])
        result["peak_after_step_gib"].append(peak_gib())
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_arguments(parser, config="configs/albert_xxlarge_v2.json", steps=4)
    parser.add_argument("--mode", choices=("initial", "loaded"), help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args)))
        return
    refuse_existing(args.output)
    import numpy as np

    from albert.checkpoints import model_weights
    from albert.config import AlbertConfig
    from albert.modeling import AlbertPretrainer

    with tempfile.TemporaryDirectory() as directory:
        weights = os.path.join(directory, "weights.npz")
        np.savez(weights, **model_weights(AlbertPretrainer(AlbertConfig.from_json_file(args.config))))
        runs = []
        for mode in ("initial", "loaded"):
            command = [sys.executable, __file__, f"--mode={mode}", f"--weights={weights}"] + \
                [f"--{name}={getattr(args, name)}" for name in
                 ("config", "output", "batch_size", "seq_length", "predictions", "steps")]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.exit(f"ERROR: the {mode} process failed:\n{done.stderr[-3000:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(runs[-1]), flush=True)
    write_new_report(args.output, runs=runs)


if __name__ == "__main__":
    main()
