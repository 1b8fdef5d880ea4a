"""`webgym infra up | status | down`: the embedded stack as one unit.

Components start in order (the Kafka nodes, MinIO, the sandbox web, vLLM when asked
for), then each is health-checked with a timeout; `down` stops them in reverse.
`infra.brokers` > 1 makes Kafka a KRaft cluster of that many nodes (infra.kafka_broker).
Nothing starts when the settings would publish the stack to the network with credentials
nobody chose, or ask the embedded Kafka for TLS or SASL (infra.exposure). MinIO and vLLM
take the credentials of the settings: unless given explicitly, the ones generated for the
data dir (webgym_common.config.stack_secrets).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from infra import exposure, kafka_broker, minio_server, vllm_server
from infra.procs import InfraError, ManagedProcess, port_is_free, port_is_listening
from webgym_common.config import Settings, stack_secrets


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


def components(
    settings: Settings, with_vllm: bool | None = None, brokers: int | None = None
) -> list[Component]:
    """The stack's components; vLLM when asked for (None: when it is running).

    One Kafka component per node: `brokers` of them (None: as many as `up` last started,
    else the settings' `infra.brokers`), so `status` and `down` find a whole cluster.
    """
    infra, s3 = settings.infra, settings.s3
    cluster = kafka_broker.nodes(infra, brokers or kafka_broker.recorded_brokers(infra))
    comps = [_kafka_component(settings, node, len(cluster)) for node in cluster]
    comps.append(
        Component(
            name="minio",
            ports=[infra.minio_port, infra.minio_console_port],
            address=f"http://{s3.endpoint} (console :{infra.minio_console_port})",
            version=lambda: f"MinIO {infra.minio_version} (go install)",
            start=lambda proc: minio_server.start(infra, s3, proc),
            healthy=lambda: minio_server.healthy(s3.endpoint),
            after_start=lambda: minio_server.ensure_bucket(s3, infra.data_dir),
        )
    )
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


def _kafka_component(settings: Settings, node: kafka_broker.Node, size: int) -> Component:
    infra = settings.infra
    address = f"{infra.host}:{node.port}"
    kind = "KRaft" if size == 1 else f"KRaft, node {node.node_id} of {size}"
    cluster_infra = infra.model_copy(update={"brokers": size})
    return Component(
        name=node.name,
        ports=[node.port, node.controller_port],
        address=address,
        version=lambda: f"Apache Kafka {infra.kafka_version} ({kind})",
        start=lambda proc: kafka_broker.start(cluster_infra, node, proc),
        healthy=lambda: kafka_broker.healthy(address, node_id=node.node_id),
    )


def _sandbox_component(settings: Settings) -> Component | None:
    import importlib.util

    import httpx

    if importlib.util.find_spec("environments.__main__") is None:
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
            [sys.executable, "-m", "environments", "--host", infra.host,
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
    comps = components(settings, with_vllm, brokers=settings.infra.brokers)
    return comps if only is None else [c for c in comps if c.name in set(only)]


async def up(
    settings: Settings,
    on_step: Callable[[str], None] = lambda _: None,
    only: Iterable[str] | None = None,
    with_vllm: bool = False,
) -> None:
    """Start what is not running, then wait for each component in order.

    Everything starts before anything is waited for: a Kafka node cannot become healthy
    until a majority of the controller quorum runs.
    """
    _refuse_another_layout(settings)
    selected = _selected(settings, only, with_vllm)
    _refuse_exposure(settings, [c.name for c in selected])
    for comp in selected:
        proc = _proc(settings, comp)
        if proc.pid() is not None:
            on_step(f"{comp.name}: already running (pid {proc.pid()})")
            continue
        for port in comp.ports:
            if not port_is_free(settings.infra.host, port):
                raise InfraError(
                    f"port {port} on {settings.infra.host} is taken by another process; "
                    f"stop it or choose other ports (WEBGYM_INFRA__*_PORT) for {comp.name}"
                )
        on_step(f"{comp.name}: preparing and starting")
        if comp.name.startswith("kafka"):
            kafka_broker.record_layout(settings.infra)
        await asyncio.to_thread(comp.start, proc)
    for comp in selected:
        timeout = settings.vllm.start_timeout_s if comp.name == "vllm" else (
            settings.infra.start_timeout_s
        )
        await wait_healthy(comp, _proc(settings, comp), timeout)
        if comp.after_start is not None:
            await comp.after_start()
        on_step(f"{comp.name}: healthy at {comp.address}")


def _refuse_another_layout(settings: Settings) -> None:
    """A cluster of another size running from this data dir must be stopped first."""
    infra = settings.infra
    recorded = kafka_broker.recorded_brokers(infra)
    if recorded is None or recorded == infra.brokers:
        return
    running = [n.name for n in kafka_broker.nodes(infra, recorded)
               if ManagedProcess(n.name, infra.data_dir).pid() is not None]
    if running:
        raise InfraError(
            f"a {recorded}-broker Kafka runs from {infra.data_dir} ({', '.join(running)}), "
            f"not the {infra.brokers} asked for: `webgym infra down` first"
        )


def _refuse_exposure(settings: Settings, names: list[str]) -> None:
    """One clear error, before anything starts, for what infra.exposure refuses."""
    if problem := exposure.kafka_protocol_problem(settings, names):
        raise InfraError(problem)
    generated = stack_secrets.read(settings.infra.data_dir)
    if problems := exposure.credential_problems(settings, generated, names):
        raise InfraError(exposure.refusal(settings, problems))


async def status(settings: Settings) -> list[ComponentStatus]:
    out = []
    for comp in components(settings):
        proc = _proc(settings, comp)
        pid = proc.pid()
        ok = pid is not None and await comp.healthy()
        out.append(ComponentStatus(comp.name, comp.address, comp.version(), pid, ok))
    return out


def down(settings: Settings) -> list[str]:
    """Stop every component in reverse order; the Kafka nodes together, last."""
    comps = list(reversed(components(settings, with_vllm=True)))
    others = [c for c in comps if not c.name.startswith("kafka")]
    stopped = [c.name for c in others if _proc(settings, c).stop(settings.infra.stop_timeout_s)]
    # Together: a node stopping after the others lost the quorum would wait for it in vain.
    kafka = [c for c in comps if c.name.startswith("kafka")]
    if kafka:
        with ThreadPoolExecutor(len(kafka)) as pool:
            ran = list(pool.map(
                lambda c: _proc(settings, c).stop(settings.infra.stop_timeout_s), kafka))
        stopped += [c.name for c, r in zip(kafka, ran, strict=True) if r]
    return stopped


def listening_ports(settings: Settings) -> list[int]:
    return [
        port
        for comp in components(settings, with_vllm=True)
        for port in comp.ports
        if port_is_listening(settings.infra.host, port)
    ]
