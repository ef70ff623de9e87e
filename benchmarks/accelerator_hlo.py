"""The compiled pretraining step on a GPU without TensorFlow there, beside Hugging Face.

    # here, with TensorFlow (any CPU machine): lower the step, record reference losses
    python benchmarks/accelerator_hlo.py export --models=base,large --batch_size=64 \
        --seq_length=512 --output_dir=build/accelerator_hlo
    # on the accelerator machine, with JAX (and PyTorch + transformers for the peer)
    python benchmarks/accelerator_hlo.py run --input_dir=build/accelerator_hlo \
        --output=benchmarks/results/accelerator_hlo/h200.json
    # where the GPU time goes: profile a few steps, then sort the kernels into categories
    python benchmarks/accelerator_hlo.py run ... --profile_steps=3 --output=kernels.json
    python benchmarks/accelerator_hlo.py kernels kernels.json

Why: a GPU machine may have no TensorFlow (and no way to install one), but
the whole training step (forward, backward, global-norm clip, LAMB, and under
mixed_float16 the loss-scale decision) is one XLA computation by construction
(`albert.training.replica_step`). `export` lowers exactly that computation
(`tf.function(jit_compile=True)` of `ReplicaStep._step`, through
`experimental_get_compiler_ir(stage="hlo_serialized")`) for a fixed batch and
writes it with a manifest: every parameter of the module in order (the
batch's features, then each model and optimizer variable with its name and a
deterministic initial value rule), which outputs are the updated variables,
the step's matrix-product FLOPs, and the losses TensorFlow computed for the
first steps from those initial values on this CPU.

`run` compiles the module with the XLA that JAX carries, for whatever device
JAX has, rebuilds the same inputs, checks the first steps' losses against
TensorFlow's (the check that parameters were fed in the right order), then
times steps with the updated variables fed back as the next step's inputs,
as the training loop does. It reports steps/s, examples/s, matrix-product
TFLOP/s and MFU against the device's datasheet peak, XLA's own FLOP count
and memory, and every step's losses. What it does not measure: TensorFlow's
runtime around the step (the host loop, `tf.data`), which `--steps_per_loop`
amortises over many steps in the real loop, and the XLA version (JAX's, not
TensorFlow's).

The peer, in the same process on the same device and shapes: Hugging Face's
`AlbertForPreTraining` in PyTorch with the same config, bf16 autocast, SDPA
attention and fused AdamW (PyTorch has no LAMB), eager and `torch.compile`d,
the same 20 masked positions per sequence (its head scores every position;
that is its design). Its step: forward, backward, global-norm clip, update.
"""

import argparse
import dataclasses
import json
import os
import re
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEATURES = "features.npz"
INIT_STDDEV = 0.02


def bf16_peak_tflops(device_name):
    """The device's dense bf16 peak from accelerator_step.py's datasheet table, or None."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from accelerator_step import (
        PEAK_TFLOPS,  # numpy-only at import: no TensorFlow needed here
    )

    return next((figures.get("bfloat16") for key, figures in PEAK_TFLOPS.items()
                 if key in device_name), None)


# ----------------------------------------------------------------------------------------------
# The inputs' initial values: one rule shared by both halves (no files of weights travel).
# ----------------------------------------------------------------------------------------------

def initial_value(spec, index):
    """The value of module parameter `index` described by manifest entry `spec`."""
    shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
    rule = spec["init"]
    if rule == "normal":
        rng = np.random.default_rng([20261126, index])
        return (rng.standard_normal(shape, dtype=np.float32) * INIT_STDDEV).astype(dtype)
    if rule == "constant":
        return np.full(shape, spec["value"], dtype)
    raise ValueError(f"unknown initial value rule {rule!r} for {spec['name']}")


def model_variable_rule(path):
    """Layer-norm scales start at one, biases and offsets at zero, matrices at N(0, 0.02)."""
    leaf = path.rsplit("/", 1)[-1]
    if leaf == "gamma":
        return {"init": "constant", "value": 1.0}
    if leaf in ("beta", "bias", "output_bias"):
        return {"init": "constant", "value": 0.0}
    return {"init": "normal"}


def export_stem(name, batch_size, dropout=None):
    """File name stem of one exported step: `base-b64`, `base-mixed_float16-b8`,
    `base-b64-dropout0.0`."""
    stem = f"{name.replace(':', '-')}-b{batch_size}"
    return stem if dropout is None else f"{stem}-dropout{dropout}"


def output_aliases(hlo_text):
    """{output index: parameter index} from the module's input_output_alias header."""
    header = hlo_text.split("\n", 1)[0]
    return {int(out): int(param) for out, param in
            re.findall(r"\{(\d+)\}: \((\d+), \{\}", header)}


