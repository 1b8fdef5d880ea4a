"""`webgym cluster up | status | down`: the pipeline's processes as actors on a Ray cluster
(infra/cluster.py; docs/scale-out.md)."""

from __future__ import annotations

import typer
from rich.table import Table

from webgym_cli.common import console, one_line_errors
from webgym_cli.pipeline import OPTIONAL, opt_in_flag
from webgym_cli.worker import laid_over, with_options
from webgym_common.choices import PolicyKind
from webgym_common.config import get_settings
from webgym_common.processes import PROCESSES, Process

# The head docs/scale-out.md starts on one machine. A loopback address other than 127.0.0.1:
# Ray turns 127.0.0.1 and localhost into the machine's own address.
DEFAULT_ADDRESS = "127.0.0.2:6379"

app = typer.Typer(help="The pipeline's processes as actors on a Ray cluster.\n\n"
                  f"Example: webgym cluster up --address {DEFAULT_ADDRESS} --browsers 2",
                  no_args_is_help=True)

ADDRESS = typer.Option(DEFAULT_ADDRESS, help="The Ray head, HOST:PORT.")


def cluster_up(
    address: str = ADDRESS,
    browsers: int = typer.Option(1, help="Browser actors, at most the partitions of the "
                                 "episode topics (WEBGYM_KAFKA__PARTITIONS)."),
    policy: PolicyKind | None = typer.Option(None, help="Policy (default: WEBGYM_POLICY__KIND)."),
    contexts: int | None = typer.Option(None, help="Browser contexts (WEBGYM_BROWSER__CONTEXTS)."),
    timeout: float = typer.Option(180.0, help="Seconds to wait until every process is ready."),
    **asked: bool,
) -> None:
    from infra import cluster

    settings = laid_over([("policy.kind", policy), ("browser.contexts", contexts), *(
        (str(spec.opt_in), True if asked[opt_in_flag(spec).name] else None)
        for spec in OPTIONAL)])
    cap = cluster.partition_cap(settings, PROCESSES[Process.BROWSER])
    if browsers > cap:
        console.print(f"[yellow]--browsers {browsers}: {cap} browser actors, as many as the "
                      "episode topics have partitions (one more would own none)[/yellow]")
    with console.status(f"placing the pipeline's actors on the Ray cluster at {address}"):
        started, stopped = cluster.up(settings, address, browsers, timeout)
    console.print(f"started: {', '.join(started) or 'all were running'}"
                  + (f"; stopped: {', '.join(stopped)}" if stopped else "")
                  + f" (namespace {cluster.NAMESPACE}; logs in "
                  f"{settings.infra.data_dir / 'logs'} on each actor's node)")


app.command("up", help=(
    "Run the processes as actors on a Ray cluster.\n\n"
    "Ray restarts an actor whose process dies. The processes are those `webgym pipeline up` "
    "runs for the same settings, one named, detached actor each (namespace webgym, "
    "webgym-<process>-<i>) on a node that offers the process's resource (browser, "
    "inference, trainer or stream); --browsers of the browser. Actors already there are "
    "kept, those no longer wanted stopped; it waits until every process is ready.\n\n"
    "Example: webgym cluster up --policy teacher --browsers 2"))(
    with_options(one_line_errors(cluster_up), map(opt_in_flag, OPTIONAL)))


@app.command("status")
@one_line_errors
def cluster_status(address: str = ADDRESS) -> None:
    """Show each process's actor: its state, node, restarts, pid.

    Restarts are Ray's (the actor table's num_restarts); an actor restarts when its process
    exits. Exits 1 unless every process is ready.

    Example: webgym cluster status --address 127.0.0.2:6379"""
    from infra import cluster

    rows = cluster.status(address, get_settings())
    table = Table(title=f"WebGym on the Ray cluster at {address}",
                  caption=f"namespace {cluster.NAMESPACE}")
    for col in ("process", "actor", "state", "node id", "node ip", "restarts", "pid", "ready"):
        table.add_column(col)
    for r in rows:
        colour = {"ALIVE": "green", "-": "dim"}.get(r.state, "yellow")
        state = "no actor" if r.state == "-" else r.state
        table.add_row(r.process, r.actor, f"[{colour}]{state}[/{colour}]", r.node_id[:12],
                      r.node_ip, str(r.restarts), str(r.pid or "-"), "yes" if r.ready else "no")
    console.print(table)
    raise typer.Exit(0 if rows and all(r.ready for r in rows) else 1)


@app.command("down")
@one_line_errors
def cluster_down(address: str = ADDRESS) -> None:
    """Stop every actor's process, then the actor (no restart).

    Example: webgym cluster down --address 127.0.0.2:6379"""
    from infra import cluster

    console.print(f"stopped: {', '.join(cluster.down(address)) or 'nothing'}")
