"""What this CPU can do, read at run time (never assumed: machines differ).

Used to decide whether bfloat16 is worth measuring: without native bfloat16
arithmetic (AVX-512 BF16 or AMX on x86), TensorFlow emulates it through
float32 and mixed_bfloat16 only adds conversions.
"""

import functools
import platform
from typing import FrozenSet

NATIVE_BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@functools.lru_cache(maxsize=None)
def cpu_features() -> FrozenSet[str]:
    """The CPU's feature flags as the kernel reports them (Linux); empty where unknown."""
    if platform.system() != "Linux":
        return frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def has_native_bfloat16(features: FrozenSet[str] = None) -> bool:
    """True when the CPU computes bfloat16 dot products in hardware."""
    features = cpu_features() if features is None else features
    return bool(features & NATIVE_BFLOAT16_FLAGS)


def resolve_mixed_precision(choice: str) -> str:
    """A --mixed_precision value with "auto" decided by this CPU: mixed_bfloat16 where it
    computes bfloat16 natively, none elsewhere (emulated bfloat16 is slower than float32)."""
    if choice != "auto":
        return choice
    return "mixed_bfloat16" if has_native_bfloat16() else "none"
