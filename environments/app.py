"""The sandbox web server: every site under one aiohttp app, path-prefixed.

Tasks refer to it as ``{sandbox}`` (e.g. ``{sandbox}/shop/``); the pipeline substitutes the
base URL it started the server on. Every POST is counted per episode (environments.posts,
``GET /__webgym/posts``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from environments import (
    forum,
    hostile,
    miniwob,
    playground,
    posts,
    security_pages,
    shop,
    travel,
    wiki,
)
from environments.layout import link, render

TASKS_FILE = Path(__file__).parent / "tasks" / "sandbox_tasks.jsonl"
# Template-generated suites with train / test / ood splits (environments/tasks/generated).
GENERATED_TASKS_FILE = Path(__file__).parent / "tasks" / "generated_tasks.jsonl"
SITES = [
    ("/shop/", "Gadget Depot (shop)", "search, filters, product specs, cart and checkout"),
    ("/wiki/", "Sandpedia (wiki)", "articles with infoboxes, internal links and search"),
    ("/forum/", "Sandbox Q&A (forum)", "boards, threads, votes; log in to reply"),
    ("/travel/", "SandTrip (travel)", "flight search, results and booking"),
    ("/hostile/", "Hostile pages", "anti-bot wall, HTTP 403, hangs, pop-ups, dialogs, downloads"),
    ("/playground/", "Action playground", "one target per action kind, for testing workers"),
    ("/miniwob/miniwob/click-button.html", "MiniWoB++",
     "the miniwob package's task pages (one per environment; /miniwob/miniwob/<env>.html)"),
]
# Finish quickly on shutdown even if a hanging response (never-loads) is still open.
SHUTDOWN_TIMEOUT = 2.0


async def index(request: web.Request) -> web.Response:
    items = "".join(f"<li>{link(href, name)}: {desc}</li>" for href, name, desc in SITES)
    body = (f"<h1>Sandbox web</h1><p>Offline practice sites for web agents.</p>"
            f'<ul aria-label="Sites">{items}</ul>')
    return render("Sandbox web", body)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def create_app() -> web.Application:
    app = web.Application()
    app.add_routes([web.get("/", index), web.get("/healthz", healthz)])
    app.add_routes(shop.routes() + wiki.routes() + forum.routes() + travel.routes())
    app.add_routes(playground.routes())
    app.add_routes(security_pages.routes())  # URL-policy probes (test_url_policy.py)
    hostile.setup(app)
    miniwob.setup(app)  # MiniWoB++'s pages from the miniwob package (static, read-only)
    posts.setup(app)  # form posts per episode (X-WebGym-Episode), for the chaos suite
    # "/shop" without the slash is a natural thing to type; send it to the site root.
    for prefix in ("shop", "wiki", "forum", "travel", "hostile"):
        app.router.add_get(f"/{prefix}", _redirect(f"/{prefix}/"))
    return app


def _redirect(target: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently(target)

    return handler


async def start_sandbox(host: str, port: int) -> web.AppRunner:
    """Start serving in the running loop; the caller owns ``await runner.cleanup()``."""
    runner = web.AppRunner(create_app(), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


def main(host: str = "127.0.0.1", port: int = 8765) -> None:
    """Blocking server (Ctrl+C to stop)."""
    web.run_app(create_app(), host=host, port=port, shutdown_timeout=SHUTDOWN_TIMEOUT,
                print=lambda msg: print(f"sandbox web: {msg}", flush=True))
