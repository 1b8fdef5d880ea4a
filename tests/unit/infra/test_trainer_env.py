"""LLaMA-Factory's venv (infra/trainer_env.py): keyed by its pins, installed once, clear errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra import trainer_env
from infra.procs import InfraError
from webgym_common.config import load_settings


def test_the_venv_is_keyed_by_both_pins(tmp_path: Path) -> None:
    base = load_settings(infra={"home": tmp_path})
    venv = trainer_env.venv_dir(base)
    assert venv.parent == tmp_path / "venvs" and venv.name.startswith("llamafactory-")
    assert trainer_env.pins(base) == ["torch==2.13.0", "llamafactory==0.9.5"]
    assert trainer_env.venv_dir(load_settings(
        infra={"home": tmp_path}, trainer={"torch_version": "2.12.0"})) != venv
    assert trainer_env.venv_dir(load_settings(
        infra={"home": tmp_path}, trainer={"llamafactory_version": "0.9.4"})) != venv
    assert trainer_env.cli_path(venv) == venv / "bin" / "llamafactory-cli"


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


def test_a_failing_step_is_named_and_torch_is_pinned_on_the_same_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings(infra={"home": tmp_path})
    venv = trainer_env.venv_dir(settings)
    venv.mkdir(parents=True)
    (venv / "left-over").touch()  # an interrupted install: redone from scratch
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        failed = "llamafactory==0.9.5" in cmd
        return subprocess.CompletedProcess(cmd, 1 if failed else 0, "",
                                           "ERROR: No matching distribution" if failed else "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(InfraError, match=r"installing torch==2.13.0 llamafactory==0.9.5 "
                                         r"failed: ERROR: No matching distribution"):
        trainer_env.prepare(settings)
    assert not (venv / "left-over").exists() and not (venv / ".complete").exists()
    install = calls[-1]
    assert install[-2:] == ["torch==2.13.0", "llamafactory==0.9.5"]  # one resolver run


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
