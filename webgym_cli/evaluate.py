"""`webgym eval`: a model version on the test splits, one result per suite and split."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import typer

from webgym_cli.common import console, one_line_errors
from webgym_common.config import Settings, Split, Suite, get_settings

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
    seed: int = typer.Option(0, help="Seeds the task draw (the policy samples test episodes "
                             "at WEBGYM_POLICY__EVAL_TEMPERATURE with WEBGYM_POLICY__EVAL_SEED)."),
    max_steps: int | None = typer.Option(None, help="Caps each episode's steps."),
) -> None:
    """Run the test split(s) on a fixed seed and temperature; publish and print the results.

    Needs the pipeline running (`webgym pipeline up`) and a task file with splits loaded.
    Evaluation episodes never feed replay and count in no iteration's metrics."""
    if Split.TRAIN in split:
        raise typer.BadParameter("evaluate on test or ood: training tasks are not held out")
    asyncio.run(_evaluate(get_settings(), split, suite, version, limit, seed, max_steps))


async def _evaluate(settings: Settings, splits: list[Split], suite: Suite, version: int | None,
                    limit: int | None, seed: int, max_steps: int | None,
                    ) -> list[EvaluationResult]:
    from producers.controller.evaluate import evaluate_version
    from producers.controller.rollout import served_now
    from webgym_common.bus import EventProducer

    async with EventProducer(settings, client_id="evaluation") as producer:
        current = await served_now(settings, producer)
        version = current if version is None else version
        if version > current:
            raise typer.BadParameter(f"v{version} is not served yet (serving v{current})")
        if version and version < current:
            await _check_listed(settings, version)
        try:
            return await evaluate_version(settings, producer, version, suite, splits, console,
                                          limit=limit, seed=seed, max_steps=max_steps)
        except ValueError as err:  # nothing to evaluate
            raise typer.BadParameter(str(err)) from None


async def _check_listed(settings: Settings, version: int) -> None:
    """An older version must still be loaded: the model loader keeps the newest two."""
    from consumers.model_loader import ModelServer
    from webgym_common.versions import served_name

    name = served_name(settings.trainer.model_name, version)
    server = ModelServer(settings.policy.base_url, settings.policy.api_key, 10.0)
    try:
        listed = await server.listed()
    finally:
        await server.http.aclose()
    if name not in listed:
        raise typer.BadParameter(f"{name} is no longer loaded in the model server (it keeps "
                                 "the newest versions); evaluate versions as they are served: "
                                 "webgym run --eval-every 1")
