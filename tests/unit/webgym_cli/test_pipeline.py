"""`webgym pipeline up | status` and `webgym rollout`: overrides and the status table."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from infra import pipeline
from webgym_cli.main import app
from webgym_common.choices import PolicyKind, SamplingStrategy
from webgym_common.config import Settings, get_settings, load_settings


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WEBGYM_INFRA__DATA_DIR", str(tmp_path))
    return tmp_path


def test_pipeline_up_passes_its_options_as_overrides(
    runner: CliRunner, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Settings] = []

    async def up(settings: Settings) -> list[str]:
        seen.append(settings)
        return ["browser", "policy"]

    monkeypatch.setenv("WEBGYM_BROWSER__SETTLE_S", "0.7")
    monkeypatch.setattr(pipeline, "up", up)
    result = runner.invoke(app, ["pipeline", "up", "--policy", "teacher", "--contexts", "2"])
    assert result.exit_code == 0, result.output
    assert f"started: browser, policy (logs in {data_dir / 'logs'})" in result.output
    (settings,) = seen
    assert settings.policy.kind == PolicyKind.TEACHER
    assert settings.browser.contexts == 2 and settings.browser.settle_s == 0.7
    assert not settings.envserver.supervised  # optional: not asked for
    monkeypatch.setenv("WEBGYM_ENVSERVER__PORT", "18999")
    result = runner.invoke(app, ["pipeline", "up", "--with-envserver"])
    assert result.exit_code == 0, result.output
    asked = seen[-1]
    assert asked.envserver.supervised and asked.envserver.port == 18999
    assert "envserver" in pipeline.selected(asked)


def test_pipeline_up_help_offers_each_optional_process(runner: CliRunner) -> None:
    result = runner.invoke(app, ["pipeline", "up", "--help"])
    assert result.exit_code == 0, result.output
    assert pipeline.OPTIONAL
    for name in pipeline.OPTIONAL:  # the option the status table names
        assert f"--with-{name}" in result.output
    assert "WEBGYM_ENVSERVER__SUPERVISED" in result.output


def test_pipeline_status_shows_each_process(runner: CliRunner, data_dir: Path) -> None:
    result = runner.invoke(app, ["pipeline", "status"])
    assert result.exit_code == 1  # nothing runs
    for name in pipeline.selected(get_settings()):
        line = next(ln for ln in result.output.splitlines() if f" {name} " in ln)
        assert "stopped" in line
    # The trainer and the model loader run only when the loop trains: listed, not started.
    for name in pipeline.TRAINING:
        line = next(ln for ln in result.output.splitlines() if f" {name} " in ln)
        assert "not started (training off)" in line
    assert set(pipeline.selected(load_settings(rollout={"train": True}))) >= pipeline.TRAINING
    # The env server runs only when asked for: listed, not started, with the option to ask.
    line = next(ln for ln in result.output.splitlines() if " envserver " in ln)
    assert "not started (optional: up --with-envserver)" in line
    # This test's own process stands in for a running, ready history worker.
    (data_dir / "run").mkdir()
    (data_dir / "run" / "pipeline-history.pid").write_text(str(os.getpid()))
    (data_dir / "run" / "pipeline-history.ready").write_text("ready")
    (data_dir / "run" / "pipeline-metrics.pid").write_text(str(os.getpid()))
    result = runner.invoke(app, ["pipeline", "status"])
    lines = result.output.splitlines()
    history = next(ln for ln in lines if " history " in ln)
    metrics = next(ln for ln in lines if " metrics " in ln)
    assert str(os.getpid()) in history and "ready" in history
    assert str(os.getpid()) in metrics and "starting" in metrics
    assert result.exit_code == 1  # not all are ready


def test_rollout_strategy_is_an_override(
    runner: CliRunner, fake_module: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = fake_module("producers.controller.run", "rollout")
    monkeypatch.setattr("asyncio.run", lambda coro: coro)  # the stand-in is not a coroutine
    result = runner.invoke(app, ["rollout", "--split", "test", "--strategy", "ratio"])
    assert result.exit_code == 0, result.output
    settings, split, per_iteration, iterations, _ = calls["rollout"]
    assert settings.rollout.strategy == SamplingStrategy.RATIO
    assert (split, per_iteration, iterations) == ("test", 32, 1)


def test_pipeline_status_shows_restarts_and_the_last_exit(
    runner: CliRunner, data_dir: Path,
) -> None:
    (data_dir / "run").mkdir()
    (data_dir / "run" / "pipeline-history.pid").write_text(str(os.getpid()))
    (data_dir / "run" / "pipeline-history.ready").write_text("ready")
    (data_dir / "run" / "pipeline-supervisor.json").write_text(json.dumps({
        "history": {"pid": os.getpid(), "restarts": 2, "last_exit": -9,
                    "last_restart_at": time.time() - 5},
        "metrics": {"pid": None, "restarts": 1, "last_exit": 1, "last_restart_at": None}}))
    result = runner.invoke(app, ["pipeline", "status"])
    lines = result.output.splitlines()
    history = next(ln for ln in lines if " history " in ln)
    metrics = next(ln for ln in lines if " metrics " in ln)
    assert " 2 " in history and "SIGKILL, restarted" in history and "ready" in history
    assert " 1 " in metrics and "exit 1" in metrics and "stopped" in metrics
    assert "supervisor: not running" in result.output
    # With a supervisor, a process that is not running is being restarted.
    (data_dir / "run" / "pipeline-supervisor.pid").write_text(str(os.getpid()))
    result = runner.invoke(app, ["pipeline", "status"])
    assert "restarting" in next(ln for ln in result.output.splitlines() if " metrics " in ln)
    assert f"supervisor: pid {os.getpid()}" in result.output


def test_pipeline_status_counts_the_env_server_once_it_is_asked_for(
    runner: CliRunner, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEBGYM_ENVSERVER__SUPERVISED", "true")
    result = runner.invoke(app, ["pipeline", "status"])
    assert result.exit_code == 1
    line = next(ln for ln in result.output.splitlines() if " envserver " in ln)
    assert "stopped" in line and "not started" not in line
