"""What machine a benchmark ran on: every bench prints this line first.

Numbers taken on an AVX-512 machine and on an AVX2-only one differ several times
over for the same vLLM server, so a number without its CPU is not a number.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

VECTOR_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                "amx_bf16", "amx_int8", "avx_vnni")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def vector_extensions() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return [f for f in VECTOR_FLAGS if f in flags]
    except OSError:
        pass
    return []


def describe_machine() -> str:
    cores = len(os.sched_getaffinity(0))
    ext = " ".join(vector_extensions()) or "none known"
    return f"machine: {cpu_model()}, {cores} cores usable, vector extensions: {ext}"
