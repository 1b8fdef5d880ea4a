"""`webgym reprocess rescore | refilter | export`: a range of the log, read again.

A range is `--from/--to` (an offset in every partition, or an ISO timestamp; --to
exclusive) and `--iterations` ("0,2-4"). Rescore and refilter write a new topic
(`--to-topic`, created like the topic it derives from; never the pipeline's own) exactly once
per episode / sample, and resume when run again after a kill; export writes files. The work
is in processors.reprocess.rescore, processors.reprocess.refilter and consumers.webgym_layout.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.choices import JudgeKind

app = typer.Typer(help="Re-read a range of the log: re-score, re-filter, export.\n\n"
                  "Example: webgym reprocess export --iterations 0-2", no_args_is_help=True)

FROM = typer.Option(None, "--from", help="Start: an offset (every partition) or an ISO time.")
TO = typer.Option(None, "--to", help="End (exclusive): an offset or an ISO time.")
ITERATIONS = typer.Option(None, "--iterations", help="Only these iterations: 3, 0,2 or 1-4.")


def log_range(start: str | None, end: str | None, iterations: str | None) -> Any:
    from webgym_common.logrange.bounds import LogRange, RangeError, parse_bound, parse_iterations

    try:
        return LogRange(parse_bound(start), parse_bound(end), parse_iterations(iterations))
    except RangeError as err:
        raise typer.BadParameter(str(err)) from None


def refused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A target that must not be written is one line and exit 1, like any known failure."""
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from processors.reprocess.derived import DerivedTopicError

        try:
            return fn(*args, **kwargs)
        except DerivedTopicError as err:
            console.print(f"[red]error:[/red] {err}", highlight=False)
            raise typer.Exit(1) from None
    return wrapper


