"""The monitor's pages: aiohttp routes rendering Jinja2 templates (autoescape on).

Read-only: every route is a GET, and none publishes or writes anywhere. Only requests for
the names it is known by are answered (webgym_common.hosts: no DNS rebinding). Text from pages,
tasks and models is hostile: it reaches the browser only through autoescaped templates
or as JSON that the page's script sets as `textContent`, never as markup; and the
Content-Security-Policy runs no inline script, as a second line. Screenshots come from
the object store through `/screenshot`, which serves only content-addressed images of the
configured bucket.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from consumers.monitor.episode_view import Query, find, mark_boxes, verdicts
from consumers.monitor.hub import Monitor, Subscriber, scored_topic
from consumers.monitor.plots import learning_curve_png, losses_png, metrics_png
from consumers.monitor.state import EpisodeState
from webgym_common.choices import ScreenshotFormat
from webgym_common.hosts import host_check
from webgym_common.objectstore import ObjectStore, ObjectStoreError, parse_uri

HERE = Path(__file__).parent
MONITOR = web.AppKey("monitor", object)
STORE = web.AppKey("store", ObjectStore)
SCREENSHOTS = web.AppKey("screenshots", OrderedDict)
CSP = ("default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self'; "
       "style-src 'self' 'unsafe-inline'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
IMAGE_TYPES = {"png": ScreenshotFormat.PNG.mime, "jpg": ScreenshotFormat.JPEG.mime,
               "webp": ScreenshotFormat.WEBP.mime}
CACHED_SCREENSHOTS = 64
HEARTBEAT_S = 15.0

templates = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                               autoescape=True, undefined=jinja2.StrictUndefined)


def render(name: str, **context: Any) -> web.Response:
    return web.Response(text=templates.get_template(name).render(**context),
                        content_type="text/html")


def _monitor(request: web.Request) -> Monitor:
    return request.app[MONITOR]  # type: ignore[return-value]


@web.middleware
async def headers(request: web.Request,
                  handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                  ) -> web.StreamResponse:
    response = await handler(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


async def live(request: web.Request) -> web.Response:
    m = _monitor(request)
    it = m.view.current_iteration
    return render("live.html", page="live", iteration=it, stats=m.stats(),
                  rows=[e.row() for e in m.view.grid(it)], states=[s.value for s in EpisodeState])


async def live_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: episode rows as they change, stats every second."""
    m = _monitor(request)
    sub = Subscriber(asyncio.Queue(m.settings.monitor.client_queue))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-store"})
    await response.prepare(request)
    m.subscribers.add(sub)
    snapshot = m.snapshot()  # taken as the subscription starts: the queue holds what is newer
    try:
        await response.write(b"retry: 1000\n\n" + "".join(snapshot).encode())
        while not sub.dropped:
            try:
                message = await asyncio.wait_for(sub.queue.get(), HEARTBEAT_S)
            except TimeoutError:
                message = ": keep-alive\n\n"
            await response.write(message.encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        m.subscribers.discard(sub)
    return response


async def metrics(request: web.Request) -> web.Response:
    m = _monitor(request)
    return render("metrics.html", page="metrics", stamp=int(time.time()),
                  rows=sorted(m.view.metrics.values(), key=lambda r: (r.iteration, r.split)))


async def plot(request: web.Request) -> web.Response:
    v = _monitor(request).view
    drawers: dict[str, Callable[[], bytes]] = {
        "metrics": lambda: metrics_png(list(v.metrics.values())),
        "learning-curve": lambda: learning_curve_png(list(v.evaluations.values())),
        "losses": lambda: losses_png({k: dict(p) for k, p in v.losses.items()},
                                     dict(v.run_versions)),
    }
    draw = drawers.get(request.match_info["name"])
    if draw is None:
        raise web.HTTPNotFound()
    png = await asyncio.to_thread(draw)  # matplotlib off the event loop
    return web.Response(body=png, content_type="image/png",
                        headers={"Cache-Control": "no-store"})


async def episodes(request: web.Request) -> web.Response:
    m = _monitor(request)
    q = Query.parse(dict(request.query))
    return render("episodes.html", page="episodes", q=q, params=dict(request.query),
                  hits=find(list(m.view.episodes.values()), q),
                  states=[s.value for s in EpisodeState], scored_topic=_scored(m))


def _scored(m: Monitor) -> str:
    return scored_topic(m.settings)


async def episode(request: web.Request) -> web.Response:
    m = _monitor(request)
    ep = m.view.episodes.get(request.match_info["episode_id"])
    if ep is None:
        raise web.HTTPNotFound(text="no such episode (yet)")
    steps = [s for _, s in sorted(ep.steps.items())]
    return render("episode.html", page="episodes", ep=ep, steps=steps,
                  boxes={s.step: mark_boxes(s.marks, s.viewport) for s in steps},
                  verdicts=verdicts(ep.scored.evaluation, ep.scored.reward) if ep.scored else [],
                  scored_topic=_scored(m))


async def screenshot(request: web.Request) -> web.Response:
    """A screenshot from the object store: only sha256/ images of the configured bucket."""
    uri = request.query.get("uri", "")
    store: ObjectStore = request.app[STORE]
    try:
        bucket, key = parse_uri(uri)
    except ObjectStoreError:
        raise web.HTTPBadRequest(text="not an s3:// reference") from None
    kind = IMAGE_TYPES.get(key.rsplit(".", 1)[-1])
    if bucket != store.bucket or not key.startswith("sha256/") or kind is None:
        raise web.HTTPForbidden(text="only screenshots are served")
    cache: OrderedDict[str, bytes] = request.app[SCREENSHOTS]
    data = cache.get(uri)
    if data is None:
        try:
            data = await store.get_blob(uri)
        except ObjectStoreError as err:
            raise web.HTTPBadGateway(text=str(err)) from None
        except Exception as err:  # S3Error: missing object and the like
            raise web.HTTPNotFound(text=type(err).__name__) from None
        cache[uri] = data
        while len(cache) > CACHED_SCREENSHOTS:
            cache.popitem(last=False)
    # Content-addressed: the bytes under a key never change.
    return web.Response(body=data, content_type=kind,
                        headers={"Cache-Control": "private, max-age=86400, immutable"})


async def models(request: web.Request) -> web.Response:
    v = _monitor(request).view
    return render("models.html", page="models",
                  models=sorted(v.models.values(), key=lambda x: (x.model_name, -x.version)),
                  served=v.served, runs=v.run_versions)


async def tasks(request: web.Request) -> web.Response:
    v = _monitor(request).view
    return render("tasks.html", page="tasks",
                  histories=sorted(v.histories.values(), key=lambda h: h.task_id),
                  blocked=sorted(v.blocked.values(), key=lambda b: b.domain))


async def dlq(request: web.Request) -> web.Response:
    return render("dlq.html", page="dlq", letters=list(_monitor(request).view.letters))


async def stats(request: web.Request) -> web.Response:
    return web.Response(text=json.dumps(_monitor(request).stats()),
                        content_type="application/json")


def make_app(monitor: Monitor) -> web.Application:
    cfg = monitor.settings.monitor
    # The Host check first: a rebound name gets nothing, not even a header.
    app = web.Application(middlewares=[host_check(
        cfg.host, cfg.allowed_hosts, "WEBGYM_MONITOR__ALLOWED_HOSTS"), headers])
    app[MONITOR] = monitor
    app[STORE] = ObjectStore(monitor.settings.s3)
    app[SCREENSHOTS] = OrderedDict()
    app.add_routes([
        web.get("/", live), web.get("/live/events", live_events), web.get("/stats", stats),
        web.get("/metrics", metrics), web.get("/plots/{name}.png", plot),
        web.get("/episodes", episodes), web.get("/episodes/{episode_id}", episode),
        web.get("/screenshot", screenshot), web.get("/models", models),
        web.get("/tasks", tasks), web.get("/dlq", dlq),
        web.static("/static", HERE / "static"),
    ])
    return app
