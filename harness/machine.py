"""What machine a benchmark ran on: every bench prints this line first, and its markdown
tables carry it. And the CPU time the processes of a pipeline run used, per kind.

Numbers taken on an AVX-512 machine and on an AVX2-only one differ several times
over for the same vLLM server, so a number without its CPU is not a number.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

from webgym_common.machine import cpu_flags

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
    flags = cpu_flags()
    return [f for f in VECTOR_FLAGS if f in flags]


def describe_machine() -> str:
    cores = len(os.sched_getaffinity(0))
    ext = " ".join(vector_extensions()) or "none known"
    return f"machine: {cpu_model()}, {cores} cores usable, vector extensions: {ext}"


# What a process is, from its command line (first match wins): the parts of a pipeline run.
PROCESS_KINDS = (
    ("playwright driver", re.compile(r"playwright/driver")),  # Node: relays the worker's calls
    ("chromium", re.compile(r"chrom")),
    ("kafka", re.compile(r"java .*kafka|kafka\.Kafka")),
    ("minio", re.compile(r"minio server")),
    ("vllm", re.compile(r"vllm")),
    ("web sites", re.compile(r"-m environments\b")),  # the sandbox's sites: the environment
    ("browser worker", re.compile(r"worker browser")),
    ("policy", re.compile(r"worker policy")),
    ("evaluator", re.compile(r"worker evaluator")),
    ("other workers", re.compile(r"webgym_cli.* worker ")),
)
# The pipeline's own processes: what a step costs besides the environment (Chromium and the
# sites), the model server and the rest of the machine.
PIPELINE_KINDS = ("browser worker", "playwright driver", "kafka", "minio", "policy", "evaluator",
                  "other workers", "controller")


def kind_of(cmdline: str) -> str:
    """The PROCESS_KINDS kind of a command line, else "other"."""
    return next((k for k, pattern in PROCESS_KINDS if pattern.search(cmdline)), "other")


def cpu_seconds(own: str = "other") -> dict[str, float]:
    """CPU seconds used so far (user + system, reaped children included) by each kind of
    process of PROCESS_KINDS, this process counted as `own`; the rest is "other". Subtract
    two readings for a run's share."""
    tick = os.sysconf("SC_CLK_TCK")
    me = str(os.getpid())
    out: dict[str, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone while we looked
            continue
        # stat fields 14-17 (utime stime cutime cstime) are 11-14 after the ")".
        used = sum(int(f) for f in fields[11:15]) / tick
        kind = own if proc.name == me else kind_of(cmdline)
        out[kind] = out.get(kind, 0.0) + used
    return out


def pipeline_overhead(cpu_s: dict[str, float]) -> float:
    """The CPU seconds of the pipeline's own processes (PIPELINE_KINDS) in a reading."""
    return sum(cpu_s.get(k, 0.0) for k in PIPELINE_KINDS)


def cpu_used_since(before: dict[str, float], own: str = "other") -> dict[str, float]:
    after = cpu_seconds(own)
    return {k: max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in after}
