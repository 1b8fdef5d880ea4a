"""`webgym worker browser | policy | evaluator | history | metrics | replay | trainer |
model-loader`: one process each."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.config import JudgeKind, PolicyKind, get_settings

app = typer.Typer(help="Pipeline processes (run several to scale).", no_args_is_help=True)


@app.command("browser")
@one_line_errors
def worker_browser(
    contexts: int | None = typer.Option(
        None, help="Episodes at once (default: WEBGYM_BROWSER__CONTEXTS)."
    ),
) -> None:
    """A browser worker: one Chromium, N contexts, joins the browser consumer group."""
    from producers.browser.worker import run_browser_worker
    from webgym_common.topics import Group, group_id

    settings = settings_with(browser={"contexts": contexts})
    console.print(f"browser worker: {settings.browser.contexts} contexts, "
                  f"group {group_id(settings.kafka, Group.BROWSERS)}, "
                  f"broker {settings.kafka.bootstrap_servers}")
    asyncio.run(run_browser_worker(settings))


@app.command("policy")
@one_line_errors
def worker_policy(
    kind: PolicyKind | None = typer.Option(None, help="Policy (default: WEBGYM_POLICY__KIND)."),
) -> None:
    """The policy processor (faust): decides an action for every observation."""
    from processors.policy.app import run_policy_worker

    settings = settings_with(policy={"kind": kind})
    console.print(f"policy processor: {settings.policy.kind} at {settings.policy.base_url}, "
                  f"{settings.policy.max_inflight} in flight")
    run_policy_worker(settings)


@app.command("evaluator")
@one_line_errors
def worker_evaluator(
    judge: JudgeKind | None = typer.Option(None, help="Judge (default: WEBGYM_EVALUATOR__JUDGE)."),
) -> None:
    """The evaluator (faust): scores every completed episode exactly once."""
    from processors.evaluator.app import run_evaluator_worker

    settings = settings_with(evaluator={"judge": judge})
    cfg = settings.evaluator
    where = f" at {cfg.base_url or settings.policy.base_url}" if cfg.judge == "llm" else ""
    console.print(f"evaluator: {cfg.judge} judge{where}, {cfg.processing_guarantee}, "
                  f"{cfg.max_inflight} episodes in flight")
    run_evaluator_worker(settings)


@app.command("history")
@one_line_errors
def worker_history() -> None:
    """The task-history fold: scored episodes -> webgym.task-history (run one)."""
    from processors.history import run_history_worker
    from webgym_common.topics import Group, group_id

    settings = get_settings()
    console.print(f"history worker: group {group_id(settings.kafka, Group.HISTORY)}, "
                  f"broker {settings.kafka.bootstrap_servers}")
    asyncio.run(run_history_worker(settings))


@app.command("metrics")
@one_line_errors
def worker_metrics(
    csv_path: Path | None = typer.Option(
        None, "--csv", help="CSV to rewrite; the PNG goes beside it "
        "(default: <infra.data_dir>/metrics/metrics.csv)."),
) -> None:
    """Per-iteration metrics: on IterationClosed -> webgym.metrics, a CSV and a PNG plot."""
    from processors.metrics import default_csv_path, run_metrics_worker

    settings = get_settings()
    csv_path = csv_path or default_csv_path(settings)
    console.print(f"metrics worker: {csv_path}, broker {settings.kafka.bootstrap_servers}")
    asyncio.run(run_metrics_worker(settings, csv_path))


@app.command("replay")
@one_line_errors
def worker_replay() -> None:
    """The replay processor: scored episodes -> training samples on webgym.replay."""
    from processors.replay import run_replay_worker
    from webgym_common.topics import Group, group_id

    settings = get_settings()
    r = settings.replay
    console.print(f"replay processor: group {group_id(settings.kafka, Group.REPLAY)}, "
                  f"success_only={r.success_only}, same-screenshot filter "
                  f"{r.filter_same_screenshot}, failures kept {r.include_failures}")
    asyncio.run(run_replay_worker(settings))


@app.command("trainer")
@one_line_errors
def worker_trainer() -> None:
    """The trainer: replay samples -> LLaMA-Factory runs -> one ModelVersion per run."""
    from consumers.trainer.app import run_trainer
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
    asyncio.run(run_trainer(settings, venv=venv, base_model=base))


@app.command("model-loader")
@one_line_errors
def worker_model_loader() -> None:
    """The model loader: each ModelVersion -> loaded into vLLM under a versioned name."""
    from consumers.model_loader import run_model_loader

    settings = get_settings()
    console.print(f"model loader: vLLM at {settings.policy.base_url}, "
                  f"broker {settings.kafka.bootstrap_servers}")
    asyncio.run(run_model_loader(settings))
