"""`webgym demos build`: the demonstration bank (every verified train reference, run once)."""

from __future__ import annotations

import asyncio

import typer

from webgym_cli.common import console, one_line_errors
from webgym_common.choices import Suite
from webgym_common.config import get_settings

app = typer.Typer(help="The demonstration bank the trainer's warm start learns from.\n\n"
                  "Example: webgym demos build --suite miniwob", no_args_is_help=True)


@app.command("build")
@one_line_errors
def build(
    suite: list[Suite] = typer.Option(
        [Suite.ALL], help="Suites whose train references go in (repeat; all: every suite)."),
    limit: int | None = typer.Option(
        None, help="At most this many tasks, spread over environments and templates."),
    minutes: float = typer.Option(60.0, help="Deadline of every bank episode, from now."),
) -> None:
    """Build the demonstration bank.

    Teacher-forces the train split's reference sequences through the pipeline once. Needs the
    pipeline running (`webgym pipeline up`). Their steps reach webgym.replay as demonstrations,
    with the prompt the policy sends; the trainer's first run learns from all of them, later
    runs mix them in (WEBGYM_TRAINER__DEMONSTRATION_SHARE). Building again resumes; a new prompt
    version builds a new bank. No test or ood task can enter.

    Example: webgym demos build --suite miniwob --limit 100"""
    from producers.controller.demonstrations import build_bank
    from webgym_common.stream.bus import EventProducer

    settings = get_settings()
    suites = None if Suite.ALL in suite else [s.value for s in suite]

    async def go() -> None:
        async with EventProducer(settings, client_id="demonstration-bank") as producer:
            try:
                result = await build_bank(settings, producer, console, suites=suites,
                                          limit=limit, deadline_minutes=minutes)
            except ValueError as err:
                raise typer.BadParameter(str(err)) from None
        console.print(f"demonstration bank {result.prompt_version}: {result.solved}/"
                      f"{result.episodes} reference episodes solved, {result.steps} steps "
                      "for the trainer", highlight=False)

    asyncio.run(go())
