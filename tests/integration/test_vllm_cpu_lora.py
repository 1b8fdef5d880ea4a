"""The CPU LoRA plugin (infra/vllm/cpu_lora) in vLLM's real venv and real server.

Loaded the way vLLM loads general plugins, it replaces every operator the CPU punica
wrapper calls, and each gives vLLM's own numbers on batches that mix adapters, tokens
without an adapter and single tokens. The session's vLLM server logs that its engine
loaded it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infra.procs import ManagedProcess
from infra.vllm_server import ensure_venv
from webgym_common.config import Settings

pytestmark = pytest.mark.integration

CHECK = Path(__file__).with_name("cpu_lora_check.py")


def test_the_plugin_replaces_vllms_cpu_lora_operators_with_the_same_numbers(
        vllm_base: Settings) -> None:
    venv = ensure_venv(vllm_base)
    done = subprocess.run([str(venv / "bin" / "python"), str(CHECK)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replaced"] == sorted(result["module"]), result
    assert set(result["module"].values()) == {"webgym_cpu_lora"}
    worst = {case: diff for case, diff in result["max_abs_diff"].items() if diff > 1e-4}
    assert not worst, worst
    assert len(result["max_abs_diff"]) == 30


def test_the_served_engine_loads_the_plugin(vllm_base: Settings) -> None:
    log = ManagedProcess("vllm", vllm_base.infra.data_dir).log_file.read_text(errors="replace")
    assert "webgym_cpu_lora: grouped LoRA operators" in log, log[-3000:]
