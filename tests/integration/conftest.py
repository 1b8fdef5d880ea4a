"""Integration fixtures: one real embedded stack (Kafka + MinIO) per test session.

The stack binds free ports and keeps its data in a temporary directory, while the
jar and binary caches are the ordinary ones (~/.cache/webgym or WEBGYM_HOME), so a
developer's own `webgym infra up` is never disturbed. Each test gets its own topic
prefix, so tests never see each other's events.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from harness.launch import BrowserWorkerProcess, PipelineProcess
from infra import stack
from infra.procs import free_port
from webgym_common.config import InfraSettings, Settings, load_settings
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer


def stack_settings(data_dir: str) -> Settings:
    return load_settings(
        infra={
            "home": InfraSettings().home,
            "data_dir": data_dir,
            "kafka_port": free_port(),
            "kafka_controller_port": free_port(),
            "minio_port": free_port(),
            "minio_console_port": free_port(),
            "sandbox_port": free_port(),
        },
        kafka={"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "partitions": 4},
    )


@pytest.fixture(scope="session")
def stack_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Kafka, MinIO and the sandbox web, really started, for the whole session."""
    settings = stack_settings(str(tmp_path_factory.mktemp("stack")))
    try:
        asyncio.run(stack.up(settings))
        yield settings
    finally:
        stack.down(settings)


@pytest_asyncio.fixture(loop_scope="session")
async def settings(stack_base: Settings) -> Settings:
    """Stack settings with a fresh topic prefix (so fresh consumer groups) whose topics exist."""
    prefix = f"t{uuid.uuid4().hex[:10]}"
    kafka = stack_base.kafka.model_copy(update={"topic_prefix": prefix})
    browser = stack_base.browser.model_copy(
        update={"settle_s": 0.2, "wait_action_s": 1.0, "observe_timeout_s": 8.0,
                "action_timeout_s": 5.0, "navigation_timeout_s": 8.0}
    )
    s = stack_base.model_copy(update={"kafka": kafka, "browser": browser})
    await create_topics(s)
    return s


@pytest.fixture(scope="session")
def vllm_base(stack_base: Settings) -> Iterator[Settings]:
    """A real vLLM OpenAI server on the CPU with SmolLM2-135M, for the whole session."""
    port = free_port()
    settings = stack_base.model_copy(update={
        "vllm": stack_base.vllm.model_copy(update={"port": port}),
        "policy": stack_base.policy.model_copy(
            update={"base_url": f"http://{stack_base.infra.host}:{port}/v1"}),
    })
    asyncio.run(stack.up(settings, only=["vllm"], with_vllm=True))
    yield settings
    # stack_base's teardown stops it with the rest (down() always includes vLLM).


@pytest.fixture
def start_policy(settings: Settings, tmp_path: Path) -> Iterator:
    """Start real `webgym worker policy` processes (kind: teacher or vllm)."""
    procs: list[PipelineProcess] = []

    def start(kind: str = "teacher", policy_base: Settings | None = None) -> PipelineProcess:
        s = settings
        if policy_base is not None:
            s = settings.model_copy(update={"policy": policy_base.policy, "vllm": policy_base.vllm})
        p = PipelineProcess(s, ["worker", "policy", "--kind", kind],
                            tmp_path / f"policy{len(procs)}.log")
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


@pytest.fixture
def start_worker(settings: Settings, tmp_path: Path) -> Iterator:
    workers: list[BrowserWorkerProcess] = []

    def start(contexts: int = 2) -> BrowserWorkerProcess:
        w = BrowserWorkerProcess(settings, contexts, tmp_path / f"worker{len(workers)}.log")
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.stop()


@pytest.fixture
def evaluator(settings: Settings, tmp_path: Path) -> Iterator[PipelineProcess]:
    """A real `webgym worker evaluator` process (tests that define their own keep theirs)."""
    proc = PipelineProcess(settings, ["worker", "evaluator"], tmp_path / "evaluator.log")
    yield proc
    proc.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def producer(settings: Settings) -> AsyncIterator[EventProducer]:
    async with EventProducer(settings, client_id="test") as p:
        yield p
