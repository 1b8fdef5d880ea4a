"""`webgym eval`: a model version on the test splits, one result per suite and split.

The tasks: the whole split, a seeded draw (--limit), or the stratified held-out set
(--per-group K, or --heldout for each suite's own K: producers/controller/heldout.py).
--baseline runs the scripted baseline (processors/policy/baseline.py) instead of a model,
on the same selection; its results carry version -1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from webgym_cli.common import console, one_line_errors
from webgym_common.choices import Split, Suite
from webgym_common.config import Settings, get_settings

if TYPE_CHECKING:
    from webgym_common.events import EvaluationResult

app = typer.Typer()


@app.command("eval")
@one_line_errors
def eval_command(
    split: list[Split] = typer.Option(
        [Split.TEST], help="test (held-out entities / seeds) or ood (held-out templates / "
        "environments); repeat for both."),
    suite: Suite = typer.Option(Suite.ALL, help="Which suite; all: each suite with such tasks."),
    version: int | None = typer.Option(
        None, help="The model version (0: the base model; default: the one served now)."),
    limit: int | None = typer.Option(None, help="At most this many tasks per suite and split "
                                     "(a draw seeded by --seed)."),
    per_group: int | None = typer.Option(
        None, min=1, help="The stratified held-out set: this many tasks per MiniWoB++ "
        "environment or sandbox template (seeded by --seed; instead of --limit)."),
    heldout: bool = typer.Option(
        False, help="The stratified held-out set at each suite's own size (MiniWoB++ 6 per "
        "environment, sandbox 8 per template: 132 and 117 test tasks)."),
    baseline: bool = typer.Option(
        False, help="Evaluate the scripted baseline (clicks the marks in order, then answers) "
        "instead of a model: the floor a version must beat. Its version is -1."),
    seed: int = typer.Option(0, help="Seeds the task draw (the policy samples test episodes "
                             "at WEBGYM_POLICY__EVAL_TEMPERATURE with WEBGYM_POLICY__EVAL_SEED)."),
    max_steps: int | None = typer.Option(None, help="Caps each episode's steps."),
    report: Path | None = typer.Option(
        None, "--report", file_okay=False,
        help="Then write the held-out report of this selection to this directory: every "
        "version and the baseline evaluated on it so far (curve.csv, per_task.csv, "
        "per_group.csv, curve.png), McNemar's p against v0 included."),
) -> None:
    """Evaluate a model version on the held-out splits.

    The test split (or ood, or both) at a fixed seed and temperature; the results are published
    and printed. Needs the pipeline running (`webgym pipeline up`) and a task file with splits
    loaded. Evaluation episodes never feed replay and count in no iteration's metrics.

    Example: webgym eval --heldout --suite miniwob --seed 1 --max-steps 8"""
    if Split.TRAIN in split:
        raise typer.BadParameter("evaluate on test or ood: training tasks are not held out")
    if (limit is not None) + (per_group is not None) + heldout > 1:
        raise typer.BadParameter("choose one of --limit, --per-group and --heldout")
    if baseline and version is not None:
        raise typer.BadParameter("--baseline evaluates no model version: drop --version")
    from producers.controller.heldout import HELDOUT_PER_GROUP

    groups = HELDOUT_PER_GROUP if heldout else per_group
    if report is not None and heldout:
        if suite == Suite.ALL:
            raise typer.BadParameter("--report with --heldout: name one --suite (each suite "
                                     "has its own size), or give --per-group")
        per_group = HELDOUT_PER_GROUP[suite]
    settings = get_settings()
    asyncio.run(_evaluate(settings, split, suite, version, limit, seed, max_steps,
                          groups, baseline))
    if report is not None:
        asyncio.run(_report(settings, report, split, suite, seed, per_group))


async def _evaluate(settings: Settings, splits: list[Split], suite: Suite, version: int | None,
                    limit: int | None, seed: int, max_steps: int | None,
                    per_group: int | Mapping[Suite, int] | None = None, baseline: bool = False,
                    ) -> list[EvaluationResult]:
    from producers.controller.evaluate import BASELINE_EVAL_VERSION, evaluate_version
    from producers.controller.rollout import served_now
    from webgym_common.stream.bus import EventProducer

    async with EventProducer(settings, client_id="evaluation") as producer:
        if baseline:  # no model: nothing to check in the model server
            version = BASELINE_EVAL_VERSION
        else:
            current = await served_now(settings, producer)
            version = current if version is None else version
            if version > current:
                raise typer.BadParameter(f"v{version} is not served yet (serving v{current})")
            if version and version < current:
                await _check_listed(settings, version)
        try:
            return await evaluate_version(settings, producer, version, suite, splits, console,
                                          limit=limit, seed=seed, per_group=per_group,
                                          max_steps=max_steps)
        except ValueError as err:  # nothing to evaluate
            raise typer.BadParameter(str(err)) from None


async def _report(settings: Settings, out: Path, splits: list[Split], suite: Suite,
                  seed: int, per_group: int | None) -> None:
    from producers.controller.rollout import served_now
    from producers.controller.summary import heldout_report
    from webgym_common.stream.bus import EventProducer

    async with EventProducer(settings, client_id="evaluation-report") as producer:
        newest = await served_now(settings, producer)
        await heldout_report(settings, producer, range(newest + 1), {}, out, console,
                             suite=suite, splits=splits, seed=seed, per_group=per_group)


async def _check_listed(settings: Settings, version: int) -> None:
    """An older version must still be loaded (the model loader keeps the newest three) by a
    replica at least: the policy passes a request a replica lacks the name for to another."""
    from consumers.model_servers import ModelServer
    from webgym_common.versions import served_name

    name = served_name(settings.trainer.model_name, version)
    listed: set[str] = set()
    for url in settings.policy.replica_urls:
        server = ModelServer(url, settings.policy.api_key, 10.0, settings.policy.tls_verify)
        try:
            listed |= set(await server.listed())
        finally:
            await server.http.aclose()
    if name not in listed:
        raise typer.BadParameter(f"{name} is no longer loaded in the model server (it keeps "
                                 "the newest versions); evaluate versions as they are served: "
                                 "webgym run --eval-every 1")
