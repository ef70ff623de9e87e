"""benchmarks/accelerator_hlo.py's `kernels`: profiled kernels sorted into categories.

The lines below follow the optimized HLO text XLA's GPU compiler prints (result
shape, opcode, metadata with TensorFlow's op names), shortened; the kernel names
are of the kinds PyTorch's profiler reports on a GPU.
"""

import gzip
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import accelerator_hlo  # noqa: E402  (a script directory, not a package)

PRODUCTS, ELEMENTWISE, DENSE, OPTIMIZER, OTHER = accelerator_hlo.OUR_CATEGORIES

LINES = {
    "custom-call.5": (
        '%custom-call.5 = (bf16[768,512,512]{2,1,0}, s8[4194304]{0}) custom-call(%a, %b), '
        'custom_call_target="__cublas$lt$matmul", metadata={op_type="BatchMatMulV3" '
        'op_name="albert_pretrainer_1/encoder_1/attention_0_3/MatMul"}', PRODUCTS),
    "custom-call.9": (
        '%custom-call.9 = (bf16[32768,3072]{1,0}, s8[4194304]{0}) custom-call(%c, %d), '
        'custom_call_target="__cublas$lt$matmul", metadata={op_type="MatMul" '
        'op_name="albert_pretrainer_1/encoder_1/ffn_0_3/intermediate_1/Tensordot/MatMul"}', DENSE),
    # The dropout's custom gradient names its product outside any layer.
    "gemm_fusion.2": (
        '%gemm_fusion.2 = bf16[768,512,64]{2,1,0} fusion(%x, %y), kind=kCustom, calls=%g, '
        'backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion"}}, '
        'metadata={op_type="BatchMatMulV3" op_name="MatMul_3"}', PRODUCTS),
    "triton_softmax.90": (
        '%triton_softmax.90 = bf16[64,12,512,512]{3,2,1,0} fusion(%m, %n), kind=kCustom, '
        'calls=%s, metadata={op_type="Softmax" '
        'op_name="albert_pretrainer_1/encoder_1/attention_0_11/Softmax"}', ELEMENTWISE),
    "input_reduce_fusion.3": (
        '%input_reduce_fusion.3 = bf16[64,12,512]{2,1,0} fusion(%p), kind=kInput, calls=%r, '
        'metadata={op_type="Sum" '
        'op_name="gradient_tape/albert_pretrainer_1/encoder_1/attention_0_1/Sum"}', ELEMENTWISE),
    "loop_add_fusion": (
        '%loop_add_fusion = bf16[512,64,768]{2,1,0} fusion(%q, %t), kind=kLoop, calls=%u, '
        'metadata={op_type="AddV2" op_name="albert_pretrainer_1/encoder_1/attention_0_1/add"}',
        OTHER),
    "loop_multiply_fusion.7": (
        '%loop_multiply_fusion.7 = f32[768,768]{1,0} fusion(%v, %w), kind=kLoop, calls=%z, '
        'metadata={op_type="Mul" op_name="albert_lamb/update_3/mul"}', OPTIMIZER),
}


@pytest.mark.parametrize("name", sorted(LINES))
def test_our_kernels_fall_into_their_categories(name):
    line, category = LINES[name]
    assert accelerator_hlo.our_kernel_category(line, batch_size=64, seq_length=512) == category


@pytest.mark.parametrize("kernel, category", [
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64", 0),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 1),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamWMathFunctor>", 2),
    ("triton_poi_fused_gelu_mul_3", 3),
])
def test_peer_kernels_fall_into_their_categories(kernel, category):
    assert accelerator_hlo.peer_kernel_category(kernel) == accelerator_hlo.PEER_CATEGORIES[category]


def test_kernels_sums_a_profile_by_category(tmp_path):
    """`kernels` reads a run's JSON and the gzipped instruction lines beside it."""
    per_op = {name: {"milliseconds_per_step": 1.0 + index, "kernels_per_step": 1.0}
              for index, name in enumerate(sorted(LINES))}
    accelerator_hlo.write_kernel_instructions(
        "HloModule m\n\nENTRY %main {\n" + "\n".join("  " + line for line, _ in LINES.values())
        + "\n}\n", per_op, str(tmp_path / "k.base.optimized_hlo.txt.gz"))
    with gzip.open(tmp_path / "k.base.optimized_hlo.txt.gz", "rt", encoding="utf-8") as handle:
        assert len(handle.read().splitlines()) == len(LINES)
    result = {"implementation": "ours", "model": "base", "export": "base-b64", "batch_size": 64,
              "seq_length": 512, "milliseconds_per_step": 30.0,
              "kernel_profile": {"optimized_hlo": "k.base.optimized_hlo.txt",
                                 "per_hlo_op": per_op}}
    summary = accelerator_hlo.kernel_summary(result, str(tmp_path))
    expected = dict.fromkeys(accelerator_hlo.OUR_CATEGORIES, 0.0)
    for name, (_, category) in LINES.items():
        expected[category] += per_op[name]["milliseconds_per_step"]
    assert summary == expected
    (tmp_path / "k.json").write_text(json.dumps({"results": [result]}))
    printed = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "accelerator_hlo.py"), "kernels",
         str(tmp_path / "k.json")], capture_output=True, text=True, check=True).stdout
    assert f"| {PRODUCTS} | {expected[PRODUCTS]:.1f} |" in printed
