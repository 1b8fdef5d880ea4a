"""What the CPU can do, read once from /proc/cpuinfo (empty where there is none).

Whether bfloat16 is native decides two defaults: the dtype vLLM serves in
(infra/vllm_server.server_dtype) and whether the trainer computes in bf16
(consumers/trainer/llamafactory.mixed_bf16). An AVX2-only CPU emulates bf16 and runs
it several times slower than float32; AVX512-BF16 and AMX run it faster.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

NATIVE_BF16 = frozenset({"avx512_bf16", "amx_bf16"})


@cache
def cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    return next((frozenset(line.split(":", 1)[1].split()) for line in text.splitlines()
                 if line.startswith("flags")), frozenset())


def native_bf16(flags: frozenset[str] | set[str]) -> bool:
    return bool(flags & NATIVE_BF16)
