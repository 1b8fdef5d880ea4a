"""`webgym infra up | status | down`: the embedded stack as one unit.

Components start in order (Kafka, MinIO, then the sandbox web once it exists),
each health-checked with a timeout; `down` stops them in reverse.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from infra import kafka_broker, minio_server, vllm_server
from infra.procs import InfraError, ManagedProcess, port_is_free, port_is_listening
from webgym_common.config import Settings
from webgym_common.objectstore import ObjectStore


@dataclass
class Component:
    name: str
    ports: list[int]
    address: str
    version: Callable[[], str]
    start: Callable[[ManagedProcess], object]
    healthy: Callable[[], Awaitable[bool]]
    after_start: Callable[[], Awaitable[None]] | None = None


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    address: str
    version: str
    pid: int | None
    healthy: bool


def components(settings: Settings, with_vllm: bool | None = None) -> list[Component]:
    """The stack's components; vLLM when asked for (None: when it is running)."""
    infra, s3 = settings.infra, settings.s3
    comps = [
        Component(
            name="kafka",
            ports=[infra.kafka_port, infra.kafka_controller_port],
            address=settings.kafka.bootstrap_servers,
            version=lambda: f"Apache Kafka {infra.kafka_version} (KRaft)",
            start=lambda proc: kafka_broker.start(infra, proc),
            healthy=lambda: kafka_broker.healthy(settings.kafka.bootstrap_servers),
        ),
        Component(
            name="minio",
            ports=[infra.minio_port, infra.minio_console_port],
            address=f"http://{s3.endpoint} (console :{infra.minio_console_port})",
            version=lambda: f"MinIO {infra.minio_version} (go install)",
            start=lambda proc: minio_server.start(infra, s3, proc),
            healthy=lambda: minio_server.healthy(s3.endpoint),
            after_start=lambda: ObjectStore(s3).ensure_bucket(),
        ),
    ]
    sandbox = _sandbox_component(settings)
    if sandbox is not None:
        comps.append(sandbox)
    vllm = Component(
        name="vllm",
        ports=[settings.vllm.port],
        address=settings.policy.base_url,
        version=lambda: f"vLLM {settings.vllm.vllm_version} (CPU), SmolLM2-135M-Instruct",
        start=lambda proc: vllm_server.start(settings, proc),
        healthy=lambda: vllm_server.healthy(settings),
    )
    if with_vllm or (with_vllm is None and ManagedProcess("vllm", infra.data_dir).pid()):
        comps.append(vllm)
    return comps


def _sandbox_component(settings: Settings) -> Component | None:
    import importlib.util

    import httpx

    if importlib.util.find_spec("infra.sandbox.__main__") is None:
        return None

    infra = settings.infra
    url = f"http://{infra.host}:{infra.sandbox_port}"

    async def healthy() -> bool:
        try:
            async with httpx.AsyncClient(timeout=3.0) as client:
                return (await client.get(f"{url}/healthz")).status_code == 200
        except httpx.HTTPError:
            return False

    return Component(
        name="sandbox",
        ports=[infra.sandbox_port],
        address=url,
        version=lambda: "webgym sandbox web",
        start=lambda proc: proc.start(
            [sys.executable, "-m", "infra.sandbox", "--host", infra.host,
             "--port", str(infra.sandbox_port)]
        ),
        healthy=healthy,
    )


def _proc(settings: Settings, comp: Component) -> ManagedProcess:
    return ManagedProcess(comp.name, settings.infra.data_dir)


async def wait_healthy(comp: Component, proc: ManagedProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await comp.healthy():
            return
        if proc.pid() is None:
            raise InfraError(
                f"{comp.name} exited during start-up; last log lines from {proc.log_file}:\n"
                + proc.log_tail()
            )
        await asyncio.sleep(0.5)
    raise InfraError(
        f"{comp.name} did not become healthy within {timeout_s:.0f}s (see {proc.log_file})"
    )


def _selected(settings: Settings, only: Iterable[str] | None, with_vllm: bool) -> list[Component]:
    comps = components(settings, with_vllm)
    return comps if only is None else [c for c in comps if c.name in set(only)]


async def up(
    settings: Settings,
    on_step: Callable[[str], None] = lambda _: None,
    only: Iterable[str] | None = None,
    with_vllm: bool = False,
) -> None:
    for comp in _selected(settings, only, with_vllm):
        proc = _proc(settings, comp)
        if proc.pid() is not None:
            on_step(f"{comp.name}: already running (pid {proc.pid()})")
        else:
            for port in comp.ports:
                if not port_is_free(settings.infra.host, port):
                    raise InfraError(
                        f"port {port} on {settings.infra.host} is taken by another process; "
                        f"stop it or choose other ports (WEBGYM_INFRA__*_PORT) for {comp.name}"
                    )
            on_step(f"{comp.name}: preparing and starting")
            await asyncio.to_thread(comp.start, proc)
        timeout = settings.vllm.start_timeout_s if comp.name == "vllm" else (
            settings.infra.start_timeout_s
        )
        await wait_healthy(comp, proc, timeout)
        if comp.after_start is not None:
            await comp.after_start()
        on_step(f"{comp.name}: healthy at {comp.address}")


async def status(settings: Settings) -> list[ComponentStatus]:
    out = []
    for comp in components(settings):
        proc = _proc(settings, comp)
        pid = proc.pid()
        ok = pid is not None and await comp.healthy()
        out.append(ComponentStatus(comp.name, comp.address, comp.version(), pid, ok))
    return out


def down(settings: Settings) -> list[str]:
    stopped = []
    for comp in reversed(components(settings, with_vllm=True)):
        if _proc(settings, comp).stop(settings.infra.stop_timeout_s):
            stopped.append(comp.name)
    return stopped


def listening_ports(settings: Settings) -> list[int]:
    return [
        port
        for comp in components(settings, with_vllm=True)
        for port in comp.ports
        if port_is_listening(settings.infra.host, port)
    ]
