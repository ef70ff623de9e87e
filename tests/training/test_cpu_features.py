"""Run-time CPU feature detection: read from the machine, never assumed."""

import platform

from albert.training.cpu_features import cpu_features, has_native_bfloat16


def test_native_bfloat16_needs_a_bfloat16_instruction_set():
    assert has_native_bfloat16(frozenset({"avx2", "avx512f", "avx512_bf16"}))
    assert has_native_bfloat16(frozenset({"amx_bf16", "amx_tile"}))
    assert not has_native_bfloat16(frozenset({"avx2", "avx512f", "avx512_vnni"}))
    assert not has_native_bfloat16(frozenset())


def test_features_are_this_machines_own():
    features = cpu_features()
    if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            flags_line = next(line for line in handle if line.startswith("flags"))
        assert features == frozenset(flags_line.split(":", 1)[1].split())
        assert "sse2" in features  # every x86-64 CPU has it
    assert has_native_bfloat16() == bool(features & {"avx512_bf16", "amx_bf16"})
