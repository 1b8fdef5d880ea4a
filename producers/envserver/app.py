"""`webgym envserver`: AgentGym's WebArena environment-server API over the pipeline.

Delivery: each env's episode is an ordinary episode of the pipeline (server.py). The
server reads webgym.observations, webgym.episodes.completed and webgym.episodes.scored from
their end without a group, commits nothing and keeps no state a restart would need: a
restarted server has no envs (clients create them again) and the episodes it had end by
their deadline. The routes here turn requests into the server's calls and a BadRequest
into its status with the error; the decisions are in envs.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from aiohttp import web

from producers.envserver.envs import Env
from producers.envserver.server import BadRequest, EnvServer
from webgym_common.config import Settings
from webgym_common.hosts import host_check
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

log = logging.getLogger(__name__)


async def body(request: web.Request, *required: str) -> dict[str, Any]:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadRequest(400, f"malformed JSON body: {err}") from None
    if not isinstance(data, dict):
        raise BadRequest(400, "the body must be a JSON object")
    missing = [f for f in required if f not in data]
    if missing:
        raise BadRequest(400, f"missing field(s): {', '.join(missing)}")
    return data


def integer(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BadRequest(400, f"{name} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise BadRequest(400, f"{name} must be an integer, got {value!r}") from None


def make_app(server: EnvServer) -> web.Application:
    routes = web.RouteTableDef()

    async def serving(env: Env, work: Any) -> Any:
        env.busy = True
        try:
            return await work
        finally:
            env.busy = False
            env.last_used = time.monotonic()

    @routes.get("/")
    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    @routes.get("/list_envs")
    async def list_envs(_: web.Request) -> web.Response:
        return web.json_response(sorted(server.envs))

    @routes.post("/create")
    async def create(_: web.Request) -> web.Response:
        return web.json_response({"env_idx": server.create()})

    @routes.post("/reset")
    async def reset(request: web.Request) -> web.Response:
        data = await body(request, "env_idx", "idx")
        env = server.env(integer(data["env_idx"], "env_idx"))
        idx = integer(data["idx"], "idx")
        return web.json_response(await serving(env, server.reset(env, idx)))

    @routes.post("/step")
    async def step(request: web.Request) -> web.Response:
        data = await body(request, "env_idx", "action")
        env = server.env(integer(data["env_idx"], "env_idx"))
        if not isinstance(data["action"], str):
            raise BadRequest(400, "action must be a string (the model's reply)")
        return web.json_response(await serving(env, server.step(env, data["action"])))

    @routes.get("/observation")
    async def observation(request: web.Request) -> web.Response:
        if "env_idx" not in request.query:
            raise BadRequest(400, "missing query parameter env_idx")
        env_idx = integer(request.query["env_idx"], "env_idx")
        if env_idx not in server.envs:
            raise BadRequest(404, f"unknown env_idx {env_idx}")
        return web.json_response(server.observation(server.envs[env_idx]))

    @routes.post("/close")
    async def close(request: web.Request) -> web.Response:
        data = await body(request, "env_idx")
        env = server.env(integer(data["env_idx"], "env_idx"))
        await server.close(env, "env server: closed by the client")
        # AgentGym's client decodes every answer as JSON: its server answers this object.
        return web.json_response({"closed": "closed"})

    @web.middleware
    async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)
        except BadRequest as err:
            return web.json_response({"error": str(err)}, status=err.status)

    cfg = server.settings.envserver
    # Whoever reaches it drives browsers: a request for a name it is not known by (a page's
    # DNS name rebound to loopback) is refused before any route (webgym_common.hosts).
    checked = host_check(cfg.host, cfg.allowed_hosts, "WEBGYM_ENVSERVER__ALLOWED_HOSTS")
    app = web.Application(middlewares=[checked, errors], client_max_size=1024 * 1024)
    app.add_routes(routes)
    return app


async def serve(settings: Settings) -> None:
    cfg = settings.envserver
    async with EventProducer(settings, client_id="envserver") as producer:
        server = EnvServer(settings, producer)
        reader = EventConsumer(
            settings, [Topic.OBSERVATIONS, Topic.EPISODES_COMPLETED, Topic.EPISODES_SCORED],
            None, producer, client_id="envserver")
        await reader.start(from_end=True)  # before any request: nothing of ours is missed
        runner = web.AppRunner(make_app(server), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, cfg.host, cfg.port).start()
            log.info("env server on http://%s:%d/", cfg.host, cfg.port)
            mark_ready(f"env server on http://{cfg.host}:{cfg.port}/")
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(server.follow(reader))
                tasks.create_task(server.reap())
        finally:
            for env in list(server.envs.values()):  # nobody will drive them any more
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(server.close(env, "env server stopped"), 5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner.cleanup(), 10)
            await reader.stop()


async def run_envserver(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT; open envs' episodes are cancelled on the way out."""
    await run_until_signalled(serve(settings))
