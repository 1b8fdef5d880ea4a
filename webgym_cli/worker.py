"""`webgym worker <process>`: one pipeline process in the foreground, one command for each
process of the registry (webgym_common.processes), which names what each runs."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from pathlib import Path
from typing import Any

import typer

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.choices import JudgeKind, PolicyKind
from webgym_common.config import Settings, get_settings
from webgym_common.processes import PROCESSES, Process

app = typer.Typer(help="Pipeline processes (run several to scale).", no_args_is_help=True)


def run_process(process: Process, settings: Settings, **kwargs: Any) -> None:
    """Run a registry process's entry point in the foreground until it stops."""
    spec = PROCESSES[process]
    entry = getattr(importlib.import_module(spec.module), spec.function)
    result = entry(settings, **kwargs)
    if inspect.iscoroutine(result):  # the bus-based processes; faust workers run their own
        asyncio.run(result)


def summary(process: Process) -> str:
    """The command's help: the registry's line, and an example."""
    line = PROCESSES[process].summary
    return f"{line[0].upper()}{line[1:]}.\n\nExample: webgym worker {process.value}"


@app.command(Process.BROWSER.value, help=summary(Process.BROWSER))
@one_line_errors
def worker_browser(
    contexts: int | None = typer.Option(
        None, help="Episodes at once (default: WEBGYM_BROWSER__CONTEXTS)."
    ),
) -> None:
    from webgym_common.topics import Group, group_id

    settings = settings_with(browser={"contexts": contexts})
    console.print(f"browser worker: {settings.browser.contexts} contexts, "
                  f"group {group_id(settings.kafka, Group.BROWSERS)}, "
                  f"broker {settings.kafka.bootstrap_servers}")
    run_process(Process.BROWSER, settings)


@app.command(Process.POLICY.value, help=summary(Process.POLICY))
@one_line_errors
def worker_policy(
    kind: PolicyKind | None = typer.Option(None, help="Policy (default: WEBGYM_POLICY__KIND)."),
) -> None:
    settings = settings_with(policy={"kind": kind})
    console.print(f"policy processor: {settings.policy.kind} at {settings.policy.base_url}, "
                  f"{settings.policy.max_inflight} in flight")
    run_process(Process.POLICY, settings)


@app.command(Process.EVALUATOR.value, help=summary(Process.EVALUATOR))
@one_line_errors
def worker_evaluator(
    judge: JudgeKind | None = typer.Option(None, help="Judge (default: WEBGYM_EVALUATOR__JUDGE)."),
) -> None:
    settings = settings_with(evaluator={"judge": judge})
    cfg = settings.evaluator
    where = f" at {cfg.base_url or settings.policy.base_url}" if cfg.judge == "llm" else ""
    console.print(f"evaluator: {cfg.judge} judge{where}, {cfg.processing_guarantee}, "
                  f"{cfg.max_inflight} episodes in flight")
    run_process(Process.EVALUATOR, settings)


@app.command(Process.HISTORY.value, help=summary(Process.HISTORY))
@one_line_errors
def worker_history() -> None:
    from webgym_common.topics import Group, group_id

    settings = get_settings()
    console.print(f"history worker: group {group_id(settings.kafka, Group.HISTORY)}, "
                  f"broker {settings.kafka.bootstrap_servers}")
    run_process(Process.HISTORY, settings)


@app.command(Process.METRICS.value, help=summary(Process.METRICS))
@one_line_errors
def worker_metrics(
    csv_path: Path | None = typer.Option(
        None, "--csv", help="CSV to rewrite; the PNG goes beside it "
        "(default: <infra.data_dir>/metrics/metrics.csv)."),
) -> None:
    from processors.metrics import default_csv_path

    settings = get_settings()
    csv_path = csv_path or default_csv_path(settings)
    console.print(f"metrics worker: {csv_path}, broker {settings.kafka.bootstrap_servers}")
    run_process(Process.METRICS, settings, csv_path=csv_path)


@app.command(Process.REPLAY.value, help=summary(Process.REPLAY))
@one_line_errors
def worker_replay() -> None:
    from webgym_common.topics import Group, group_id

    settings = get_settings()
    r = settings.replay
    console.print(f"replay processor: group {group_id(settings.kafka, Group.REPLAY)}, "
                  f"success_only={r.success_only}, same-screenshot filter "
                  f"{r.filter_same_screenshot}, failures kept {r.include_failures}")
    run_process(Process.REPLAY, settings)


@app.command(Process.TRAINER.value, help=summary(Process.TRAINER))
@one_line_errors
def worker_trainer() -> None:
    from infra import trainer_env, vllm_server

    settings = get_settings()
    t = settings.trainer
    with console.status("LLaMA-Factory's venv (cached after the first time)"):
        venv = trainer_env.prepare(settings)
    if not t.base_model:  # the default base: the model the local vLLM serves
        vllm_server.ensure_model(settings)
    base = trainer_env.base_model(settings)
    console.print(f"trainer: {t.mode} ({t.trigger}) of {base}, max staleness "
                  f"{t.max_staleness}, broker {settings.kafka.bootstrap_servers}")
    run_process(Process.TRAINER, settings, venv=venv, base_model=base)


@app.command(Process.MODEL_LOADER.value, help=summary(Process.MODEL_LOADER))
@one_line_errors
def worker_model_loader() -> None:
    settings = get_settings()
    console.print(f"model loader: vLLM at {settings.policy.base_url}, "
                  f"broker {settings.kafka.bootstrap_servers}")
    run_process(Process.MODEL_LOADER, settings)


# Shared with `webgym envserver` (webgym_cli/envserver.py), which runs the same command.
ENVSERVER_HOST = typer.Option(
    None, help="Address to bind (default: WEBGYM_ENVSERVER__HOST, 127.0.0.1).")
ENVSERVER_PORT = typer.Option(None, help="Port (default: WEBGYM_ENVSERVER__PORT, 18790).")
ENVSERVER_IDLE_TIMEOUT = typer.Option(
    None, help="Close envs no request touched for this many seconds "
    "(default: WEBGYM_ENVSERVER__IDLE_TIMEOUT_S, 900).")


@app.command(Process.ENVSERVER.value, help=summary(Process.ENVSERVER))
@one_line_errors
def worker_envserver(
    host: str | None = ENVSERVER_HOST,
    port: int | None = ENVSERVER_PORT,
    idle_timeout: float | None = ENVSERVER_IDLE_TIMEOUT,
) -> None:
    settings = settings_with(envserver={"host": host, "port": port,
                                        "idle_timeout_s": idle_timeout})
    cfg = settings.envserver
    console.print(f"env server: http://{cfg.host}:{cfg.port}/ (broker "
                  f"{settings.kafka.bootstrap_servers}, prefix {settings.kafka.topic_prefix}; "
                  f"idle envs closed after {cfg.idle_timeout_s:g} s)")
    run_process(Process.ENVSERVER, settings)
