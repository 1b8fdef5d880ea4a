"""The main job (`webgym run`, `webgym curve`): the stack, topics and tasks, the pipeline
(and the monitor), the demonstration bank, the loop, the bank-only control, the export.

Delivery: every step reads or appends to the log and resumes what it holds: a job run again
on the same data dir loads the same tasks (the catalog is compacted by task id), builds no
second bank (the bank skips what the log has), and continues the loop from the next
iteration. A curve (`from_scratch`) must start at v0, so it refuses a log that already holds
an iteration or a trained version.

The stack, the processes and the export belong to infra and consumers, which the controller
does not import (the layer contract): the CLI hands them in as `Services`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.panel import Panel

from producers.catalog import run_tasks_load
from producers.controller.demonstrations import build_bank
from producers.controller.rollout import next_iteration, served_now, wait_for_version
from producers.controller.run import evaluate_once, evaluated_versions, loop_report, rollout
from webgym_common.choices import PolicyKind, Split, Suite
from webgym_common.config import Settings
from webgym_common.events import ModelVersion, RolloutMetrics
from webgym_common.metrics.storage import default_csv_path
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer
from webgym_common.versions import CONTROL_EVAL_OFFSET, control_model


class LogNotEmpty(Exception):
    """A learning curve asked for on a log that already holds iterations or versions."""


@dataclass(frozen=True)
class Services:
    """What the job starts and calls outside the controller's package."""

    prepare_trainer: Callable[[Settings], object]  # LLaMA-Factory's venv (cached)
    stack_up: Callable[[Settings, Callable[[str], None]], Awaitable[None]]
    pipeline_up: Callable[[Settings], Awaitable[object]]
    start_monitor: Callable[[Settings], Awaitable[str]]  # its URL; raises if it cannot
    train_control: Callable[[Settings], Awaitable[ModelVersion]]
    # An iteration's scored episodes into a file: how many, and where.
    export_iteration: Callable[[Settings, int], Awaitable[tuple[int, Path]]]
    running: Callable[[Settings], list[str]]  # the pipeline processes up now


@dataclass(frozen=True)
class MainJob:
    tasks: list[Path]  # task files to load
    bank: int  # train tasks in the demonstration bank (0: none)
    bank_suites: list[Suite]
    tasks_per_iteration: int
    iterations: int
    report_dir: Path | None  # the held-out report (None: under the data dir)
    monitor: bool = False
    from_scratch: bool = False  # a learning curve: refuse a log that holds iterations
    control: bool = False  # after the loop, the bank-only control and the report again


async def run_main_job(settings: Settings, job: MainJob, services: Services,
                       console: Console) -> None:
    """The whole job in order, with progress on the console, ending with its closing panel."""
    train = settings.rollout.train
    if train:
        with console.status("preparing LLaMA-Factory's venv (cached; first time: minutes)"):
            services.prepare_trainer(settings)
    with console.status("starting the embedded stack") as status:
        await services.stack_up(settings, status.update)
        status.update("creating topics")
        await create_topics(settings)
        if job.from_scratch:
            await require_an_empty_log(settings)
    for path in job.tasks:
        await run_tasks_load(settings, path, console)
    with console.status("starting the pipeline processes"):
        await services.pipeline_up(settings)
    url = None
    if job.monitor:
        with console.status("starting the monitor"):
            try:
                url = await services.start_monitor(settings)
                console.print(f"monitor: {url} (watch the iterations live)")
            except Exception as err:  # noqa: BLE001 - the run does not need it
                console.print(f"[yellow]monitor not started:[/yellow] {err}")
    if job.bank and train:
        await _build_bank(settings, job.bank, job.bank_suites, console)
    metrics = await rollout(settings, "train", job.tasks_per_iteration, job.iterations,
                            console, job.report_dir)
    if job.control and train and metrics:
        await _control(settings, services, job.report_dir, metrics, console)
    exports = []
    for m in metrics:
        episodes, path = await services.export_iteration(settings, m.iteration)
        exports.append(path)
        console.print(f"exported {episodes} episodes of iteration {m.iteration} to {path}")
    lines = closing_lines(settings, job.report_dir, exports, url, services.running(settings))
    console.print(Panel("\n".join(lines), title="what ran, where it is, how to stop it",
                        expand=False))


def closing_lines(settings: Settings, report_dir: Path | None, exports: list[Path],
                  monitor_url: str | None, running: list[str]) -> list[str]:
    """The end of the main job: where its results are and what it leaves running."""
    data = Path(settings.infra.data_dir)
    lines = [f"held-out report: {report_dir or data / 'evaluations'} (curve.csv, per_task.csv, "
             "per_group.csv, curve.png)",
             f"metrics: {default_csv_path(settings)} (and its PNG)"]
    if exports:
        lines.append(f"trajectories: {exports[0].parent}/ ({len(exports)} iteration files)")
    if monitor_url:
        lines.append(f"monitor: {monitor_url} (still serving)")
    stack = "Kafka, MinIO, the sandbox web" + (", vLLM" if settings.policy.kind ==
                                               PolicyKind.VLLM else "")
    lines += [f"still running: {stack}; pipeline: {', '.join(running) or 'nothing'}"
              + (", monitor" if monitor_url else ""),
              "stop everything: .venv/bin/webgym down"]
    return lines


async def require_an_empty_log(settings: Settings) -> None:
    async with EventProducer(settings, client_id="controller") as producer:
        iteration = await next_iteration(settings, producer, Split.TRAIN.value)
        served = await served_now(settings, producer)
    if iteration or served:
        raise LogNotEmpty(
            f"the log in {settings.infra.data_dir} already holds {iteration} iterations and "
            f"serves v{served}: a learning curve starts from v0. Run it on a fresh data dir "
            "(`webgym down`, then WEBGYM_INFRA__DATA_DIR=/some/new/dir webgym curve ...)")


async def _build_bank(settings: Settings, limit: int, suites: list[Suite],
                      console: Console) -> None:
    async with EventProducer(settings, client_id="demonstration-bank") as producer:
        result = await build_bank(settings, producer, console, suites=suites, limit=limit)
    console.print(f"demonstration bank {result.prompt_version}: {result.solved}/"
                  f"{result.episodes} reference episodes solved, {result.steps} steps",
                  highlight=False)


async def _control(settings: Settings, services: Services, report_dir: Path | None,
                   metrics: list[RolloutMetrics], console: Console) -> None:
    """The bank-only control trained, served, evaluated like a version, then the report."""
    with console.status("the bank-only control: a LoRA run from v1 on the bank alone "
                        "(progress on webgym.training and the monitor)"):
        version = await services.train_control(settings)
    line = settings.model_copy(update={"trainer": settings.trainer.model_copy(
        update={"model_name": control_model(settings.trainer.model_name)})})
    control = CONTROL_EVAL_OFFSET + version.version
    async with EventProducer(settings, client_id="controller") as producer:
        with console.status("waiting for vLLM to serve the control") as status:
            await wait_for_version(line, producer, version.version, status.update)
        await evaluate_once(settings, producer, control, console)
        versions = [*evaluated_versions(settings, await served_now(settings, producer)), control]
        await loop_report(settings, producer, versions, {m.iteration: m for m in metrics},
                          report_dir, console)
