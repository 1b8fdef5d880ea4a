"""A 3-broker KRaft cluster (`infra.brokers` = 3): one broker SIGKILLed under load loses nothing.

The cluster, MinIO and the sandbox run on their own ports in a temporary directory.
Outcomes are counted from the topics themselves (unique keys and episode ids read back),
never from the project's own metrics.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from harness.launch import BrowserWorkerProcess, PipelineProcess
from harness.sandbox_tasks import short_train_tasks
from infra import kafka_broker, stack
from infra.procs import ManagedProcess, free_port, free_port_block
from producers.catalog import load_tasks
from producers.controller.rollout import run_iteration
from webgym_common.choices import SamplingStrategy
from webgym_common.config import InfraSettings, Settings, load_settings
from webgym_common.events import EpisodeCompleted, EpisodeRequested, EpisodeScored
from webgym_common.stream.admin import admin_client, create_topics, describe_topic_configs
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Topic, topic_name

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
RECORDS = 3000
EPISODES = 24  # the iteration's episodes, over the short train tasks


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Three Kafka nodes (each broker + controller), MinIO and the sandbox web."""
    base = free_port_block(6)
    settings = load_settings(
        infra={"home": InfraSettings().home, "data_dir": str(tmp_path_factory.mktemp("cluster")),
               "brokers": 3, "kafka_port": base, "kafka_controller_port": base + 1,
               "minio_port": free_port(), "minio_console_port": free_port(),
               "sandbox_port": free_port()},
        kafka={"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "partitions": 4},
    )
    assert settings.kafka.replication_factor == 3
    assert len(settings.kafka.bootstrap_servers.split(",")) == 3
    try:
        asyncio.run(stack.up(settings))
        yield settings
    finally:
        stack.down(settings)


def with_prefix(settings: Settings) -> Settings:
    kafka = settings.kafka.model_copy(update={"topic_prefix": f"t{uuid.uuid4().hex[:10]}"})
    return settings.model_copy(update={"kafka": kafka})


async def leader_of(settings: Settings, topic: str, partition: int = 0) -> int:
    admin = admin_client(settings)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return next(p["leader"] for p in described["partitions"] if p["partition"] == partition)


async def replicas(settings: Settings, topic: str, timeout_s: float = 30.0) -> list[int]:
    """Replica counts per partition, once the broker asked has the topic's metadata (each
    broker's metadata cache catches up with the controller a moment after a create)."""
    admin = admin_client(settings)
    await admin.start()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                (described,) = await admin.describe_topics([topic])
                if len(described["partitions"]) >= settings.kafka.partitions:
                    break
                await asyncio.sleep(0.5)
    finally:
        await admin.close()
    return sorted(len(p["replicas"]) for p in described["partitions"])


def kill_node(settings: Settings, node_id: int) -> None:
    """SIGKILL one Kafka node: no controlled shutdown, no leadership hand-over."""
    node = kafka_broker.nodes(settings.infra)[node_id - 1]
    pid = ManagedProcess(node.name, settings.infra.data_dir).pid()
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)


async def read_topic(settings: Settings, topic: str) -> list[bytes]:
    """Every committed value in `topic`, from the beginning to the end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers,
                                isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        if not parts:
            await consumer._client.force_metadata_update()
            parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        end = await consumer.end_offsets(parts)
        values: list[bytes] = []
        async with asyncio.timeout(120):
            while [tp for tp in parts if await consumer.position(tp) < end[tp]]:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    values += [r.value for r in records if r.value is not None]
        return values
    finally:
        await consumer.stop()


async def consume_group(settings: Settings, topic: str, group: str, seen: list[bytes],
                        stop: asyncio.Event) -> None:
    """One member of a consumer group: commits after each batch (at least once)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=settings.kafka.bootstrap_servers,
                                group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level="read_committed",
                                session_timeout_ms=6000, heartbeat_interval_ms=1000)
    await consumer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                seen.extend(r.value for r in records if r.value is not None)
            if batch:
                try:
                    await consumer.commit()
                except KafkaError:
                    pass  # a rebalance or a coordinator move: the next commit covers it
    finally:
        await consumer.stop()


