"""Topic administration: idempotent creation from the registry, config inspection.

`create_topics` makes every topic a process uses, faust's internal ones included
(topics.all_topic_specs): processes never create topics themselves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_fixed

from webgym_common.config import Settings
from webgym_common.stream.kafka_clients import security_options
from webgym_common.topics import TopicSpec, all_topic_specs, min_insync_replicas

TOPIC_ALREADY_EXISTS = 36  # Kafka protocol error code


@dataclass(frozen=True)
class TopicResult:
    name: str
    status: str  # "created", "exists" or "mismatch: ..."


def admin_client(settings: Settings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        request_timeout_ms=settings.kafka.request_timeout_ms,
        client_id="webgym-admin",
        **security_options(settings.kafka),
    )


@asynccontextmanager
async def started_admin(settings: Settings) -> AsyncIterator[AIOKafkaAdminClient]:
    """An admin client, started, closed when the block ends."""
    admin = admin_client(settings)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def create_topics(settings: Settings) -> list[TopicResult]:
    """Create every registry topic that is missing; report existing ones that differ."""
    specs = all_topic_specs(settings.kafka)
    admin = admin_client(settings)
    # The broker may still be electing its controller right after start.
    async for attempt in AsyncRetrying(
        stop=stop_after_delay(30), wait=wait_fixed(1), reraise=True,
        retry=retry_if_exception_type(Exception),
    ):
        with attempt:
            await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        created: set[str] = set()
        if missing:
            response = await admin.create_topics(
                [_new_topic(s, settings.kafka.replication_factor) for s in missing],
                timeout_ms=settings.kafka.request_timeout_ms,
            )
            for name, code, *message in response.topic_errors:
                if code == 0:
                    created.add(name)
                elif code != TOPIC_ALREADY_EXISTS:  # another process won the race: fine
                    raise RuntimeError(f"creating topic {name} failed: error {code} {message}")
        results = [TopicResult(n, "created") for n in sorted(created)]
        # Creation returns before every partition has a leader; wait so callers can use them.
        partitions = await _wait_for_leaders(admin, [s.name for s in specs])
        for s in specs:
            if s.name not in created:
                have = partitions.get(s.name)
                status = "exists" if have == s.partitions else (
                    f"mismatch: has {have} partitions, registry says {s.partitions}"
                )
                results.append(TopicResult(s.name, status))
        return results
    finally:
        await admin.close()


def _new_topic(spec: TopicSpec, replication: int) -> NewTopic:
    return NewTopic(
        name=spec.name,
        num_partitions=spec.partitions,
        replication_factor=replication,
        topic_configs={"min.insync.replicas": str(min_insync_replicas(replication)),
                       **spec.kafka_configs()},
    )


async def _wait_for_leaders(
    admin: AIOKafkaAdminClient, names: list[str], timeout_s: float = 30.0
) -> dict[str, int]:
    """Partition counts once every partition of every topic has a leader."""
    counts: dict[str, int] = {}
    async for attempt in AsyncRetrying(
        stop=stop_after_delay(timeout_s), wait=wait_fixed(0.2),
        retry=retry_if_exception_type(LookupError),
    ):
        with attempt:
            described = await admin.describe_topics(names)
            counts = {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0}
            led = all(p["leader"] >= 0 for t in described for p in t["partitions"])
            if set(counts) != set(names) or not led:
                raise LookupError("topics not ready yet")
    return counts


class TopicNotKnownYet(RuntimeError):
    """The broker asked has no metadata for the topic yet (it was created a moment ago)."""


async def describe_topic_configs(
    settings: Settings, names: list[str], wait_s: float = 30.0
) -> dict[str, dict[str, str]]:
    """Each topic's configs. A broker learns of a new topic from the controller a moment after
    the create returns, and until then answers with an error and no configs: asked again."""
    async for attempt in AsyncRetrying(stop=stop_after_delay(wait_s), wait=wait_fixed(0.5),
                                       retry=retry_if_exception_type(TopicNotKnownYet),
                                       reraise=True):
        with attempt:
            return await _describe_topic_configs_once(settings, names)
    raise AssertionError("unreachable: tenacity reraises")


async def _describe_topic_configs_once(
    settings: Settings, names: list[str]
) -> dict[str, dict[str, str]]:
    async with started_admin(settings) as admin:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n) for n in names]
        )
    out: dict[str, dict[str, str]] = {}
    for response in responses:
        for resource in response.resources:
            # (error_code, error_message, resource_type, resource_name, config_entries)
            error_code, error_message, name, entries = (
                resource[0], resource[1], resource[3], resource[4])
            if error_code:
                raise TopicNotKnownYet(f"{name}: error {error_code} {error_message}")
            out[name] = {entry[0]: entry[1] for entry in entries}
    return out


async def create_topic(settings: Settings, spec: TopicSpec) -> str:
    """One topic outside the registry (webgym reprocess's derived topics): "created" or "exists"
    (made before, by this or another process); returns once its partitions have leaders."""
    async with started_admin(settings) as admin:
        # Asked to create it straight away: listing every topic first costs a metadata
        # response for the whole cluster, decoded in Python (hundreds of ms on a busy one).
        status = "exists"
        response = await admin.create_topics(
            [_new_topic(spec, settings.kafka.replication_factor)],
            timeout_ms=settings.kafka.request_timeout_ms)
        for name, code, *message in response.topic_errors:
            if code == 0:
                status = "created"
            elif code != TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"creating topic {name} failed: error {code} {message}")
        await _wait_for_leaders(admin, [spec.name])
        return status


async def topic_names(settings: Settings) -> set[str]:
    """Every topic on the cluster."""
    async with started_admin(settings) as admin:
        return set(await admin.list_topics())


async def delete_topics(settings: Settings, names: Collection[str]) -> None:
    """Delete `names` (a bench's scratch topics: never the pipeline's own)."""
    if not names:
        return
    async with started_admin(settings) as admin:
        await admin.delete_topics(sorted(names), timeout_ms=settings.kafka.request_timeout_ms)
