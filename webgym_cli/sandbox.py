"""`webgym sandbox up`: the offline sandbox web sites in the foreground."""

from __future__ import annotations

import typer

from webgym_common.config import get_settings

app = typer.Typer(help="The offline sandbox web sites.\n\nExample: webgym sandbox up",
                  no_args_is_help=True)


@app.command("up")
def sandbox_up(
    port: int | None = typer.Option(None, help="Port (default: WEBGYM_INFRA__SANDBOX_PORT)."),
) -> None:
    """Serve the sandbox web sites in the foreground.

    `webgym infra up` runs them in the background.

    Example: webgym sandbox up --port 18080"""
    from environments.app import main as serve

    settings = get_settings()
    serve(settings.infra.host, port or settings.infra.sandbox_port)
