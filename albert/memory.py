r"""What fits in a device's memory: an estimate per device, and the settings to use.

    python -m albert.memory --albert_config_file=configs/albert_xxlarge_v2.json \
        --max_seq_length=512 --train_batch_size=4096 --num_replicas=8 \
        --device_memory_gib=16 --mixed_precision=mixed_bfloat16

prints the estimated bytes per device — weights, gradients, optimizer slots,
activations stored for the backward pass per example with and without
rematerialisation, the attention matrices counted — and the micro-batch,
`--gradient_accumulation_steps` and `--rematerialize` to use.

The activation count follows Korthikanti et al. (2022), "Reducing
Activation Recomputation in Large Transformer Models", generalised to any
element size `e` (2 bytes under mixed precision, 4 in float32) and
feed-forward width `I`. Per layer application and example, with `S` tokens,
width `H`, `A` heads:

    attention    5e·S·H + 2e·A·S²   (QKV input, Q, K, V, context, output input;
                                     the attention matrix twice: the softmax's
                                     output and the product's input)
    feed-forward e·S·H + 2e·S·I     (input, inner pre- and post-GELU)
    layer norms  2e·S·H

Dropout adds nothing: its keep masks, and the dropped attention
probabilities, are recomputed in the backward pass instead of kept
(albert.modeling.dropout), and on an H200 XLA assigned the same memory to
the step with dropout 0.1 as without (docs/accelerators.md). XLA keeps one
copy of the attention matrix where this counts two, part of why the estimate
came out 13 % above XLA's assignment there.

plus the embeddings and the masked-LM head (its logits at the masked
positions over the vocabulary, in float32). It counts what fused kernels
keep (as XLA's are); TensorFlow's unfused CPU kernels keep more
intermediates (GELU's, the layer norms'), which is part of why it measured
up to 40 % low on CPU. A shared block applied `L` times
stores `L` sets: sharing saves weights, not activations. The exception is
the shared-block loop that ALBERT-xlarge and xxlarge train with
(`albert.modeling.encoder.loops_shared_block`): it keeps each application's
input and its six dense projections' outputs, `e·S·(6H + I)`, and its
backward pass replays one application's full set at a time. With
rematerialisation each application stores only its input (`e·S·H`) and one
application's full set is live while it is recomputed.

Weights, gradients and LAMB's two slots are float32 (16 bytes per parameter),
plus one float32 gradient sum when accumulating over micro-batches. The
device estimate leaves out the framework's own workspace and fragmentation, and
plans fill at most `USABLE_FRACTION` of a device; docs/accelerators.md says
how it compared with measured peaks.

On a CPU the whole process's peak is what runs out (`MemoryEstimate.process_peak`,
printed as "CPU process peak"): it adds what TensorFlow itself holds (its
libraries, the traced step, the allocator's free lists: `CPU_RUNTIME_BYTES`),
scales the activations by `CPU_ACTIVATION_FACTOR` for the intermediates
TensorFlow's unfused CPU kernels keep beyond the count above, adds what glibc's
heaps keep of freed blocks (`CPU_HEAP_RETENTION` times the weight matrices of
32 MiB or less: BERT-large's are, xxlarge's are not), and takes the optimizer
update's temporaries (`CPU_UPDATE_COPIES` copies of the largest variable; the
update runs one variable at a time) where they exceed the activations. A worker
of several CPU workers adds the gradient all-reduce's copies
(`CPU_ALLREDUCE_GRADIENT_COPIES` times the gradients). The
constants are fitted to the ten peaks of benchmarks/training_memory.py
(docs/memory.md), so within 15 % of them by construction, not validated at
other shapes; an accelerator's compiled step keeps what the Korthikanti count
keeps, and its runtime lives on the host.
"""

import dataclasses
import os
import subprocess
from typing import List, Optional

from absl import flags

from albert import cli
from albert.checkpoints.naming import count_parameters
from albert.config import AlbertConfig
from albert.errors import InputError
from albert.modeling.encoder import loops_shared_block
from albert.training import distribute

