"""Bad input at volume: malformed events written straight to the topics, and their fate.

Three classes per topic, interleaved with a good iteration:
- garbage: random bytes (empty, short, long, and the Avro magic with an unknown fingerprint);
- wrong type: valid Avro of an event type that does not belong on the topic;
- absurd: the topic's own event type, valid by its schema, with values no process should act
  on: unknown episode ids, negative and huge steps, 10 MB strings (zstd makes the repeated
  ones small on the wire; a few incompressible 10 MB ones must be refused by the producer or
  the broker, which is a refusal with a reason).
Each written record is remembered by (topic, partition, offset); `fate()` says which ones
reached the DLQ (with a reason) and which nobody accounted for.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from aiokafka import AIOKafkaProducer

from tests.factories import sample_event
from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.events import Event, utc_now
from webgym_common.topics import Topic, topic_name

TEN_MB = 10 * 1024 * 1024
HUGE = 2**31 - 1  # the largest Avro int
# The topics a bad event can arrive on, and the event type that belongs there.
OWN_TYPE = {
    Topic.EPISODES: "EpisodeRequested",
    Topic.OBSERVATIONS: "StepObserved",
    Topic.ACTIONS: "ActionChosen",
    Topic.EPISODES_COMPLETED: "EpisodeCompleted",
    Topic.EPISODES_SCORED: "EpisodeScored",
    Topic.CONTROL: "CancelEpisode",
}
# A request with absurd values would be a real request (a worker must run it): not injected.
NO_ABSURD = {Topic.EPISODES}


@dataclass
class Injection:
    written: dict[tuple[str, int, int], str] = field(default_factory=dict)  # -> class
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # topic, class, reason

    def keys(self) -> set[tuple[str, int, int]]:
        return set(self.written)


def garbage(rng: random.Random, i: int) -> bytes:
    shapes: list[Callable[[], bytes]] = [
        lambda: b"",
        lambda: rng.randbytes(rng.randint(1, 40)),
        lambda: rng.randbytes(rng.randint(200, 4000)),
        lambda: b"\xc3\x01" + rng.randbytes(8) + rng.randbytes(30),  # magic, unknown schema
        lambda: b'{"episode_id": "json-not-avro"}',
    ]
    return shapes[i % len(shapes)]()


def wrong_type(topic: Topic, i: int) -> Event:
    names = [n for n in ("TaskHistory", "ModelVersion", "RolloutMetrics", "DomainBlocked")
             if n != OWN_TYPE[topic]]
    return sample_event(names[i % len(names)])


def absurd(topic: Topic, i: int, rng: random.Random) -> tuple[Event, bool]:
    """An event of the topic's own type with absurd values; True if it is a 10 MB one."""
    ev = sample_event(OWN_TYPE[topic])
    eid = f"bad-{rng.getrandbits(48):012x}"
    update: dict = {}
    if "episode_id" in type(ev).model_fields:
        update["episode_id"] = eid
    if "task_id" in type(ev).model_fields:
        update["task_id"] = f"bad-task-{i % 7}"
    for name in ("step", "steps"):
        if name in type(ev).model_fields:
            update[name] = (-1, -HUGE, HUGE, 0)[i % 4]
    big = i % 25 == 24
    if big:  # half compress to almost nothing, half (random base64) stay above 8 MB
        text = ("x" * TEN_MB) if i % 50 == 49 else base64.b64encode(
            rng.randbytes(TEN_MB)).decode()
        for name in ("accessibility_tree", "raw_response", "reason", "evaluation", "answer"):
            if name in type(ev).model_fields:
                update[name] = text
                break
    if "deadline" in type(ev).model_fields:
        update["deadline"] = utc_now() - timedelta(days=1)
    return ev.model_copy(update=update), big


def producer(settings: Settings) -> AIOKafkaProducer:
    # Above the broker's 8 MB message limit on purpose: the broker refuses what is too big.
    return AIOKafkaProducer(
        bootstrap_servers=settings.kafka.bootstrap_servers, client_id="chaos-bad-input",
        acks="all", compression_type="zstd", max_request_size=24 * 1024 * 1024,
        request_timeout_ms=30_000)


async def inject(settings: Settings, topics: list[Topic], per_topic: int, seed: int,
                 pause_s: float = 0.0) -> Injection:
    """Write `per_topic` bad records to each topic (a third of each class, interleaved)."""
    rng = random.Random(seed)
    codec = Codec()
    out = Injection()
    p = producer(settings)
    await asyncio.wait_for(p.start(), 30)
    try:
        for i in range(per_topic):
            for topic in topics:
                name = topic_name(settings.kafka, topic)
                klass = ("garbage", "wrong type", "absurd")[i % 3]
                if klass == "absurd" and topic in NO_ABSURD:
                    klass = "garbage"
                key = f"bad-{i}".encode()
                if klass == "garbage":
                    value = garbage(rng, i)
                elif klass == "wrong type":
                    value = codec.encode(wrong_type(topic, i))
                else:
                    ev, big = absurd(topic, i, rng)
                    value = codec.encode(ev)
                    klass = "absurd (10 MB)" if big else "absurd"
                try:
                    meta = await asyncio.wait_for(p.send_and_wait(name, value, key=key), 60)
                except Exception as err:  # too large for the producer or the broker
                    out.refused.append((topic.value, klass, f"{type(err).__name__}: {err}"))
                    continue
                out.written[(name, meta.partition, meta.offset)] = klass
            if pause_s:
                await asyncio.sleep(pause_s)
    finally:
        await asyncio.wait_for(p.stop(), 30)
    return out


@dataclass
class Fate:
    dead_lettered: Counter[str]  # class -> records with at least one dead letter
    unaccounted: Counter[str]  # class -> records nobody dead-lettered
    refused: Counter[str]
    reasonless: int  # dead letters with an empty error

    def describe(self) -> str:
        def fmt(c: Counter[str]) -> str:
            return ", ".join(f"{n} {k}" for k, n in sorted(c.items())) or "0"

        return (f"bad input: dead-lettered {fmt(self.dead_lettered)}; refused "
                f"{fmt(self.refused)}; unaccounted {fmt(self.unaccounted)}")


def fate(injection: Injection, letters: list[tuple[str, int, int, str]]) -> Fate:
    """Which injected records reached the DLQ; `letters`: (topic, partition, offset, error)."""
    reasons = {(t, p, o): e for t, p, o, e in letters}
    dead, lost = Counter[str](), Counter[str]()
    for where, klass in injection.written.items():
        (dead if where in reasons else lost)[klass] += 1
    return Fate(dead, lost, Counter(k for _, k, _ in injection.refused),
                sum(1 for w in injection.written if w in reasons and not reasons[w].strip()))