# ----------------------------------------------------------------------------------------------
# export: TensorFlow, on the machine that has it.
# ----------------------------------------------------------------------------------------------

def portable_module(serialized):
    """The module with its `copy` instructions turned into same-shape reshapes.

    TensorFlow copies each returned value (XLA_Retvals) so that no output is
    a parameter's buffer; newer XLA front ends (JAX 0.11's StableHLO path)
    reject the `copy` op on import. A reshape to the same shape is the same
    value, and XLA inserts whatever copies its buffer assignment needs.
    """
    from tensorflow.compiler.xla.service import hlo_pb2

    module = hlo_pb2.HloModuleProto.FromString(serialized)
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode == "copy":
                instruction.opcode = "reshape"
    return module.SerializeToString()


def export_model(name, args):
    import keras
    import tensorflow as tf

    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    from accelerator_step import model_config

    from albert.paper.flops import forward_flops
    from albert.pretraining_data.schema import DataContract
    from albert.tasks.pretraining import PretrainingTask
    from albert.training.loop import variable_names_for
    from albert.training.optimization import AlbertLossScaleOptimizer, create_optimizer
    from albert.training.replica_step import ReplicaStep
    from albert.training.synthetic_batch import synthetic_batch

    model_name, _, precision = name.partition(":")
    precision = precision or args.precision
    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    config = model_config(model_name)
    if args.dropout is not None:
        config = dataclasses.replace(config, hidden_dropout_prob=args.dropout,
                                     attention_probs_dropout_prob=args.dropout)
    data = DataContract(files=[], record_counts=[], max_seq_length=args.seq_length,
                        max_predictions_per_seq=args.predictions, has_token_boundary=False)
    task = PretrainingTask(config, data)
    model = task.build_model()
    optimizer = create_optimizer("lamb", args.learning_rate, 10 ** 6, 0,
                                 variable_names=variable_names_for(model),
                                 gradients_summed_by_caller=True)
    if precision == "mixed_float16":
        optimizer = AlbertLossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
    # One replica, no strategy: the whole step is one XLA computation (compiles_whole_step).
    step = ReplicaStep(task, tf.distribute.get_strategy(), model, optimizer,
                       jit_compile=True, whole_step=True)
    batch = synthetic_batch(config, args.batch_size, args.seq_length, args.predictions)
    features = {key: tf.constant(value) for key, value in batch.items()}
    function = step.step.get_concrete_function(features)

    model_variables = {id(v.handle): v for v in model.variables}
    optimizer_variables = {id(v.handle): v for v in optimizer.variables}
    inputs = [{"name": f"features/{key}", "kind": "feature", "shape": list(value.shape),
               "dtype": str(value.dtype)} for key, value in
              zip(tf.nest.flatten(features), tf.nest.flatten(batch))]
    # tf.nest flattens a dict in sorted key order, as the function's inputs are.
    for entry, key in zip(inputs, sorted(batch)):
        entry["name"] = f"features/{key}"
    for index, capture in enumerate(function.captured_inputs, start=len(inputs)):
        variable = model_variables.get(id(capture), optimizer_variables.get(id(capture)))
        if variable is None:
            raise RuntimeError(f"captured input {index} is no model or optimizer variable")
        entry = {"name": variable.path, "kind": "variable", "shape": list(variable.shape),
                 "dtype": variable.dtype if isinstance(variable.dtype, str)
                 else variable.dtype.name}
        if id(capture) in model_variables:
            entry.update(model_variable_rule(variable.path))
        else:
            current = variable.numpy()
            if current.size > 1 and np.any(current != current.flat[0]):
                raise RuntimeError(f"optimizer variable {variable.path} does not start constant")
            entry.update(init="constant", value=current.flat[0].item() if current.size else 0)
        inputs.append(entry)
    for index, entry in enumerate(inputs):
        if entry["kind"] == "variable":
            variable = next(v for v in (*model.variables, *optimizer.variables)
                            if v.path == entry["name"])
            variable.assign(initial_value(entry, index))

    text = step.step.experimental_get_compiler_ir(features)(stage="hlo")
    serialized = portable_module(
        step.step.experimental_get_compiler_ir(features)(stage="hlo_serialized"))
    parameters = len(re.findall(r" parameter\(\d+\)", text.split("\nENTRY", 1)[1]))
    if parameters != len(inputs):
        raise RuntimeError(f"the module has {parameters} parameters, the function {len(inputs)}")
    loss_names = sorted(task.loss_names)  # the outputs' order: tf.nest's sorted keys

    reference = []
    for _ in range(args.reference_steps):
        losses = step.step(features)
        reference.append({key: float(losses[key]) for key in loss_names})
        print(f"{name}: reference step {len(reference)}: {reference[-1]}", flush=True)

    stem = export_stem(name, args.batch_size, args.dropout)
    with open(os.path.join(args.output_dir, f"{stem}.hlo.pb"), "wb") as handle:
        handle.write(serialized)
    np.savez(os.path.join(args.output_dir, f"{stem}.{FEATURES}"), **batch)
    flops = forward_flops(config, args.batch_size, args.seq_length, args.predictions)
    manifest = {
        "model": model_name, "precision": precision, "config": config.to_dict(),
        "batch_size": args.batch_size, "seq_length": args.seq_length,
        "predictions": args.predictions, "optimizer": "lamb",
        "learning_rate": args.learning_rate, "training_flops": flops.training,
        "hlo_instructions": sum(1 for line in text.splitlines() if " = " in line),
        "inputs": inputs, "loss_names": loss_names,
        "aliases": {str(k): v for k, v in output_aliases(text).items()},
        "reference_losses": reference, "tensorflow": tf.__version__,
        "command": " ".join(sys.argv)}
    with open(os.path.join(args.output_dir, f"{stem}.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)
    print(f"{name}: {manifest['hlo_instructions']} HLO instructions, {len(inputs)} parameters, "
          f"{len(manifest['aliases'])} updated in place", flush=True)


# ----------------------------------------------------------------------------------------------
# run: JAX's XLA on the device (no TensorFlow), then the peer.
# ----------------------------------------------------------------------------------------------

def device_description(jax):
    device = jax.devices()[0]
    return device, getattr(device, "device_kind", str(device))


def run_ours(stem, args, jax):
    import jax.extend.backend  # (the submodule is not loaded by `import jax`)
    from jax._src.lib import xla_client

    with open(os.path.join(args.input_dir, f"{stem}.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    with open(os.path.join(args.input_dir, f"{stem}.hlo.pb"), "rb") as handle:
        module = xla_client._xla.mlir.hlo_to_stablehlo(handle.read())
    batch = np.load(os.path.join(args.input_dir, f"{stem}.{FEATURES}"))
    device, kind = device_description(jax)
    backend = jax.extend.backend.get_backend()
    started = time.perf_counter()
    executable = backend.compile_and_load(module, xla_client.DeviceList((device,)),
                                          xla_client.CompileOptions())
    compile_seconds = time.perf_counter() - started
    memory = executable.get_compiled_memory_stats()
    memory = {"arguments": memory.argument_size_in_bytes / 2 ** 30,
              "outputs": memory.output_size_in_bytes / 2 ** 30,
              "temporaries": memory.temp_size_in_bytes / 2 ** 30}
    if args.compile_only:
        return {"implementation": "ours: the TensorFlow step's HLO, compiled by JAX's XLA",
                "model": manifest["model"], "export": stem, "device": kind,
                "compile_seconds": compile_seconds, "device_memory_gib": memory}

    values = []
    for index, spec in enumerate(manifest["inputs"]):
        if spec["kind"] == "feature":
            values.append(batch[spec["name"].split("/", 1)[1]])
        else:
            values.append(initial_value(spec, index))
    state = [jax.device_put(value, device) for value in values]
    aliases = {int(k): v for k, v in manifest["aliases"].items()}
    names = manifest["loss_names"]

    def step(arguments):
        outputs = [arrays[0] for arrays in
                   executable.execute_sharded(arguments).disassemble_into_single_device_arrays()]
        following = list(arguments)
        for output, parameter in aliases.items():
            following[parameter] = outputs[output]
        return following, outputs[:len(names)]

    losses = []
    for _ in range(len(manifest["reference_losses"])):
        state, out = step(state)
        losses.append(out)
    first = [{name: float(np.asarray(value)) for name, value in zip(names, out)} for out in losses]
    # bf16 / fp16 matmuls on another device: agreement to a few parts in a thousand.
    agreement = max((abs(ours[name] - reference[name]) / max(1.0, abs(reference[name]))
                     for ours, reference in zip(first, manifest["reference_losses"])
                     for name in names), default=None)
    timings = []
    for _ in range(args.repeats):
        state[0].block_until_ready()
        started = time.perf_counter()
        for _ in range(args.timed_steps):
            state, out = step(state)
            losses.append(out)
        for array in state:
            array.block_until_ready()
        timings.append((time.perf_counter() - started) / args.timed_steps)
    seconds = statistics.median(timings)
    kernels = None
    if args.profile_steps:
        # (the steps donate their inputs: carry on with the state they return)
        kernels, state = profile_ours(stem, args, jax, executable, lambda s: step(s)[0], state)
    curve = [float(np.asarray(out[names.index("loss")])) for out in losses]
    # The step counter, and under mixed_float16 the loss scale and its counter, after the run.
    scalars = {spec["name"]: np.asarray(value).item()
               for spec, value in zip(manifest["inputs"], state)
               if spec["kind"] == "variable" and not spec["shape"]}
    peak = bf16_peak_tflops(kind)
    achieved = manifest["training_flops"] / seconds
    cost = executable.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {
        "implementation": "ours: the TensorFlow step's HLO, compiled by JAX's XLA",
        "model": manifest["model"], "export": stem, "precision": manifest["precision"],
        "device": kind, "batch_size": manifest["batch_size"], "seq_length": manifest["seq_length"],
        "optimizer": "LAMB (ours, in the module)", "hlo_instructions": manifest["hlo_instructions"],
        "compile_seconds": compile_seconds, "milliseconds_per_step": seconds * 1e3,
        "step_timings_ms": [t * 1e3 for t in timings],
        "examples_per_second": manifest["batch_size"] / seconds,
        "matmul_tflops": achieved / 1e12, "peak_tflops": peak,
        "mfu": achieved / (peak * 1e12) if peak else None,
        "xla_cost_flops_per_step": cost.get("flops") if cost else None,
        "device_memory_gib": memory,
        "first_steps": first, "reference_first_steps_tensorflow_cpu": manifest["reference_losses"],
        "largest_relative_loss_difference_vs_tensorflow": agreement,
        "loss_per_step": curve, "all_losses_finite": bool(np.all(np.isfinite(curve))),
        "scalar_variables_after_run": scalars, "kernel_profile": kernels}


def profile_ours(stem, args, jax, executable, step, state):
    """GPU time per HLO instruction over `--profile_steps` steps (JAX's profiler), and the
    optimized module's text beside the output, so that `kernels` can say what each is.
    Returns the summary and the state after the profiled steps."""
    import glob
    import tempfile

    trace_dir = tempfile.mkdtemp()
    jax.profiler.start_trace(trace_dir)
    for _ in range(args.profile_steps):
        state = step(state)
    for array in state:
        array.block_until_ready()
    jax.profiler.stop_trace()
    path, = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    per_op, per_line = {}, {}
    for plane in jax.profiler.ProfileData.from_file(path).planes:
        if not plane.name.startswith(("/device:", "/host:CPU")):
            continue
        for line in plane.lines:
            total = 0
            for event in line.events:
                stats = dict(event.stats)
                total += event.duration_ns
                # Kernels (GPU streams; CPU thunks) carry the HLO instruction that launched
                # them; the derived "XLA Ops" / "XLA Modules" lines would count them again.
                if "hlo_op" in stats and not line.name.startswith("XLA "):
                    entry = per_op.setdefault(str(stats["hlo_op"]), [0, 0])
                    entry[0] += event.duration_ns
                    entry[1] += 1
            per_line[f"{plane.name} {line.name}"] = total / args.profile_steps / 1e6
    hlo_text = os.path.splitext(args.output or "kernels")[0] + f".{stem}.optimized_hlo.txt.gz"
    write_kernel_instructions(executable.hlo_modules()[0].to_string(), per_op, hlo_text)
    return {"steps": args.profile_steps, "optimized_hlo": os.path.basename(hlo_text),
            "milliseconds_per_line_per_step": per_line,
            "per_hlo_op": {op: {"milliseconds_per_step": ns / args.profile_steps / 1e6,
                                "kernels_per_step": count / args.profile_steps}
                           for op, (ns, count) in sorted(per_op.items(),
                                                         key=lambda item: -item[1][0])}}, state


def write_kernel_instructions(hlo_text, kernel_ops, path):
    """The optimized module's lines of the instructions that launched kernels (a few
    kB gzipped instead of the module's megabytes): what `kernels` needs to name them."""
    import gzip

    lines = hlo_instructions(hlo_text)
    with (gzip.open if path.endswith(".gz") else open)(path, "wt", encoding="utf-8") as handle:
        handle.writelines(lines[op] + "\n" for op in kernel_ops if op in lines)


def profile_peer(torch, step, steps):
    """CUDA time per kernel name over `steps` steps (PyTorch's profiler)."""
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per_kernel = {}
    for event in profiler.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = per_kernel.setdefault(event.name, [0.0, 0])
            entry[0] += event.time_range.elapsed_us()
            entry[1] += 1
    # PyTorch's own table too, should its event API have changed.
    table = profiler.key_averages().table(sort_by="self_device_time_total", row_limit=40)
    return {"steps": steps, "table": table,
            "per_kernel": {name: {"milliseconds_per_step": us / steps / 1e3,
                                  "kernels_per_step": count / steps}
                           for name, (us, count) in sorted(per_kernel.items(),
                                                           key=lambda item: -item[1][0])}}


def run_peer(stem, args, compiled):
    """Hugging Face AlbertForPreTraining on the same shapes (PyTorch, bf16 autocast, SDPA)."""
    import torch
    import transformers

    with open(os.path.join(args.input_dir, f"{stem}.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    batch = np.load(os.path.join(args.input_dir, f"{stem}.{FEATURES}"))
    c = manifest["config"]
    config = transformers.AlbertConfig(
        vocab_size=c["vocab_size"], embedding_size=c["embedding_size"],
        hidden_size=c["hidden_size"], num_hidden_layers=c["num_hidden_layers"],
        num_hidden_groups=c["num_hidden_groups"], inner_group_num=c["inner_group_num"],
        num_attention_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
        hidden_act=c["hidden_act"], hidden_dropout_prob=c["hidden_dropout_prob"],
        attention_probs_dropout_prob=c["attention_probs_dropout_prob"],
        max_position_embeddings=c["max_position_embeddings"],
        type_vocab_size=c["type_vocab_size"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = transformers.AlbertForPreTraining._from_config(
        config, attn_implementation="sdpa").to(device)
    model.train()
    def long_tensor(values):
        return torch.tensor(values, dtype=torch.long, device=device)

    ids = long_tensor(batch["input_word_ids"])
    labels = torch.full_like(ids, -100)  # only the 20 masked positions are scored
    labels.scatter_(1, long_tensor(batch["masked_lm_positions"]),
                    long_tensor(batch["masked_lm_ids"]))
    inputs = {"input_ids": ids, "attention_mask": long_tensor(batch["input_mask"]),
              "token_type_ids": long_tensor(batch["input_type_ids"]), "labels": labels,
              "sentence_order_label": long_tensor(batch["next_sentence_labels"][:, 0])}
    optimizer = torch.optim.AdamW(model.parameters(), lr=manifest["learning_rate"],
                                  fused=device.type == "cuda")
    forward = torch.compile(model) if compiled else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = forward(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach()

    started = time.perf_counter()
    losses = [float(step()) for _ in range(3)]
    warmup_seconds = time.perf_counter() - started
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    timings = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        kept = [step() for _ in range(args.timed_steps)]
        if device.type == "cuda":
            torch.cuda.synchronize()
        timings.append((time.perf_counter() - started) / args.timed_steps)
        losses += [float(loss) for loss in kept]
    seconds = statistics.median(timings)
    kernels = (profile_peer(torch, step, args.profile_steps)
               if args.profile_steps and device.type == "cuda" else None)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    peak = bf16_peak_tflops(name)
    achieved = manifest["training_flops"] / seconds
    return {
        "implementation": "Hugging Face AlbertForPreTraining, PyTorch "
                          + ("torch.compile" if compiled else "eager")
                          + ", bf16 autocast, SDPA attention",
        "model": manifest["model"], "precision": "bf16 autocast", "device": name,
        "batch_size": manifest["batch_size"], "seq_length": manifest["seq_length"],
        "optimizer": "AdamW (fused)" if device.type == "cuda" else "AdamW", "torch": torch.__version__,
        "transformers": transformers.__version__, "warmup_seconds": warmup_seconds,
        "milliseconds_per_step": seconds * 1e3, "step_timings_ms": [t * 1e3 for t in timings],
        "examples_per_second": manifest["batch_size"] / seconds,
        "matmul_tflops_same_count_as_ours": achieved / 1e12, "peak_tflops": peak,
        "mfu_same_count_as_ours": achieved / (peak * 1e12) if peak else None,
        "peak_memory_gib": (torch.cuda.max_memory_allocated() / 2 ** 30
                            if device.type == "cuda" else None),
        "loss_per_step": losses, "all_losses_finite": bool(np.all(np.isfinite(losses))),
        "kernel_profile": kernels}


# ----------------------------------------------------------------------------------------------
# kernels: what the profiled GPU time went to (any machine; reads `run --profile_steps` output).
# ----------------------------------------------------------------------------------------------

OUR_CATEGORIES = ("attention: products (QK^T, PV and their gradients)",
                  "attention: elementwise on the S x S matrix (mask, softmax, dropout)",
                  "dense products", "optimizer (clip + LAMB)", "other")
PEER_CATEGORIES = ("fused attention (SDPA: products and softmax)", "dense products",
                   "optimizer (AdamW)", "other")


def hlo_instructions(hlo_text):
    """{instruction name: its line} of an HLO module's text."""
    found = {}
    for line in hlo_text.splitlines():
        match = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
        if match:
            found[match.group(1)] = line
    return found


def our_kernel_category(line, batch_size, seq_length):
    """A category of OUR_CATEGORIES for the HLO instruction `line` that launched a kernel.

    By the TensorFlow op name XLA kept in the metadata (of a fusion's root) and the
    result's shape (a tuple's first): the attention's own products are the MatMuls
    directly under an `attention*` layer (its dense projections sit under
    query/key/value/output), or products batched over examples (x heads) with a
    sequence axis (the dropout's custom gradient names its ops outside any layer);
    the attention matrix is the one with two trailing axes of the sequence length (or
    an op of the attention layer's own softmax, scaling or dropout)."""
    op_name = (re.search(r'op_name="([^"]*)"', line) or [None, ""])[1].lower()
    shape = re.search(r" = \(?\w+\[([\d,]*)\]", line)
    dims = [int(d) for d in shape.group(1).split(",") if d] if shape else []
    if any(key in op_name for key in ("lamb", "global_norm", "clip")):
        return OUR_CATEGORIES[3]
    product = ("custom_call_target=\"__cublas" in line or "gemm" in line.lower()
               or re.search(r"= [^ ]+ dot\(", line) is not None)
    if product:
        batched = (len(dims) >= 3 and dims[0] >= batch_size and dims[0] % batch_size == 0
                   and seq_length in dims[1:])
        attention = batched or re.search(r"/attention[\w]*/matmul", op_name) is not None
        return OUR_CATEGORIES[0] if attention else OUR_CATEGORIES[2]
    # (the softmax's gradient reduces the matrix to one value per row: its shape says no)
    softmax_part = re.search(r"/attention[\w]*/(softmax|sum|mul|sub|selectv2)(_\d+)?$", op_name)
    if (len(dims) >= 2 and dims[-1] == dims[-2] == seq_length) or softmax_part:
        return OUR_CATEGORIES[1]
    return OUR_CATEGORIES[4]


def peer_kernel_category(name):
    lowered = name.lower()
    if any(key in lowered for key in ("flash", "fmha", "attention", "efficient")):
        return PEER_CATEGORIES[0]
    if any(key in lowered for key in ("adam", "multi_tensor", "foreach")):
        return PEER_CATEGORIES[2]
    if any(key in lowered for key in ("gemm", "cutlass", "xmma", "nvjet", "cublas", "gemv")):
        return PEER_CATEGORIES[1]
    return PEER_CATEGORIES[3]


def kernel_summary(result, directory):
    """{category: milliseconds per step} of one profiled result."""
    profile = result["kernel_profile"]
    if "per_hlo_op" in profile:
        import gzip

        path = os.path.join(directory, profile["optimized_hlo"])
        if not os.path.exists(path):   # (written plain, committed gzipped)
            path += ".gz"
        with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as handle:
            lines = hlo_instructions(handle.read())
        timings = [(our_kernel_category(lines[op], result["batch_size"], result["seq_length"])
                    if op in lines
                    else OUR_CATEGORIES[4], timing) for op, timing in profile["per_hlo_op"].items()]
        categories = OUR_CATEGORIES
    else:
        timings = [(peer_kernel_category(name), timing)
                   for name, timing in profile["per_kernel"].items()]
        categories = PEER_CATEGORIES
    totals = dict.fromkeys(categories, 0.0)
    for category, timing in timings:
        totals[category] += timing["milliseconds_per_step"]
    return totals


def kernels(args):
    for path in args.inputs:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        for result in report["results"]:
            if not result.get("kernel_profile"):
                continue
            summary = kernel_summary(result, os.path.dirname(path))
            total = sum(summary.values())
            print(f"\n{result['implementation']}: {result.get('export', result['model'])}, "
                  f"{result['milliseconds_per_step']:.1f} ms per step timed, "
                  f"{total:.1f} ms of kernels per profiled step")
            print("| category | ms per step | share |\n|---|---|---|")
            for category, milliseconds in summary.items():
                print(f"| {category} | {milliseconds:.1f} | {milliseconds / total:.0%} |")


def run(args):
    import jax

    jax.config.update("jax_enable_x64", True)  # the optimizer's step counter is int64

    stems = sorted(name[:-len(".json")] for name in os.listdir(args.input_dir)
                   if name.endswith(".json"))
    if args.models:
        stems = [s for s in stems if s in args.models.split(",")]
    report = {"command": " ".join(sys.argv), "jax": jax.__version__,
              "device": device_description(jax)[1], "results": []}

    def record(result):
        report["results"].append(result)
        print(json.dumps({k: v for k, v in result.items()
                          if k not in ("loss_per_step", "first_steps", "kernel_profile",
                                       "reference_first_steps_tensorflow_cpu")}), flush=True)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as handle:
                json.dump(report, handle, indent=1)

    for stem in [] if args.skip_ours else stems:
        result = run_ours(stem, args, jax)
        record(result)
        difference = result.get("largest_relative_loss_difference_vs_tensorflow")
        if difference is not None and difference > args.tolerance:
            print(f"ERROR: {stem}: the first steps' losses differ from TensorFlow's by "
                  f"{difference:.2e}", flush=True)
            sys.exit(1)
    peer_stems = args.peer_models.split(",") if args.peer_models else []
    for peer in args.peers.split(",") if args.peers else []:
        for stem in peer_stems:
            started = time.perf_counter()
            try:
                record(run_peer(stem, args, compiled=peer == "compiled"))
            except Exception as error:  # noqa: BLE001  (a failing peer is reported, not fatal)
                record({"implementation": f"Hugging Face ({peer})", "model": stem,
                        "error": f"{type(error).__name__}: {error}"[:2000],
                        "seconds": time.perf_counter() - started})


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="lower the step to HLO (needs TensorFlow)")
    export.add_argument("--models", default="base,large",
                        help="names of benchmarks/accelerator_step.py's MODELS; "
                             "NAME:mixed_float16 for another precision")
    export.add_argument("--batch_size", type=int, default=64)
    export.add_argument("--seq_length", type=int, default=512)
    export.add_argument("--predictions", type=int, default=20)
    export.add_argument("--precision", default="mixed_bfloat16")
    export.add_argument("--learning_rate", type=float, default=1e-4)
    export.add_argument("--dropout", type=float, default=None,
                        help="hidden and attention dropout (default: the config's)")
    export.add_argument("--reference_steps", type=int, default=2,
                        help="steps run here for reference losses (0 where the batch does not "
                             "fit this machine's memory; a smaller export checks the plumbing)")
    export.add_argument("--output_dir", required=True)
    runner = commands.add_parser("run", help="compile and time the exported steps (needs JAX)")
    runner.add_argument("--input_dir", required=True)
    runner.add_argument("--models", default=None, help="exported names to run (default: all)")
    runner.add_argument("--timed_steps", type=int, default=10)
    runner.add_argument("--repeats", type=int, default=3)
    runner.add_argument("--tolerance", type=float, default=2e-2,
                        help="largest relative difference from TensorFlow's first losses")
    runner.add_argument("--peers", default="eager,compiled",
                        help="Hugging Face variants to time beside ours ('' for none)")
    runner.add_argument("--compile_only", action="store_true",
                        help="compile ours and report XLA's memory assignment, without running")
    runner.add_argument("--skip_ours", action="store_true",
                        help="time the peers only (in their own process: JAX keeps most of "
                             "the GPU's memory once it has run)")
    runner.add_argument("--peer_models", default="",
                        help="exported names (e.g. base-b64) to time the peers on")
    runner.add_argument("--profile_steps", type=int, default=0,
                        help="after timing, profile this many steps: GPU time per HLO "
                             "instruction (ours; the optimized module is written beside "
                             "--output) or per kernel (the peers); `kernels` summarises")
    runner.add_argument("--output", default=None)
    summary = commands.add_parser("kernels", help="what the profiled kernel time went to")
    summary.add_argument("inputs", nargs="+", help="`run --profile_steps` output files")
    args = parser.parse_args()
    if args.command == "kernels":
        kernels(args)
    elif args.command == "export":
        os.makedirs(args.output_dir, exist_ok=True)
        for name in args.models.split(","):
            stem = export_stem(name, args.batch_size, args.dropout)
            manifest = os.path.join(args.output_dir, stem + ".json")
            if os.path.exists(manifest):
                sys.exit(f"ERROR: {manifest} exists; export into another --output_dir")
        for name in args.models.split(","):
            export_model(name, args)
    else:
        run(args)


if __name__ == "__main__":
    main()
