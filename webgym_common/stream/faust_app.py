"""The one way this project writes a faust app: broker settings, topics, tables, typed events.

Which processes are faust apps: those that join several co-partitioned input topics
into keyed table state (the policy, the evaluator). Single-input folds whose state
is their own compacted output topic (history, metrics), producers and plain readers
use webgym_common.stream.bus instead.

Values are our Avro events, read and written by the faust codec registered here as
"webgym" (wrapping webgym_common.codec.Codec), so agents iterate typed events. A
codec that raises inside faust makes faust ack the message and throw the error into
the agent (which stops it), so the codec never raises: bytes that are not an event
decode to `Undecodable(error)`, and `ReliableApp.each` (reliable.py) dead-letters those
(with the reason) and hands the rest to its handler. Topics and tables take their names
and partition counts from the registry (webgym_common.topics), which also creates
faust's internal topics: the apps themselves never create a topic.

In-order acks (`InOrderAcks`): faust commits a partition up to the first gap in its
acked offsets but misses a gap right after the committed offset, so an agent with
several actors that acks offset 6 while 5 is still in flight commits past 5, and a
SIGKILL then loses 5. An agent with `concurrency > 1` iterates `stream.noack()` and
acks through `InOrderAcks`, which acks an event only once it and every event that
arrived before it on its partition are done (webgym_common.stream.offsets decides how far).
How a partition's reading restarts after a rebalance (faust's seek holes): faust_seeks.py.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import faust
from faust.serializers import codecs

from webgym_common.codec import Codec, DecodeError
from webgym_common.config import KafkaSettings, Settings
from webgym_common.events import Event
from webgym_common.lifecycle import mark_ready
from webgym_common.stream.deadletters import LetterIndex, SourceRecord, dead_letter
from webgym_common.stream.kafka_clients import tls_context
from webgym_common.stream.offsets import OffsetHolds
from webgym_common.topics import (
    Group,
    StateTable,
    Topic,
    changelog_topic_name,
    group_id,
    misplaced,
    table_partitions,
    topic_specs,
)

log = logging.getLogger(__name__)
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
    app_id = group_id(k, group)
    # faust's default ("<id>-data" in the working directory) litters wherever it starts, and
    # it makes only the last level of the directory.
    datadir = Path(settings.infra.data_dir) / "faust" / app_id
    datadir.parent.mkdir(parents=True, exist_ok=True)
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
        # The same record limit as the project's own producers (faust's default is 1 MB).
        "producer_max_request_size": k.max_request_size,
        "key_serializer": "raw",
        "value_serializer": EVENT_SERIALIZER,
        "datadir": str(datadir),
        # The same security settings as every other client of ours (kafka_clients.py).
        "broker_credentials": broker_credentials(k),
    }
    options.update(overrides)
    app = faust.App(app_id, **options)
    mark_ready_when_recovered(app)
    return app


def broker_credentials(kafka: KafkaSettings) -> faust.auth.Credentials | None:
    """faust's form of the kafka.security_* settings; None for PLAINTEXT. faust hands them
    to aiokafka as kafka_clients.security_options does for our own clients."""
    context = tls_context(kafka)
    if kafka.security_protocol.uses_sasl:
        return faust.SASLCredentials(username=kafka.sasl_username, password=kafka.sasl_password,
                                     ssl_context=context, mechanism=kafka.sasl_mechanism.value)
    if context is not None:
        return faust.SSLCredentials(context)
    return None


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


def changelog_record(table: faust.Table, key: str, value: Any) -> tuple[str, bytes, bytes | None]:
    """(topic, key, value) of the changelog record faust writes for `table[key] = value`
    (value None: a deletion), as `faust_table` tables encode them."""
    return (table.changelog_topic.get_topic_name(), codecs.dumps("json", key),
            None if value is None else codecs.dumps("json", value))


async def put_durably(app: faust.App, table: faust.Table, key: str, value: Any,
                      partition: int, timeout_s: float) -> bool:
    """`table[key] = value`, returning once the broker has acknowledged its changelog record.

    faust's own assignment sends the record later from a buffer, so a process killed a
    moment after it loses the write although what it did next (a publication, an ack)
    stands. Tables are co-partitioned with their sources: `partition` is the partition of
    the event being handled. True once written (for processors.policy.retry.retried).
    """
    topic, k, v = changelog_record(table, key, value)
    sent = await app.producer.send(topic, k, v, partition, None, None)
    await asyncio.wait_for(sent, timeout_s)
    table.data[key] = value
    return True


def decode_error(event: faust.EventT) -> str | None:
    """Why this event's value is not one of our events (None: it is one)."""
    if event.value is None:
        return EMPTY_VALUE
    if isinstance(event.value, Undecodable):
        return event.value.error
    return misplaced(event.message.topic, type(event.value).__name__)


