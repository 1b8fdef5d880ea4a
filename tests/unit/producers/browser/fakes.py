"""Test doubles for a browser worker's dependencies: Kafka's producer, a browser that hangs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tests.factories import sample_event
from webgym_common.choices import Driver
from webgym_common.codec import Codec
from webgym_common.config import Settings, load_settings
from webgym_common.events import EpisodeRequested, Event, utc_now
from webgym_common.topics import Topic, topic_name


class FakeKafka:
    """aiokafka's producer, as `deliver` uses it: `send` returns the future of the ack.

    `failures` is a list of what the next sends do: an exception to fail with, "hang" for
    an ack that never comes, ("raise", exception) for a send refused at once (aiokafka's
    own checks, such as max_request_size); then sends succeed.
    """

    def __init__(self, failures: list[Any] | None = None) -> None:
        self.failures = list(failures or [])
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.acked: list[tuple[str, bytes, bytes]] = []

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future:
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.sent.append((topic, value, key))
        what = self.failures.pop(0) if self.failures else None
        if isinstance(what, tuple) and what[0] == "raise":
            raise what[1]
        if isinstance(what, BaseException):
            fut.set_exception(what)
        elif what != "hang":
            self.acked.append((topic, value, key))
            fut.set_result(None)
        return fut

    async def flush(self) -> None:
        return None


class FakeProducer:
    """EventProducer's surface over a FakeKafka; decodes what was acked."""

    def __init__(self, settings: Settings | None = None, kafka: FakeKafka | None = None,
                 timeout_ms: int = 1000) -> None:
        base = settings or load_settings()
        self.settings = base.model_copy(update={
            "kafka": base.kafka.model_copy(update={"request_timeout_ms": timeout_ms})})
        self.codec = Codec()
        self.producer = kafka or FakeKafka()

    def topic(self, topic: Topic) -> str:
        return topic_name(self.settings.kafka, topic)

    def published(self, topic: Topic) -> list[Event]:
        name = self.topic(topic)
        return [self.codec.decode(v) for t, v, _ in self.producer.acked if t == name]


def request(episode_id: str = "ep-1", deadline_s: float = 60, website: str = "{sandbox}/wiki/",
            max_steps: int = 10) -> EpisodeRequested:
    base = sample_event("EpisodeRequested")
    assert isinstance(base, EpisodeRequested)
    task = base.task.model_copy(update={"website": website})
    return base.model_copy(update={
        "episode_id": episode_id, "task": task, "max_steps": max_steps,
        "deadline": utc_now() + timedelta(seconds=deadline_s), "driver": Driver.POLICY,
    })


class HangingPool:
    """A BrowserPool whose new contexts never come (a browser that does not answer)."""

    def __init__(self, on_new_context: Callable[[], None] = lambda: None) -> None:
        self.on_new_context = on_new_context
        self.restarts: list[str] = []

    async def new_context(self) -> Any:
        self.on_new_context()
        await asyncio.Event().wait()

    async def restart(self, reason: str) -> None:
        self.restarts.append(reason)


class FailingPool(HangingPool):
    """A BrowserPool whose new_context raises `error`."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def new_context(self) -> Any:
        raise self.error
