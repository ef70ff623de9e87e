"""The training step as an accelerator would run it, checked on CPU.

* Without XLA, no operation of the step touches a tensor of batch x sequence
  elements or more through a GPU kernel that keeps its data in host memory
  (TensorFlow's GPU kernels for int32 arithmetic do; the kernel registry of
  the installed TensorFlow says which, GPU build or not).
* With XLA on one device, the whole step (forward, backward, clipping, the
  loss-scale decision, LAMB) lowers to one HLO module with no host transfer.
"""

import re

import keras
import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

from albert.config import AlbertConfig
from albert.pretraining_data.schema import DataContract
from albert.tasks.pretraining import PretrainingTask
from albert.training.loop import variable_names_for
from albert.training.optimization import AlbertLossScaleOptimizer, create_optimizer
from albert.training.replica_step import ReplicaStep

BATCH, SEQUENCE, PREDICTIONS = 4, 32, 5
TINY = AlbertConfig(vocab_size=1200, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
# Ops that only move or describe a tensor: they never compute on its elements on the device.
STRUCTURAL = {"Const", "Placeholder", "Identity", "Shape", "Reshape", "NoOp", "Cast"}


def _features():
    ids = tf.random.stateless_uniform([BATCH, SEQUENCE], [1, 2], 5, TINY.vocab_size, tf.int32)
    return {"input_word_ids": ids, "input_mask": tf.ones([BATCH, SEQUENCE], tf.int32),
            "input_type_ids": tf.zeros([BATCH, SEQUENCE], tf.int32),
            "masked_lm_positions": tf.ones([BATCH, PREDICTIONS], tf.int32),
            "masked_lm_ids": tf.ones([BATCH, PREDICTIONS], tf.int32),
            "masked_lm_weights": tf.ones([BATCH, PREDICTIONS], tf.float32),
            "next_sentence_labels": tf.zeros([BATCH], tf.int32),
            "dropout_seeds": tf.range(BATCH)}


def _task_model_strategy():
    data = DataContract(files=[], record_counts=[], max_seq_length=SEQUENCE,
                        max_predictions_per_seq=PREDICTIONS, has_token_boundary=False)
    task = PretrainingTask(TINY, data)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = task.build_model()
    return task, model, strategy


def _replica_step(jit_compile):
    task, model, strategy = _task_model_strategy()
    with strategy.scope():
        optimizer = AlbertLossScaleOptimizer(create_optimizer(
            "lamb", 1e-3, 100, 0, variable_names=variable_names_for(model),
            gradients_summed_by_caller=True))
        optimizer.build(model.trainable_variables)
    return strategy, ReplicaStep(task, strategy, model, optimizer, jit_compile)


def _graphs(graph, seen=None):
    """A graph and every function graph it calls (loops, conditionals, nested functions)."""
    seen = set() if seen is None else seen
    yield graph
    for function in getattr(graph, "_functions", {}).values():
        inner = getattr(function, "graph", None)
        if inner is not None and id(inner) not in seen:
            seen.add(id(inner))
            yield from _graphs(inner, seen)


def _int32_gpu_kernel_uses_host_memory(op_type):
    for kernel in kernels.get_registered_kernels_for_op(op_type).kernel:
        if kernel.device_type not in ("GPU", "DEFAULT") or not kernel.host_memory_arg:
            continue
        dtypes = [t for c in kernel.constraint for t in c.allowed_values.list.type]
        if tf.int32.as_datatype_enum in dtypes:
            return True
    return False


def test_the_gpu_kernel_registry_is_readable_on_cpu():
    """The audit below relies on it: int32 Mul on a GPU is a host-memory kernel, uint32 is not."""
    assert _int32_gpu_kernel_uses_host_memory("Mul")
    gpu_uint32 = [k for k in kernels.get_registered_kernels_for_op("Mul").kernel
                  if k.device_type == "GPU" and not k.host_memory_arg
                  and tf.uint32.as_datatype_enum in
                  [t for c in k.constraint for t in c.allowed_values.list.type]]
    assert gpu_uint32


def test_no_large_int32_tensor_goes_through_a_host_memory_gpu_kernel():
    strategy, step = _replica_step(jit_compile=False)
    function = tf.function(lambda features: strategy.run(step, args=(features,)))
    graph = function.get_concrete_function(_features()).graph
    large, found = BATCH * SEQUENCE, []
    operations = 0
    for inner in _graphs(graph):
        for op in inner.get_operations():
            operations += 1
            if op.type in STRUCTURAL:
                continue
            for tensor in [*op.inputs, *op.outputs]:
                if (tensor.dtype == tf.int32 and tensor.shape.is_fully_defined()
                        and tensor.shape.num_elements() >= large
                        and _int32_gpu_kernel_uses_host_memory(op.type)):
                    found.append(f"{op.type} {op.name} {tensor.shape}")
    assert operations > 1000  # the whole step was traced, not an empty shell
    assert not found, "\n".join(found)


def test_the_whole_step_is_one_xla_computation_with_no_host_transfer():
    strategy, step = _replica_step(jit_compile=True)
    compiled = {}

    def lower(features):
        compiled["hlo"] = step.step.experimental_get_compiler_ir(features)(stage="hlo")
        return tf.constant(0)

    strategy.run(lower, args=(_features(),))
    instructions = [line for line in compiled["hlo"].splitlines() if " = " in line]
    opcodes = {match.group(1) for match in
               (re.search(r"= \S+ ([a-z][a-z0-9\-]*)\(", line) for line in instructions) if match}
    print(f"HLO instructions of the tiny whole step: {len(instructions)}")
    host = {"send", "recv", "send-done", "recv-done", "outfeed", "infeed", "custom-call"}
    assert not opcodes & host, sorted(opcodes & host)
    assert "host" not in compiled["hlo"].lower()
    # Forward/backward (dot), the loss-scale decision (is-finite) and LAMB's
    # norms (sqrt) are all inside the one module.
    assert {"dot", "is-finite", "sqrt"} <= opcodes
    assert len(instructions) > 1000


# The XLA-compiled step is in the slow tier (34 s on 2 cores against 12 s), to keep the default
# suite within 15 minutes.
@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_step_trains(jit_compile):
    """The audited step is a working one: it changes the weights, finitely."""
    strategy, step = _replica_step(jit_compile)
    before = [v.numpy().copy() for v in step.variables]
    function = tf.function(lambda features: strategy.run(step, args=(features,)))
    losses = function(_features())
    assert bool(tf.math.is_finite(losses["loss"]))
    changed = [not (b == v.numpy()).all() for b, v in zip(before, step.variables)]
    assert sum(changed) > len(changed) // 2


@pytest.mark.parametrize("kind", ["keras", "albert"])
def test_the_step_refuses_an_optimizer_that_would_sum_the_gradients_again(kind):
    """The step sums gradients across replicas itself: an optimizer that sums them in
    `apply` (Keras's, or ALBERT's built for model.fit) is refused, and left as it was."""
    task, model, strategy = _task_model_strategy()
    with strategy.scope():
        optimizer = (keras.optimizers.Adam() if kind == "keras"
                     else create_optimizer("lamb", 1e-3, 100, 0))
    with pytest.raises(TypeError, match="gradients_summed_by_caller=True"):
        ReplicaStep(task, strategy, model, optimizer, jit_compile=False)
    assert getattr(optimizer, "gradients_summed_by_caller", None) in (None, False)