DeadLetters = Callable[[SourceRecord, str], Awaitable[None]]


def dlq_sender(app: faust.App, settings: Settings) -> DeadLetters:
    """`await send(message, error)`: dead-letter a message and wait for the broker's ack
    (once per record and group: a restart's re-delivery has its letter already)."""
    dlq = faust_topic(app, settings.kafka, Topic.DLQ)
    letters = LetterIndex(settings, Codec(), app.conf.id)

    async def send(message: SourceRecord, error: str) -> None:
        if not await letters.first(message.topic, message.partition, message.offset):
            return
        letter = dead_letter(message, error, app.conf.id)
        await (await dlq.send(key=letter.source_topic.encode(), value=letter))

    return send


# -- in-order acks and the restart rewind ------------------------------------------------


@dataclass(eq=False)
class Ticket:
    """An event's place in line on its partition (`ack`: ack it when its turn comes)."""

    event: faust.EventT
    ack: bool = field(default=True)


class InOrderAcks:
    """Acks each event once it and everything that arrived before it on its partition is done.

    `arrived(event)` before anything that awaits (arrival order is the partition's
    order, except when a partition is read again from an earlier offset, FirstReads's
    seek: the line is kept in offset order, so an event that came early waits for the
    earlier ones; acking it first would let faust 0.15.3 commit past them, as it takes the
    first run of acked offsets for the next commit), `done(ticket)` when its effects are
    published. `turn(ticket)` waits until
    every earlier event of the partition is done (for effects that must be published
    in order, as the evaluator's transactions). `forget` drops revoked partitions:
    their next owner re-reads whatever was not acked.
    """

    def __init__(self) -> None:
        self.offsets = OffsetHolds()
        self.lines: dict[Any, deque[Ticket]] = defaultdict(deque)
        self._turns: asyncio.Condition | None = None

    @property
    def turns(self) -> asyncio.Condition:
        if self._turns is None:  # made on first use, inside the worker's event loop
            self._turns = asyncio.Condition()
        return self._turns

    def arrived(self, event: faust.EventT) -> Ticket:
        ticket = Ticket(event)
        msg = event.message
        line = self.lines[msg.tp]
        if line and line[-1].event.message.offset > msg.offset:  # read again from earlier
            at = bisect.bisect_right([t.event.message.offset for t in line], msg.offset)
            line.insert(at, ticket)
        else:
            line.append(ticket)
        self.offsets.hold(msg.tp, msg.offset, ticket)
        return ticket

    def done(self, ticket: Ticket, ack: bool = True) -> None:
        """The event is handled: ack it and every done event behind it, in arrival order.

        `ack=False`: its ack was taken care of otherwise (or must not happen).
        """
        ticket.ack = ack
        tp = ticket.event.message.tp
        self.offsets.release(ticket)
        line = self.lines.get(tp)
        held = self.offsets.holds.get(tp, {})
        while line and line[0] not in held:  # the line's head is done: its turn to be acked
            first = line.popleft()
            if first.ack:
                first.event.ack()

    def done_below(self, tp: Any) -> int:
        """The offset of `tp` below which every event that arrived is done (0: none yet):
        the first one still in flight, or one past the last one when none is."""
        return self.offsets.safe_offset(tp) or 0

    async def wake(self) -> None:
        """Tell `turn` waiters that a line moved (after `done`)."""
        async with self.turns:
            self.turns.notify_all()

    def pending(self, tp: Any) -> int:
        """Events of `tp` that arrived and are not acked yet."""
        return len(self.lines.get(tp, ()))

    async def turn(self, ticket: Ticket) -> None:
        """Wait until every event that arrived before this one on its partition is done."""
        line = self.lines[ticket.event.message.tp]
        async with self.turns:
            await self.turns.wait_for(lambda: not line or line[0] is ticket or ticket not in line)

    def forget(self, partitions: Iterable[Any]) -> None:
        tps = set(partitions)
        for tp in tps:
            self.lines.pop(tp, None)
        self.offsets.forget(tps)