GIB = 2 ** 30
# Estimate / measured peak memory per example, over the shapes of
# benchmarks/memory_estimate.py on CPU (0.61 to 1.38; docs/accelerators.md), with a margin.
VALIDATED_RATIO = (0.5, 1.5)
# Part of a device's memory the estimate may fill: the rest covers an estimate
# up to 40 % low (as measured at ALBERT-base, length 128, without
# rematerialisation), the framework's workspace and fragmentation.
USABLE_FRACTION = 0.6
# Examples per micro-batch below which a device is starved (rematerialise rather than split).
BUSY_MICRO_BATCH = 8
# A CPU training process beside the counted tensors (docs/memory.md: fitted to the peaks of
# benchmarks/training_memory.py, 2 cores, float32, batch 8 x 64, oneDNN's kernels).
CPU_RUNTIME_BYTES = int(0.75 * GIB)
CPU_ACTIVATION_FACTOR = 1.5
CPU_UPDATE_COPIES = 4
# glibc serves blocks up to 32 MiB from its heaps once its mmap threshold has risen, and keeps
# them when freed: the heap holds about this many times the float32 bytes of the variables of
# that size (their gradients, slots and update temporaries pass through it every step).
CPU_HEAP_RETENTION = 0.9
HEAP_BLOCK_LIMIT = 32 * 2 ** 20
# A worker of several (MultiWorkerMirroredStrategy, one replica a process) also holds the
# gradient all-reduce's copies: counted as this many float32 copies of the gradients. With one
# copy (the sums beside the gradients being summed) the estimate is 1.03 (BERT-large) and 0.88
# (ALBERT-xxlarge) of the two 2-worker peaks measured in
# benchmarks/results/memory/workers_bert_large_xxlarge.json; no other worker count or shape was
# measured.
CPU_ALLREDUCE_GRADIENT_COPIES = 1.0


def define_flags() -> None:
    """The memory flags every training script shares."""
    flags.DEFINE_integer(
        "gradient_accumulation_steps", 1,
        "Split each replica's share of --train_batch_size into this many micro-batches whose "
        "gradients are summed before one optimizer step (the same step as unsplit, less memory).")
    flags.DEFINE_bool(
        "rematerialize", False,
        "Recompute each transformer layer's activations in the backward pass instead of storing "
        "them (less memory, about a third more arithmetic; same gradients to rounding; "
        "docs/memory.md).")


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes on one device (see the module docstring)."""

    parameters: int
    weights: int
    gradients: int
    optimizer_slots: int
    activations_per_example: int
    rematerialized_activations_per_example: int
    largest_variable: int = 0
    heap_variables: int = 0

    @property
    def fixed(self) -> int:
        return self.weights + self.gradients + self.optimizer_slots

    def total(self, micro_batch: int, accumulation_steps: int = 1,
              rematerialize: bool = False) -> int:
        per_example = (self.rematerialized_activations_per_example if rematerialize
                       else self.activations_per_example)
        accumulator = self.gradients if accumulation_steps > 1 else 0
        return self.fixed + accumulator + micro_batch * per_example

    def process_peak(self, micro_batch: int, accumulation_steps: int = 1,
                     rematerialize: bool = False, workers: int = 1) -> int:
        """A CPU training process's peak resident memory (see the module docstring); with
        `workers` > 1, one worker's of a cluster that sums its gradients across them."""
        per_example = (self.rematerialized_activations_per_example if rematerialize
                       else self.activations_per_example)
        accumulator = self.gradients if accumulation_steps > 1 else 0
        activations = CPU_ACTIVATION_FACTOR * micro_batch * per_example
        update = CPU_UPDATE_COPIES * self.largest_variable
        heap = CPU_HEAP_RETENTION * self.heap_variables
        all_reduce = CPU_ALLREDUCE_GRADIENT_COPIES * self.gradients if workers > 1 else 0
        return int(CPU_RUNTIME_BYTES + self.fixed + accumulator + heap + all_reduce
                   + max(activations, update))


