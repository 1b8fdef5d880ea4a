"""`webgym worker <process>`: one pipeline process in the foreground. One command per row of
the process registry (webgym_common.processes), made from the row: its options, what runs
first (`prepare`), the line it prints as it starts, and the entry point it runs."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import typer

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.config import Settings
from webgym_common.processes import PROCESSES, Option, Process, ProcessSpec
from webgym_common.topics import group_id

app = typer.Typer(help="Pipeline processes (run several to scale).\n\n"
                  "Example: webgym worker browser --contexts 4", no_args_is_help=True)

F = TypeVar("F", bound=Callable[..., Any])


def load(target: str) -> Callable[..., Any]:
    """A registry "module:function", imported only when a command runs it."""
    module, function = target.split(":")
    return getattr(importlib.import_module(module), function)


def run_process(process: Process, settings: Settings, **kwargs: Any) -> None:
    """Run a registry process's entry point in the foreground until it stops."""
    result = load(PROCESSES[process].entry)(settings, **kwargs)
    if inspect.iscoroutine(result):  # the bus-based processes; faust workers run their own
        asyncio.run(result)


def summary(process: Process) -> str:
    """The command's help: the registry's line, and an example."""
    line = PROCESSES[process].summary
    return f"{line[0].upper()}{line[1:]}.\n\nExample: webgym worker {process.value}"


def laid_over(given: Iterable[tuple[str, Any]]) -> Settings:
    """The settings with each ("section.field", value) given laid over them (None: not
    given, the setting stays as it is)."""
    sections: dict[str, dict[str, Any]] = {}
    for setting, value in given:
        section, field = setting.split(".")
        sections.setdefault(section, {})[field] = value
    return settings_with(**sections)


def start(spec: ProcessSpec, given: dict[str, Any]) -> None:
    """`webgym worker <name>`: the settings with the options given, what the row prepares,
    the row's banner, then its entry point in the foreground."""
    settings = laid_over((o.setting, given[o.name]) for o in spec.options if o.setting)
    keywords = {o.name: given[o.name] for o in spec.options
                if o.setting is None and given[o.name] is not None}
    if spec.prepare:
        with console.status(f"{spec.name}: getting ready ({spec.prepare})"):
            keywords.update(load(spec.prepare)(settings))
    group = group_id(settings.kafka, spec.group) if spec.group else "-"
    console.print(spec.banner.format(s=settings, group=group, name=spec.name.value, **keywords))
    run_process(spec.name, settings, **keywords)


def option_parameter(option: Option) -> inspect.Parameter:
    """A row's option as typer reads it off a signature: None unless given."""
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY,
                             default=typer.Option(None, option.flags, help=option.help),
                             annotation=option.type | None)


def with_options(command: F, options: Iterable[inspect.Parameter]) -> F:
    """`command` (its `**given` takes them) as typer sees it: its own parameters, then
    `options`. typer reads a command's options off its signature and type hints."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values()
           if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params = [*own, *options]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def worker_command(spec: ProcessSpec) -> Callable[..., None]:
    """The command that runs the row's process, with the row's options."""
    def command(**given: Any) -> None:
        start(spec, given)

    return with_options(one_line_errors(command), map(option_parameter, spec.options))


for _spec in PROCESSES.values():
    app.command(_spec.name.value, help=summary(_spec.name))(worker_command(_spec))
