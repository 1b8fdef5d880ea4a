"""A sample event round trip through the running stack: blob to S3, event through Kafka."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from webgym_common.bus import EventConsumer, EventProducer
from webgym_common.config import Settings
from webgym_common.events import Mark, StepObserved, Viewport
from webgym_common.objectstore import ObjectStore
from webgym_common.topics import Topic


@dataclass(frozen=True)
class RoundTrip:
    topic: str
    partition: int
    offset: int
    screenshot_uri: str
    latency_ms: float


async def sample_round_trip(settings: Settings, timeout_s: float = 60.0) -> RoundTrip:
    store = ObjectStore(settings.s3)
    await store.ensure_bucket()
    episode_id = f"smoke-{uuid.uuid4().hex[:12]}"
    # A deterministic stand-in for a screenshot; real ones come from browser workers.
    blob = await store.put_blob(f"webgym smoke {episode_id}".encode(), "text/plain")
    event = StepObserved(
        episode_id=episode_id,
        task_id="smoke",
        step=0,
        url="http://127.0.0.1/smoke",
        title="smoke test",
        viewport=Viewport(width=1280, height=720),
        screenshot_uri=blob.uri,
        screenshot_sha256=blob.sha256,
        screenshot_format="txt",
        marks=[Mark(index=1, ref="e1", role="button", name="Go", x=1, y=2, width=3, height=4)],
    )
    async with EventProducer(settings, client_id="webgym-smoke") as producer:
        group = f"webgym-smoke-{uuid.uuid4().hex[:8]}"
        async with EventConsumer(settings, [Topic.OBSERVATIONS], group, producer) as consumer:
            started = time.perf_counter()
            await producer.publish(Topic.OBSERVATIONS, episode_id, event)
            async with asyncio.timeout(timeout_s):
                async for got in consumer.events():
                    if got.event.event_id != event.event_id:
                        await consumer.commit(got)
                        continue
                    latency = (time.perf_counter() - started) * 1000
                    await consumer.commit(got)
                    data = await store.get_blob(got.event.screenshot_uri)
                    if got.event != event or data != f"webgym smoke {episode_id}".encode():
                        raise RuntimeError("round trip returned something else than was sent")
                    return RoundTrip(got.topic, got.partition, got.offset, blob.uri, latency)
    raise RuntimeError("consumer stopped before the event came back")