def estimate(config: AlbertConfig, seq_length: int, predictions: int,
             mixed_precision: str = "none", sequences_per_example: int = 1) -> MemoryEstimate:
    """The per-device estimate for one model and sequence shape (`sequences_per_example`:
    RACE's options, each a sequence through the encoder)."""
    element = 4 if mixed_precision in (None, "none") else 2
    parameters = count_parameters(config, include_heads=True)
    s, h, i = seq_length, config.hidden_size, config.intermediate_size
    a = config.num_attention_heads
    attention = 5 * element * s * h + 2 * element * a * s * s
    feed_forward = element * s * h + 2 * element * s * i
    layer_norms = 2 * element * s * h
    application = attention + feed_forward + layer_norms
    applications = config.num_hidden_layers * config.inner_group_num
    embeddings = 3 * element * s * config.embedding_size + element * s * h
    # Masked-LM head: transform input and output, then float32 logits and their softmax.
    head = predictions * (2 * element * h + 2 * 4 * config.vocab_size)
    stored = embeddings + head
    if loops_shared_block(config):
        # The shared-block loop keeps each application's input and its six dense projections'
        # outputs (query, key, value, attention output, feed-forward inner and output) and
        # replays one application at a time in its backward pass.
        layers = applications * element * s * (6 * h + i) + application
    else:
        layers = applications * application
    return MemoryEstimate(
        parameters=parameters, weights=4 * parameters, gradients=4 * parameters,
        optimizer_slots=8 * parameters,
        activations_per_example=sequences_per_example * (stored + layers),
        rematerialized_activations_per_example=sequences_per_example * (
            stored + applications * element * s * h + application),
        largest_variable=4 * max(h * i, config.vocab_size * config.embedding_size),
        heap_variables=_heap_variable_bytes(config))


def _heap_variable_bytes(config: AlbertConfig) -> int:
    """float32 bytes of the weight matrices small enough for glibc's heaps (HEAP_BLOCK_LIMIT):
    each distinct layer's attention and feed-forward kernels, the embedding table, its
    projection and the pooler."""
    h, i, e = config.hidden_size, config.intermediate_size, config.embedding_size
    distinct_layers = config.num_hidden_groups * config.inner_group_num
    layer = [4 * size for size in [h * h] * 4 + [h * i] * 2 if 4 * size <= HEAP_BLOCK_LIMIT]
    other = [4 * size for size in (config.vocab_size * e, e * h, h * h)
             if 4 * size <= HEAP_BLOCK_LIMIT]
    return distinct_layers * sum(layer) + sum(other)


@dataclasses.dataclass(frozen=True)
class Plan:
    per_replica_batch: int
    micro_batch: int
    accumulation_steps: int
    rematerialize: bool
    bytes: int
    fits: bool


def plan(memory: MemoryEstimate, per_replica_batch: int, device_bytes: int) -> Plan:
    """The fewest micro-batches (then rematerialisation) that fit `device_bytes`."""
    budget = device_bytes * USABLE_FRACTION
    options: List[Plan] = []
    for rematerialize in (False, True):
        for steps in range(1, per_replica_batch + 1):
            if per_replica_batch % steps:
                continue
            micro = per_replica_batch // steps
            total = memory.total(micro, steps, rematerialize)
            options.append(Plan(per_replica_batch, micro, steps, rematerialize, total,
                                total <= budget))
    fitting = [option for option in options if option.fits]
    if not fitting:
        return min(options, key=lambda option: option.bytes)
    # Recomputing costs about a third more arithmetic; more micro-batches cost little while
    # each keeps the device busy. So: no rematerialisation while the micro-batch stays at
    # BUSY_MICRO_BATCH examples or more, else the fewest micro-batches with it.
    busy = min(BUSY_MICRO_BATCH, per_replica_batch)
    return min(fitting, key=lambda option: (option.micro_batch < busy, option.rematerialize,
                                            option.accumulation_steps))


