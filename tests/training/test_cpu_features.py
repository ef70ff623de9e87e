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



def test_importing_albert_turns_on_onednn_kernels():
    # TensorFlow leaves them off on x86 CPUs without AVX-512 VNNI/BF16/AMX, where its Eigen
    # matrix products are about half as fast (docs/memory.md). A user's own setting is kept
    # (os.environ.setdefault); this checks that the package's default reaches TensorFlow.
    import os
    import subprocess
    import sys

    environment = {key: value for key, value in os.environ.items()
                   if key != "TF_ENABLE_ONEDNN_OPTS"}
    program = ("import os, albert\n"
               "from tensorflow.python.util import _pywrap_util_port\n"
               "print(os.environ['TF_ENABLE_ONEDNN_OPTS'], _pywrap_util_port.IsMklEnabled())")
    result = subprocess.run([sys.executable, "-c", program], env=environment, check=True,
                            capture_output=True, text=True)
    assert result.stdout.split()[-2:] == ["1", "True"]
