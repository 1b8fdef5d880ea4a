"""LLaMA-Factory's venv (infra/trainer_env.py): keyed by its lock, installed once from it with
its hashes, clear errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra import pinned, trainer_env
from infra.procs import InfraError
from webgym_common.config import load_settings


def test_the_venv_is_keyed_by_its_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = load_settings(infra={"home": tmp_path})
    venv = trainer_env.venv_dir(base)
    assert venv.parent == tmp_path / "venvs" and venv.name.startswith("llamafactory-")
    assert trainer_env.pins(base) == ["torch==2.13.0", "llamafactory==0.9.5"]
    lock = tmp_path / "llamafactory.lock"
    lock.write_text(pinned.LLAMAFACTORY_LOCK.read_text() + "# changed\n")
    monkeypatch.setattr(pinned, "LLAMAFACTORY_LOCK", lock)
    assert trainer_env.venv_dir(base) != venv
    assert trainer_env.cli_path(venv) == venv / "bin" / "llamafactory-cli"


def test_pins_the_lock_does_not_hold_are_refused(tmp_path: Path) -> None:
    settings = load_settings(infra={"home": tmp_path}, trainer={"torch_version": "2.12.0"})
    with pytest.raises(InfraError, match=r"torch 2.12.0 \(the lock has 2.13.0\).*compile.sh"):
        trainer_env.prepare(settings)
    assert not trainer_env.venv_dir(settings).exists()


def test_a_complete_venv_is_not_installed_again(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(infra={"home": tmp_path})
    venv = trainer_env.venv_dir(settings)
    venv.mkdir(parents=True)
    (venv / ".complete").touch()

    def no_run(*_: Any, **__: Any) -> None:
        raise AssertionError("installed again")

    monkeypatch.setattr(subprocess, "run", no_run)
    assert trainer_env.prepare(settings) == venv


def test_a_failing_step_is_named_and_the_lock_is_installed_with_its_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings(infra={"home": tmp_path})
    venv = trainer_env.venv_dir(settings)
    venv.mkdir(parents=True)
    (venv / "left-over").touch()  # an interrupted install: redone from scratch
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        failed = str(pinned.LLAMAFACTORY_LOCK) in cmd
        return subprocess.CompletedProcess(cmd, 1 if failed else 0, "",
                                           "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES"
                                           if failed else "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(InfraError, match=r"installing torch==2.13.0 llamafactory==0.9.5 .*"
                                         r"failed: ERROR: THESE PACKAGES DO NOT MATCH"):
        trainer_env.prepare(settings)
    assert not (venv / "left-over").exists() and not (venv / ".complete").exists()
    pip, install = calls[-2:]
    assert pip[-2:] == ["-r", str(pinned.PIP_LOCK)]  # pip itself from its lock, first
    for cmd in (pip, install):
        assert "--require-hashes" in cmd and cmd[cmd.index("--only-binary") + 1] == ":all:"
    assert install[-2:] == ["-r", str(pinned.LLAMAFACTORY_LOCK)]


def test_the_base_model_is_the_local_vllm_model_unless_set(tmp_path: Path) -> None:
    settings = load_settings(infra={"home": tmp_path})
    assert trainer_env.base_model(settings) == str(tmp_path / "models" / "smollm2-135m-instruct")
    assert trainer_env.base_model(load_settings(
        trainer={"base_model": "HuggingFaceTB/SmolLM2-360M-Instruct"}),
    ) == "HuggingFaceTB/SmolLM2-360M-Instruct"


def test_a_bf16_model_is_trained_on_the_cpu_through_a_float32_view(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16", "hidden_size": 8}))
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "tokenizer.json").write_text("{}")
    view = trainer_env.float32_view(model)
    assert view != model and json.loads((view / "config.json").read_text()) == {
        "torch_dtype": "float32", "hidden_size": 8}
    assert (view / "model.safetensors").resolve() == (model / "model.safetensors").resolve()
    assert (view / "model.safetensors").read_bytes() == b"weights"  # linked, not copied
    assert json.loads((model / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert trainer_env.float32_view(model) == view  # made once
    settings = load_settings(trainer={"base_model": str(model)})
    assert trainer_env.base_model(settings) == str(view)
    gpu = load_settings(trainer={"base_model": str(model), "use_cpu": False})
    assert trainer_env.base_model(gpu) == str(model)  # a GPU trains in the model's own dtype
    hub = load_settings(trainer={"base_model": "Qwen/Qwen2.5-VL-3B-Instruct"})
    assert trainer_env.base_model(hub) == "Qwen/Qwen2.5-VL-3B-Instruct"  # not a local dir
    fp32 = tmp_path / "f"
    fp32.mkdir()
    (fp32 / "config.json").write_text(json.dumps({"torch_dtype": "float32"}))
    assert trainer_env.float32_view(fp32) == fp32
