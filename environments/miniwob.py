"""MiniWoB++'s task pages, served read-only from the `miniwob` package under ``/miniwob/``.

The package (PyPI `miniwob`) ships the pages in its ``html/`` folder: ``miniwob/<env>.html``
loads ``../core/core.js`` and ``../common/…``, so the folder is served as it is and an
environment's page is ``/miniwob/miniwob/<env>.html``. The package is located without being
imported: its ``__init__`` registers gymnasium environments, which nothing here needs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from aiohttp import web

PREFIX = "/miniwob/"


def html_dir() -> Path | None:
    """The package's html/ folder, or None when the package is not installed."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "html"
    return folder if (folder / "core" / "core.js").is_file() else None


def page_path(env: str) -> str:
    """An environment's page, relative to the sandbox's base URL."""
    return f"{PREFIX}miniwob/{env}.html"


def setup(app: web.Application) -> None:
    """Serve the pages (static files; no listing, no symlinks followed)."""
    folder = html_dir()
    if folder is not None:
        app.router.add_static(PREFIX, folder, show_index=False, follow_symlinks=False)