async def test_idempotent_writes_and_a_group_lose_and_duplicate_nothing_when_a_broker_dies(
    cluster: Settings,
) -> None:
    s = with_prefix(cluster)
    await create_topics(s)
    topic = topic_name(s.kafka, Topic.EPISODES)
    assert await replicas(s, topic) == [3] * s.kafka.partitions
    assert (await describe_topic_configs(s, [topic]))[topic]["min.insync.replicas"] == "2"

    seen: list[bytes] = []
    stop = asyncio.Event()
    group = f"{s.kafka.topic_prefix}-cluster-test"
    members = [asyncio.create_task(consume_group(s, topic, group, seen, stop)) for _ in range(2)]
    producer = AIOKafkaProducer(bootstrap_servers=s.kafka.bootstrap_servers, acks="all",
                                enable_idempotence=True, request_timeout_ms=30000)
    await producer.start()
    victim = await leader_of(s, topic)
    try:
        for start in range(0, RECORDS, 100):
            if start == RECORDS // 3:
                kill_node(s, victim)
            sends = [await producer.send(topic, key=str(i).encode(), value=str(i).encode())
                     for i in range(start, start + 100)]
            await asyncio.gather(*sends)  # every one acknowledged by 2 of 3 replicas
    finally:
        await producer.stop()
    wanted = {str(i).encode() for i in range(RECORDS)}
    async with asyncio.timeout(180):
        while not wanted <= set(seen):  # noqa: ASYNC110 (the members fill `seen`)
            await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*members)

    written = await read_topic(s, topic)
    assert len(written) == RECORDS and set(written) == wanted  # none lost, none twice
    assert await leader_of(s, topic) != victim

    # The killed node comes back by `infra up` (only what is missing starts) and rejoins.
    # `up` waits for that node alone; the others list it once their metadata catches up.
    await stack.up(s)
    assert await all_healthy_within(s, 60.0)


async def all_healthy_within(settings: Settings, timeout_s: float) -> bool:
    """Every component is healthy within `timeout_s`; else the unhealthy ones are printed."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        sick = [r.name for r in await stack.status(settings) if not r.healthy]
        if not sick:
            return True
        if asyncio.get_running_loop().time() > deadline:
            print(f"not healthy after {timeout_s:.0f} s: {sick}")
            return False
        await asyncio.sleep(1.0)


def fast(settings: Settings) -> Settings:
    rollout_cfg = settings.rollout.model_copy(update={
        "completion_threshold": 1.0, "grace_period_s": 60.0, "cancel_wait_s": 60.0,
        "score_wait_s": 180.0, "task_timeout_minutes": 10.0, "seed": 11,
        "strategy": SamplingStrategy.UNIFORM})
    browser = settings.browser.model_copy(update={
        "settle_s": 0.2, "wait_action_s": 1.0, "observe_timeout_s": 8.0,
        "action_timeout_s": 5.0, "navigation_timeout_s": 8.0})
    return settings.model_copy(update={"rollout": rollout_cfg, "browser": browser})


async def test_an_iteration_on_the_cluster_survives_a_broker_killed_mid_way(
    cluster: Settings, tmp_path: Path,
) -> None:
    s = fast(with_prefix(cluster))
    await create_topics(s)
    procs = [BrowserWorkerProcess(s, 4, tmp_path / "browser.log"),
             PipelineProcess(s, ["worker", "policy", "--kind", "teacher"], tmp_path / "policy.log"),
             *(PipelineProcess(s, ["worker", name], tmp_path / f"{name}.log")
               for name in ("evaluator", "history"))]
    assert s.evaluator.processing_guarantee == "exactly_once"  # faust transactions
    try:
        async with asyncio.timeout(120):
            while not all(p.is_ready() for p in procs):  # noqa: ASYNC110 (ready files)
                assert all(p.proc.poll() is None for p in procs), [p.log_text()[-800:]
                                                                    for p in procs]
                await asyncio.sleep(0.5)
        tasks = short_train_tasks()
        assert len(tasks) >= EPISODES // 2  # a task is drawn again once all were drawn
        (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
        async with EventProducer(s, client_id="test") as producer:
            assert not (await load_tasks(tmp_path / "tasks.jsonl", producer)).bad
            quarter = asyncio.Event()
            iteration = asyncio.create_task(run_iteration(
                s, producer, 0, "train", EPISODES,
                on_update=lambda st: quarter.set() if len(st.completed) >= 6 else None))
            async with asyncio.timeout(300):
                await quarter.wait()
            victim = await leader_of(s, topic_name(s.kafka, Topic.OBSERVATIONS))
            kill_node(s, victim)
            async with asyncio.timeout(900):
                state, closed = await iteration
            assert all(p.proc.poll() is None for p in procs)  # the clients rode it out

            requested, completed, scored = await count_episodes(s, producer)
    finally:
        for p in procs:
            p.stop()
    assert closed.requested == EPISODES and closed.completed == EPISODES, (
        closed, [p.log_text()[-1500:] for p in procs])
    assert len(requested) == EPISODES and set(requested.values()) == {1}, requested
    assert completed == requested, "each episode completed exactly once"
    assert scored == requested, "each episode scored exactly once"
    await stack.up(s)  # the killed node back, for whatever runs next


async def count_episodes(s: Settings, producer: EventProducer) -> tuple[Counter, ...]:
    """Per episode id: EpisodeRequested, EpisodeCompleted, EpisodeScored events in the topics."""
    out = []
    for topic, kind in ((Topic.EPISODES, EpisodeRequested),
                        (Topic.EPISODES_COMPLETED, EpisodeCompleted),
                        (Topic.EPISODES_SCORED, EpisodeScored)):
        async with EventConsumer(s, [topic], None, producer) as c:
            out.append(Counter(r.event.episode_id for r in await read_to_end(c)
                               if isinstance(r.event, kind)))
    return tuple(out)