@contextmanager
def live_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar per phase (reading, scoring, writing), driven by on_progress calls."""
    columns = (TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bars: dict[str, Any] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in bars:
                bars[phase] = progress.add_task(phase, total=max(total, 1))
            progress.update(bars[phase], completed=done, total=max(total, done, 1))

        yield update


def rates(what: str, items: int, steps: int, seconds: float) -> str:
    s = max(seconds, 1e-9)
    return (f"{what}: {items} in {seconds:.1f} s — {items / s:.1f} episodes/s, "
            f"{steps / s:.1f} steps/s")


@app.command("rescore")
@one_line_errors
@refused
def rescore_command(
    to_topic: str = typer.Option(..., "--to-topic", help="The new topic the scores go to."),
    judge: JudgeKind = typer.Option(JudgeKind.RULES, "--judge", help="rules or llm."),
    judge_model: str | None = typer.Option(None, "--judge-model", help="The LLM judge's model."),
    start: str | None = FROM, end: str | None = TO, iterations: str | None = ITERATIONS,
    report: Path | None = typer.Option(
        None, "--report", help="Agreement report base path (.json and .md; default: "
        "<data_dir>/replay/<topic>.agreement)."),
    batch: int | None = typer.Option(
        None, "--batch", min=1, help="Episodes judged at once and written in one transaction "
        "(default 256 with the rules, 16 with the LLM judge)."),
) -> None:
    """Score past episodes again, into a new topic.

    With the rules or the LLM judge (--judge); reports the agreement with the scores the
    pipeline gave.

    Example: webgym reprocess rescore --judge rules --to-topic webgym.rescored.r1"""
    from processors.evaluator.judge import make_judge
    from processors.reprocess.agreement import report_dict, report_markdown
    from processors.reprocess.rescore import provenance, rescore

    settings = settings_with(evaluator={"judge": judge, "model": judge_model})
    rng = log_range(start, end, iterations)
    chosen = make_judge(settings)
    model = chosen.model if chosen is not None else None
    prov = provenance(judge, chosen, model, to_topic)
    with live_progress() as progress:
        result = asyncio.run(rescore(settings, to_topic, rng, chosen, prov, progress,
                                     batch))
    a = result.agreement
    table = Table(title=f"old rewards vs {prov.judge_kind} ({prov.evaluator_version})")
    for col in ("", "new success", "new failure"):
        table.add_column(col)
    table.add_row("old success", str(a.both_success), str(a.old_success_new_failure))
    table.add_row("old failure", str(a.old_failure_new_success), str(a.both_failure))
    console.print(table)
    kappa = "n/a" if a.kappa != a.kappa else f"{a.kappa:.3f}"
    console.print(f"Cohen's kappa {kappa} over {a.compared} episodes; flipped {len(a.flipped)}; "
                  f"judge failures (new) {len(a.unjudged_new)}; no old score "
                  f"{len(a.no_old_score)}; blocking verdict changed {len(a.blocked_changed)}",
                  highlight=False)
    for f in a.flipped[:20]:
        console.print(f"  flipped {f.episode_id}: {f.old_reward:g} -> {f.new_reward:g} ({f.why})",
                      highlight=False)
    for eid, why in list(result.unscorable.items())[:20]:
        console.print(f"  [yellow]not rescored[/yellow] {eid}: {why}", highlight=False)
    base = report or Path(settings.infra.data_dir) / "replay" / f"{to_topic}.agreement"
    base.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = base.with_suffix(".json"), base.with_suffix(".md")
    json_path.write_text(json.dumps(report_dict(a, to_topic, prov), indent=2) + "\n")
    md_path.write_text(report_markdown(a, to_topic, prov))
    console.print(f"wrote {result.written} scores to {to_topic} ({result.resumed} there "
                  f"already); report: {json_path}, {md_path}", highlight=False)
    console.print(rates("rescored", result.written, result.steps, result.seconds),
                  highlight=False)


@app.command("refilter")
@one_line_errors
@refused
def refilter_command(
    to_topic: str = typer.Option(..., "--to-topic", help="The new replay topic."),
    from_topic: str | None = typer.Option(
        None, "--from-topic", help="A scored topic (default: the pipeline's; or one that "
        "`webgym reprocess rescore` wrote)."),
    success_only: bool = typer.Option(
        True, "--success-only/--any-reward",
        help="Only successful episodes' steps (reward 1), or every episode's."),
    same_screenshot: bool = typer.Option(
        True, "--same-screenshot/--keep-same-screenshot",
        help="Drop a step whose next screenshot is the same (WebGym's filter)."),
    include_failures: bool = typer.Option(False, "--include-failures",
                                          help="Keep failed episodes' steps, labelled."),
    samples: int | None = typer.Option(None, "--samples", help="Draw this many (default: all)."),
    recency_power: float = typer.Option(1.0, "--recency-power",
                                        help="The draw's weights (position+1)^p; 1 uniform."),
    seed: int = typer.Option(0, "--seed", help="The draw's seed (a re-run draws the same)."),
    start: str | None = FROM, end: str | None = TO, iterations: str | None = ITERATIONS,
) -> None:
    """Build a new replay set from the scored history.

    The replay processor's rules with the filters given; with --samples, the trainer's
    recency-biased draw.

    \b
    Example: webgym reprocess refilter --to-topic webgym.replay.rebuilt \\
      --include-failures"""
    from consumers.trainer.draw import draw
    from processors.reprocess.refilter import Filters, refilter
    from webgym_common.topics import Topic

    settings = settings_with()
    rng = log_range(start, end, iterations)
    filters = Filters(success_only, same_screenshot, include_failures)

    def select(found: list[Any]) -> list[Any]:
        return found if samples is None else draw(found, samples, recency_power, seed)

    with live_progress() as progress:
        result = asyncio.run(refilter(settings, from_topic or Topic.EPISODES_SCORED, to_topic,
                                      rng, filters, select, on_progress=progress))
    console.print(f"{result.episodes} episodes, {result.eligible} eligible steps, "
                  f"{result.picked} picked; wrote {result.written} samples to {to_topic} "
                  f"({result.resumed} there already; {result.by_reference} with their prompt "
                  f"by reference, read by the trainer)", highlight=False)
    for problem in result.problems[:20]:
        console.print(f"  [yellow]left out[/yellow] {problem}", highlight=False)
    console.print(rates("refiltered", result.episodes, result.steps, result.seconds),
                  highlight=False)
    console.print(f"train on it: WEBGYM_TRAINER__REPLAY_TOPIC={to_topic}", highlight=False)


@app.command("export")
@one_line_errors
def export_command(
    out: Path | None = typer.Option(
        None, "--out", help="Directory (default: <infra.data_dir>/trajectories)."),
    rank: int | None = typer.Option(None, "--rank", help="Node rank: iteration{N}_rank_{R}."),
    webgym: bool = typer.Option(True, "--webgym/--avro-only",
                                help="Also write WebGym's per-iteration trajectory files."),
    blobs: bool = typer.Option(False, "--blobs", help="Copy screenshots, inline prompts."),
    start: str | None = FROM, end: str | None = TO, iterations: str | None = ITERATIONS,
) -> None:
    """Write iteration files from a range of the log.

    Avro containers (zstandard) and, unless --avro-only, WebGym's trajectory layout.

    Example: webgym reprocess export --iterations 0-2 --out /tmp/trajectories"""
    from consumers.archiver import default_out_dir
    from consumers.webgym_layout import export_range
    from processors.reprocess.rescore import keypoint_steps

    settings = settings_with()
    rng = log_range(start, end, iterations)
    target = out or default_out_dir(settings)
    with live_progress() as progress:
        done = asyncio.run(export_range(settings, rng, target, rank, webgym, blobs,
                                        keypoint_steps(settings.evaluator.max_screenshots),
                                        progress))
    for d in done:
        files = ", ".join(str(p) for p in [d.avro, *d.webgym])
        console.print(f"iteration {d.iteration}: {d.episodes} episodes, {d.steps} steps -> "
                      f"{files}", highlight=False)
    if not done:
        console.print("no scored episodes in the range", highlight=False)
