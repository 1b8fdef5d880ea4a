"""`webgym worker ...`: options are enums laid over the settings, never written into them."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from webgym_cli.main import app
from webgym_common.choices import JudgeKind, PolicyKind
from webgym_common.config import Settings, get_settings
from webgym_common.processes import PROCESSES, Process


@pytest.mark.parametrize(("args", "option"), [
    (["worker", "policy", "--kind", "bogus"], "--kind"),
    (["worker", "evaluator", "--judge", "bogus"], "--judge"),
    (["pipeline", "up", "--policy", "bogus"], "--policy"),
    (["run", "--policy", "bogus"], "--policy"),
    (["rollout", "--split", "bogus"], "--split"),
    (["rollout", "--strategy", "bogus"], "--strategy"),
])
def test_a_wrong_choice_is_a_usage_error_naming_the_allowed_values(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]], args: list[str], option: str,
) -> None:
    calls = fake_module("processors.policy.app", "run_policy_worker")
    calls.update(fake_module("processors.evaluator.app", "run_evaluator_worker"))
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if "Invalid value" in line]
    assert len(errors) == 1 and option in errors[0] and "'bogus' is not one of" in errors[0]
    assert "Traceback" not in result.output
    assert not calls  # nothing ran


def test_policy_kind_is_an_override_and_keeps_the_other_policy_settings(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEBGYM_POLICY__KIND", "vllm")
    monkeypatch.setenv("WEBGYM_POLICY__BASE_URL", "http://gpu-box:8000/v1")
    calls = fake_module("processors.policy.app", "run_policy_worker")
    cached = get_settings()
    result = runner.invoke(app, ["worker", "policy", "--kind", "teacher"])
    assert result.exit_code == 0, result.output
    (settings,) = calls["run_policy_worker"]
    assert settings.policy.kind == PolicyKind.TEACHER
    assert settings.policy.base_url == "http://gpu-box:8000/v1"
    assert "policy processor: teacher at http://gpu-box:8000/v1" in result.output
    assert cached.policy.kind == PolicyKind.VLLM  # the cached settings are untouched


def test_without_options_the_worker_runs_the_cached_settings(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]],
) -> None:
    calls = fake_module("processors.evaluator.app", "run_evaluator_worker")
    result = runner.invoke(app, ["worker", "evaluator"])
    assert result.exit_code == 0, result.output
    assert calls["run_evaluator_worker"] == (get_settings(),)


def test_judge_override_reaches_the_evaluator(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]],
) -> None:
    calls = fake_module("processors.evaluator.app", "run_evaluator_worker")
    result = runner.invoke(app, ["worker", "evaluator", "--judge", "llm"])
    assert result.exit_code == 0, result.output
    (settings,) = calls["run_evaluator_worker"]
    assert settings.evaluator.judge == JudgeKind.LLM
    assert "evaluator: llm judge, exactly_once" in result.output


def test_browser_worker_prints_its_group_from_the_registry(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEBGYM_KAFKA__TOPIC_PREFIX", "t42")
    calls = fake_module("producers.browser.worker", "run_browser_worker")
    monkeypatch.setattr("asyncio.run", lambda coro: coro)  # the stand-in is not a coroutine
    result = runner.invoke(app, ["worker", "browser", "--contexts", "3"])
    assert result.exit_code == 0, result.output
    assert "browser worker: 3 contexts, group t42-browsers" in result.output
    (settings,) = calls["run_browser_worker"]
    assert settings.browser.contexts == 3 and settings.kafka.topic_prefix == "t42"


def test_a_bad_setting_is_one_error_line(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEBGYM_POLICY__MAX_INFLIGHT", "many")
    fake_module("processors.policy.app", "run_policy_worker")
    result = runner.invoke(app, ["worker", "policy", "--kind", "teacher"])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert result.output.startswith("error: setting WEBGYM_POLICY__MAX_INFLIGHT = 'many'")


@pytest.mark.parametrize("command", [["worker", "envserver"], ["envserver"]])
def test_the_env_server_runs_the_registrys_entry_with_its_options(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]], command: list[str],
) -> None:
    calls = fake_module("producers.envserver.app", "run_envserver")
    result = runner.invoke(app, [*command, "--host", "0.0.0.0", "--port", "18999",
                                 "--idle-timeout", "30"])
    assert result.exit_code == 0, result.output
    (settings,) = calls["run_envserver"]
    cfg = settings.envserver
    assert (cfg.host, cfg.port, cfg.idle_timeout_s) == ("0.0.0.0", 18999, 30.0)
    assert "env server: http://0.0.0.0:18999/" in result.output
    assert "idle envs closed after 30 s" in result.output


@pytest.mark.parametrize("process", list(Process))
def test_each_rows_command_runs_its_entry_after_its_banner(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch, process: Process,
) -> None:
    spec = PROCESSES[process]
    calls = fake_module(spec.module, spec.function)
    if spec.prepare:  # stands in for what the trainer's makes ready: a venv, the base model
        module, function = spec.prepare.split(":")
        prepared = types.ModuleType(module)
        setattr(prepared, function, lambda settings: {"venv": Path("/venv"), "base_model": "m"})
        monkeypatch.setitem(sys.modules, module, prepared)
    result = runner.invoke(app, ["worker", process.value])
    assert result.exit_code == 0, result.output
    assert calls[spec.function] == (get_settings(),)
    # the banner's fixed words before its first field
    assert spec.banner.split("{")[0].format(name=process.value) in result.output


def test_the_trainer_runs_with_what_its_row_prepares(
    runner: CliRunner, fake_module: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def run_trainer(settings: Settings, **keywords: Any) -> None:
        seen.update(keywords)

    entry = types.ModuleType("consumers.trainer.app")
    entry.run_trainer = run_trainer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "consumers.trainer.app", entry)
    prepared = types.ModuleType("infra.trainer_env")
    prepared.entry_keywords = lambda settings: {  # type: ignore[attr-defined]
        "venv": Path("/venv"), "base_model": "/models/smol"}
    monkeypatch.setitem(sys.modules, "infra.trainer_env", prepared)
    result = runner.invoke(app, ["worker", "trainer"])
    assert result.exit_code == 0, result.output
    assert seen == {"venv": Path("/venv"), "base_model": "/models/smol"}
    assert " of /models/smol, max staleness " in result.output


def test_an_entry_keyword_option_reaches_the_entry_only_when_given(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    seen: list[dict[str, Any]] = []
    entry = types.ModuleType("processors.metrics")
    entry.run_metrics_worker = lambda settings, **kw: seen.append(kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "processors.metrics", entry)
    assert runner.invoke(app, ["worker", "metrics"]).exit_code == 0
    assert runner.invoke(app, ["worker", "metrics", "--csv", str(tmp_path / "m.csv")]
                         ).exit_code == 0
    assert seen == [{}, {"csv_path": tmp_path / "m.csv"}]
