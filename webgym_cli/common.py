"""What every command group shares: the console, one-line errors, settings with overrides."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from typing import Any

import typer
from rich.console import Console

from webgym_common.config import Settings, SettingsError, get_settings, load_settings


def _console() -> Console:
    # Piped to a file or a CI log, rich assumes 80 columns and cuts the metrics table's
    # headers; a log reader would rather scroll sideways.
    out = Console()
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = 160
    return out


console = _console()



def _is_known_failure(err: Exception) -> bool:
    # Imported only once something failed, so no command pays for the others' layers.
    from infra.procs import InfraError
    from producers.controller.main_job import LogNotEmpty
    from webgym_common.config.stack_secrets import SecretsFileError
    from webgym_common.objectstore import ObjectStoreError

    return isinstance(err, InfraError | SettingsError | SecretsFileError | ObjectStoreError
                      | LogNotEmpty | TimeoutError)


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Known failures print one clear line and exit 1, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            if not _is_known_failure(err):
                raise
            console.print(f"[red]error:[/red] {err or type(err).__name__}", highlight=False)
            raise typer.Exit(1) from None

    return wrapper


def settings_with(**sections: dict[str, Any]) -> Settings:
    """The settings with the options the user gave (None = not given) laid over them.

    Overrides are passed when loading, field by field, so the section's other
    WEBGYM_<SECTION>__* variables still apply; the cached settings are never changed.
    """
    overrides = {
        section: given
        for section, fields in sections.items()
        if (given := {k: v for k, v in fields.items() if v is not None})
    }
    return load_settings(**overrides) if overrides else get_settings()
