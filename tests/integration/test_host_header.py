"""DNS rebinding against the real servers: `webgym monitor` and `webgym envserver` (real
processes on the embedded stack) answer requests for their own names and refuse, with 421
and before any route, a request whose Host is a rebound DNS name (webgym_common.hosts)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from harness.launch import PipelineProcess
from infra.procs import free_port
from webgym_common.config import Settings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

REBOUND = "rebound.attacker.example"


async def serving(proc: PipelineProcess, timeout_s: float = 90) -> None:
    async with asyncio.timeout(timeout_s):
        while not proc.is_ready():  # noqa: ASYNC110 (a ready file)
            assert proc.proc.poll() is None, proc.log_text()[-3000:]
            await asyncio.sleep(0.2)


@pytest_asyncio.fixture(loop_scope="session")
async def start(tmp_path: Path) -> AsyncIterator[Callable[..., PipelineProcess]]:
    procs: list[PipelineProcess] = []

    def launch(settings: Settings, args: list[str]) -> PipelineProcess:
        proc = PipelineProcess(settings, args, tmp_path / f"{args[0]}.log")
        procs.append(proc)
        return proc

    yield launch
    for proc in procs:
        proc.stop()


async def get(url: str, host: str | None = None) -> tuple[int, str]:
    headers = {"Host": host} if host else {}
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


async def post(url: str, host: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, \
            http.post(url, json={}, headers={"Host": host}) as resp:
        return resp.status, await resp.text()


async def test_the_monitor_refuses_a_rebound_host(
    settings: Settings, start: Callable[..., PipelineProcess], tmp_path: Path,
) -> None:
    port = free_port()
    s = settings.model_copy(update={"monitor": settings.monitor.model_copy(update={
        "port": port, "tensorboard_dir": tmp_path / "tb", "allowed_hosts": ("monitor.lan",)})})
    await serving(start(s, ["monitor"]))
    url = f"http://127.0.0.1:{port}"
    status, _ = await get(f"{url}/")
    assert status == 200
    for name in (f"localhost:{port}", "monitor.lan"):
        assert (await get(f"{url}/stats", name))[0] == 200, name
    for path in ("/", "/stats", "/episodes", "/screenshot?uri=s3://webgym/x.png"):
        status, body = await get(f"{url}{path}", f"{REBOUND}:{port}")
        assert status == 421, (path, status, body)
        assert "WEBGYM_MONITOR__ALLOWED_HOSTS" in body


async def test_the_env_server_refuses_a_rebound_host_before_it_creates_an_env(
    settings: Settings, start: Callable[..., PipelineProcess],
) -> None:
    port = free_port()
    s = settings.model_copy(update={"envserver": settings.envserver.model_copy(update={
        "port": port, "allowed_hosts": ("envserver",)})})
    await serving(start(s, ["envserver"]))
    url = f"http://127.0.0.1:{port}"
    status, body = await post(f"{url}/create", f"{REBOUND}:{port}")
    assert status == 421 and "WEBGYM_ENVSERVER__ALLOWED_HOSTS" in body
    assert await get(f"{url}/list_envs", f"{REBOUND}:{port}") == (421, body)
    # Nothing was created by the refused request; the server's own names still work.
    assert await get(f"{url}/list_envs") == (200, "[]")
    status, body = await post(f"{url}/create", f"envserver:{port}")
    assert status == 200 and '"env_idx"' in body
    assert (await get(f"{url}/list_envs", f"localhost:{port}"))[0] == 200