def device_memory_bytes(strategy) -> Optional[int]:
    """Memory of one of the strategy's devices: a GPU's (from nvidia-smi), the host's RAM for
    CPUs; None where unknown (TPUs, or no nvidia-smi)."""
    if distribute.is_tpu(strategy):
        return None
    if distribute.uses_gpus(strategy):
        try:
            output = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10, check=True).stdout
            return int(output.split()[0]) * 2 ** 20
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def fit_warning(config: AlbertConfig, seq_length: int, predictions: int, global_batch: int,
                strategy, accumulation_steps: int, rematerialize: bool, mixed_precision: str,
                sequences_per_example: int = 1) -> Optional[str]:
    """One line when the run's settings do not fit its devices by the estimate (None: they
    fit, or the device's memory is unknown). A warning, not a refusal: estimates can be
    wrong."""
    device_bytes = device_memory_bytes(strategy)
    if not device_bytes or accumulation_steps < 1:   # (the loop refuses K < 1 in one line)
        return None
    memory = estimate(config, seq_length, predictions, mixed_precision, sequences_per_example)
    per_replica = global_batch // strategy.num_replicas_in_sync
    needed = memory.total(per_replica // accumulation_steps, accumulation_steps, rematerialize)
    if needed <= device_bytes * USABLE_FRACTION:
        return None
    suggestion = plan(memory, per_replica, device_bytes)
    advice = ("try --gradient_accumulation_steps="
              f"{suggestion.accumulation_steps}{' --rematerialize' if suggestion.rematerialize else ''}"
              if suggestion.fits else "no split of this batch fits: use more devices")
    return (f"By the estimate of python -m albert.memory, --train_batch_size={global_batch} "
            f"needs {needed / GIB:.1f} GiB per device of {device_bytes / GIB:.1f} GiB; {advice}")


def report(config: AlbertConfig, seq_length: int, predictions: int, global_batch: int,
           replicas: int, device_gib: float, mixed_precision: str) -> str:
    memory = estimate(config, seq_length, predictions, mixed_precision)
    if replicas < 1 or global_batch < 1 or global_batch % replicas:
        raise InputError(f"--train_batch_size={global_batch} is not a positive multiple of "
                         f"--num_replicas={replicas}")
    per_replica = global_batch // replicas
    chosen = plan(memory, per_replica, int(device_gib * GIB))
    lines = [
        f"parameters            {memory.parameters:,}",
        f"weights               {memory.weights / GIB:8.2f} GiB",
        f"gradients             {memory.gradients / GIB:8.2f} GiB",
        f"optimizer slots       {memory.optimizer_slots / GIB:8.2f} GiB",
        f"activations/example   {memory.activations_per_example / GIB:8.3f} GiB "
        f"({memory.rematerialized_activations_per_example / GIB:.3f} GiB rematerialised)",
        f"per device            {per_replica} examples of the global {global_batch} "
        f"on {replicas} replica(s), {device_gib:g} GiB each "
        f"({USABLE_FRACTION:.0%} usable by the estimate)",
        f"unsplit               {memory.total(per_replica) / GIB:8.1f} GiB on an accelerator; "
        + (f"as one CPU process {memory.process_peak(per_replica) / GIB:.1f} GiB (TensorFlow's "
           f"runtime and unfused kernels' intermediates added)" if replicas == 1 else
           f"as each of {replicas} CPU workers "
           f"{memory.process_peak(per_replica, workers=replicas) / GIB:.1f} GiB (TensorFlow's "
           f"runtime, unfused kernels' intermediates and the gradient all-reduce added)"),
    ]
    if chosen.fits:
        lines.append(
            f"use                   micro-batch {chosen.micro_batch}: "
            f"--gradient_accumulation_steps={chosen.accumulation_steps}"
            + (" --rematerialize" if chosen.rematerialize else "")
            + f" ({chosen.bytes / GIB:.1f} GiB)")
    else:
        smallest = memory.total(1, per_replica, True)
        lines.append(f"does not fit          even one example per micro-batch rematerialised "
                     f"needs {smallest / GIB:.1f} GiB: use more or larger devices")
    return "\n".join(lines)


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    config = cli.load_albert_config(FLAGS.albert_config_file)
    print(report(config, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                 FLAGS.train_batch_size, FLAGS.num_replicas, FLAGS.device_memory_gib,
                 FLAGS.mixed_precision))


def _define_planner_flags() -> None:
    flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
    flags.DEFINE_integer("max_seq_length", 512, "Sequence length.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
    flags.DEFINE_integer("train_batch_size", 4096, "Global batch of one optimizer step.")
    flags.DEFINE_integer("num_replicas", 1, "Devices (replicas) the batch is split over.")
    flags.DEFINE_float("device_memory_gib", 16.0, "Memory of one device, GiB.")
    flags.DEFINE_enum("mixed_precision", "none", ["none", "mixed_bfloat16", "mixed_float16"],
                      "Precision of the activations.")
    cli.define_config_flags()
    flags.mark_flag_as_required("albert_config_file")


if __name__ == "__main__":
    _define_planner_flags()
    cli.run(main)
