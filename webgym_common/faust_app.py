"""The one way this project writes a faust app: broker settings, topics, tables, typed events.

Which processes are faust apps: those that join several co-partitioned input topics
into keyed table state (the policy, the evaluator). Single-input folds whose state
is their own compacted output topic (history, metrics), producers and plain readers
use webgym_common.bus instead.

Values are our Avro events, read and written by the faust codec registered here as
"webgym" (wrapping webgym_common.codec.Codec), so agents iterate typed events. A
codec that raises inside faust makes faust ack the message and throw the error into
the agent (which stops it), so the codec never raises: bytes that are not an event
decode to `Undecodable(error)`, and `typed_events` dead-letters those (with the
reason) and yields the rest. Topics and tables take their names and partition counts
from the registry (webgym_common.topics), which also creates faust's internal topics:
the apps themselves never create a topic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import faust
from faust.serializers import codecs

from webgym_common.bus import SourceRecord, dead_letter
from webgym_common.codec import Codec, DecodeError
from webgym_common.config import KafkaSettings, Settings
from webgym_common.events import Event
from webgym_common.lifecycle import mark_ready
from webgym_common.topics import (
    Group,
    StateTable,
    Topic,
    changelog_topic_name,
    group_id,
    table_partitions,
    topic_specs,
)

E = TypeVar("E", bound=Event)
EVENT_SERIALIZER = "webgym"
EMPTY_VALUE = "empty message (tombstone or null value)"


@dataclass(frozen=True)
class Undecodable:
    """What the "webgym" codec gives for bytes that are not one of our events."""

    error: str


class EventCodec(codecs.Codec):
    """Faust codec for our events; never raises on read (see the module docstring)."""

    def __init__(self, codec: Codec | None = None) -> None:
        super().__init__()
        self.codec = codec or Codec()

    def _loads(self, s: bytes) -> Event | Undecodable:
        try:
            return self.codec.decode(s)
        except DecodeError as err:
            return Undecodable(str(err))

    def _dumps(self, s: Any) -> bytes:
        return self.codec.encode(s)


codecs.register(EVENT_SERIALIZER, EventCodec())


def make_faust_app(settings: Settings, group: Group, **overrides: Any) -> faust.App:
    """The faust app `group_id(kafka, group)`, memory stores rebuilt from their changelogs."""
    k = settings.kafka
    options: dict[str, Any] = {
        "broker": f"kafka://{k.bootstrap_servers}",
        "store": "memory://",
        "topic_partitions": k.partitions,
        "topic_replication_factor": k.replication_factor,
        # `webgym topics create` makes every topic, faust's internal ones included.
        "topic_allow_declare": False,
        "web_enabled": False,
        "consumer_auto_offset_reset": "earliest",
        "broker_session_timeout": k.session_timeout_ms / 1000,
        "broker_heartbeat_interval": k.heartbeat_interval_ms / 1000,
        "producer_acks": -1,
        "producer_compression_type": None if k.compression == "none" else k.compression,
        "key_serializer": "raw",
        "value_serializer": EVENT_SERIALIZER,
    }
    options.update(overrides)
    app = faust.App(group_id(k, group), **options)
    mark_ready_when_recovered(app)
    return app


def mark_ready_when_recovered(app: faust.App) -> None:
    """Write the ready file once partitions are assigned and tables recovered (first time)."""
    marked = False

    @app.on_rebalance_complete.connect
    async def ready(*args: Any, **kwargs: Any) -> None:
        nonlocal marked
        if not marked:
            marked = True
            mark_ready(f"{app.conf.id}: partitions assigned, tables recovered")


def faust_topic(app: faust.App, kafka: KafkaSettings, topic: Topic) -> faust.TopicT:
    """A registry topic as faust sees it: typed event values, bytes keys."""
    spec = topic_specs(kafka)[topic]
    return app.topic(spec.name, partitions=spec.partitions, key_type=bytes,
                     value_serializer=EVENT_SERIALIZER)


def faust_table(app: faust.App, kafka: KafkaSettings, table: StateTable) -> faust.Table:
    """A registry table: JSON keys and values (they must read back the same after recovery)."""
    made = cast(faust.Table, app.Table(  # app.Table makes a faust.Table (typed as TableT)
        table.value, partitions=table_partitions(kafka, table), schema=faust.Schema(
            key_type=str, key_serializer="json", value_serializer="json")))
    # The registry created the changelog under the name it derives: faust must use that one.
    if (name := made.changelog_topic.get_topic_name()) != changelog_topic_name(kafka, table):
        raise ValueError(f"table {table} of app {app.conf.id} would log to {name}, "
                         f"not to the registry's {changelog_topic_name(kafka, table)}")
    return made


def decode_error(event: faust.EventT) -> str | None:
    """Why this event's value is not one of our events (None: it is one)."""
    if event.value is None:
        return EMPTY_VALUE
    if isinstance(event.value, Undecodable):
        return event.value.error
    return None


DeadLetters = Callable[[SourceRecord, str], Awaitable[None]]


def dlq_sender(app: faust.App, kafka: KafkaSettings) -> DeadLetters:
    """`await send(message, error)`: dead-letter a message and wait for the broker's ack."""
    dlq = faust_topic(app, kafka, Topic.DLQ)

    async def send(message: SourceRecord, error: str) -> None:
        letter = dead_letter(message, error, app.conf.id)
        await (await dlq.send(key=letter.source_topic.encode(), value=letter))

    return send


async def typed_events(
    stream: faust.StreamT, dead_letters: DeadLetters, of: type[E]
) -> AsyncIterator[tuple[faust.EventT, E]]:
    """(faust event, our event) for each event of type `of`.

    Messages that are not events are dead-lettered; events of other types are skipped.
    """
    async for event in stream.events():
        error = decode_error(event)
        if error is not None:
            await dead_letters(event.message, error)
        elif isinstance(event.value, of):
            yield event, event.value
