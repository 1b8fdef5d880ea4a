"""The faust side (faust_app.py): the "webgym" codec, typed events, registry topics, readiness,
in-order acks, the brokers' security settings."""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import certifi
import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from tests.factories import sample_event
from webgym_common.codec import Codec
from webgym_common.config import load_settings
from webgym_common.lifecycle import READY_FILE_ENV
from webgym_common.stream.faust_app import (
    EMPTY_VALUE,
    EVENT_SERIALIZER,
    InOrderAcks,
    Undecodable,
    decode_error,
    faust_table,
    faust_topic,
    make_faust_app,
)
from webgym_common.stream.kafka_clients import security_options
from webgym_common.topics import Group, StateTable, Topic, group_id

SETTINGS = load_settings(kafka={"topic_prefix": "t7", "partitions": 3})


@dataclass
class Message:
    topic: str = "t7.observations"
    partition: int = 2
    offset: int = 41
    key: bytes | None = b"ep"
    value: bytes | None = b"raw"

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass
class FakeEvent:
    value: Any
    message: Message


class FakeStream:
    def __init__(self, *values: Any, topic: str = "t7.observations") -> None:
        self.items = [FakeEvent(v, Message(topic=topic, offset=i)) for i, v in enumerate(values)]

    async def events(self) -> AsyncIterator[FakeEvent]:  # as faust's StreamT.events
        for item in self.items:
            yield item


def test_faust_reads_and_writes_our_events_with_the_webgym_codec() -> None:
    app = make_faust_app(SETTINGS, Group.POLICY)
    event = sample_event("ActionChosen")
    data = app.serializers.dumps_value(None, event, serializer=EVENT_SERIALIZER)
    assert isinstance(data, bytes) and Codec().decode(data) == event
    assert app.serializers.loads_value(None, data, serializer=EVENT_SERIALIZER) == event
    # Bytes that are no event are a value to dead-letter, not an exception inside faust.
    junk = app.serializers.loads_value(None, b"not an event", serializer=EVENT_SERIALIZER)
    assert isinstance(junk, Undecodable) and "not an Avro event" in junk.error
    unknown = app.serializers.loads_value(None, b"\xc3\x01" + bytes(8) + b"body",
                                          serializer=EVENT_SERIALIZER)
    assert isinstance(unknown, Undecodable) and "unknown writer schema" in unknown.error


def test_decode_error_tells_why_a_value_is_not_an_event() -> None:
    assert decode_error(FakeEvent(sample_event("StepObserved"), Message())) is None
    assert decode_error(FakeEvent(Undecodable("corrupt"), Message())) == "corrupt"
    assert decode_error(FakeEvent(None, Message())) == EMPTY_VALUE  # a tombstone
    off_topic = decode_error(FakeEvent(sample_event("TaskHistory"), Message()))
    assert off_topic is not None and "does not belong on t7.observations" in off_topic


def test_the_app_id_is_its_group_and_faust_creates_no_topics() -> None:
    app = make_faust_app(SETTINGS, Group.EVALUATOR, processing_guarantee="exactly_once")
    assert app.conf.id == group_id(SETTINGS.kafka, Group.EVALUATOR) == "t7-evaluator"
    assert not app.conf.topic_allow_declare
    assert app.conf.value_serializer == EVENT_SERIALIZER
    assert app.conf.processing_guarantee.value == "exactly_once"


def test_topics_and_tables_come_from_the_registry() -> None:
    app = make_faust_app(SETTINGS, Group.EVALUATOR)
    dlq, actions = faust_topic(app, SETTINGS.kafka, Topic.DLQ), faust_topic(
        app, SETTINGS.kafka, Topic.ACTIONS)
    assert (dlq.get_topic_name(), dlq.partitions) == ("t7.dlq", 1)
    assert (actions.get_topic_name(), actions.partitions) == ("t7.actions", 3)
    scored = faust_table(app, SETTINGS.kafka, StateTable.SCORED)
    assert scored.changelog_topic.get_topic_name() == "t7-evaluator-scored-changelog"
    # A table logs under its own app's name only: the registry created no other changelog.
    with pytest.raises(ValueError, match="policy-contexts"):
        faust_table(app, SETTINGS.kafka, StateTable.POLICY_CONTEXTS)


async def test_the_app_is_ready_once_its_first_rebalance_has_recovered_its_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready = tmp_path / "policy.ready"
    monkeypatch.setenv(READY_FILE_ENV, str(ready))
    app = make_faust_app(SETTINGS, Group.POLICY)
    assert not ready.exists()
    await app.on_rebalance_complete.send()
    assert "t7-policy" in ready.read_text()
    ready.unlink()
    await app.on_rebalance_complete.send()  # later rebalances: said once is enough
    assert not ready.exists()


# -- in-order acks: never ack an event while one that arrived before it is in flight ------


@dataclass
class AckedMessage:
    topic: str
    partition: int
    offset: int
    acked: list[tuple[int, int]]

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass
class AckedEvent:
    message: AckedMessage

    def ack(self) -> None:  # as faust's Event.ack: the offset becomes committable
        self.message.acked.append((self.message.partition, self.message.offset))


def test_in_order_acks_ack_only_a_done_prefix_of_each_partition() -> None:
    acks, acked = InOrderAcks(), []
    events = [AckedEvent(AckedMessage("t.observations", p, o, acked))
              for o in range(3) for p in (0, 1)]
    tickets = [acks.arrived(e) for e in events]  # type: ignore[arg-type]
    acks.done(tickets[4])  # p0@2 done while p0@0 and p0@1 are in flight
    acks.done(tickets[1])  # p1@0
    assert acked == [(1, 0)]
    acks.done(tickets[0])  # p0@0: p0@1 is still in flight
    assert acked == [(1, 0), (0, 0)]
    acks.done(tickets[2], ack=False)  # p0@1 handled, acked by its handler already
    assert acked == [(1, 0), (0, 0), (0, 2)]
    assert acks.pending(("t.observations", 0)) == 0 and acks.pending(("t.observations", 1)) == 2


def test_done_below_is_the_first_event_in_flight_or_one_past_the_last_done() -> None:
    acks, acked = InOrderAcks(), []
    tp = ("t.episodes", 0)
    assert acks.done_below(tp) == 0
    tickets = [acks.arrived(AckedEvent(AckedMessage("t.episodes", 0, o, acked)))  # type: ignore[arg-type]
               for o in (4, 5, 7)]  # 6: a transaction marker, no event
    acks.done(tickets[1])
    assert acks.done_below(tp) == 4  # 5 is done, 4 is not
    acks.done(tickets[0])
    assert acks.done_below(tp) == 7
    acks.done(tickets[2])
    assert acks.done_below(tp) == 8
    acks.forget([tp])
    assert acks.done_below(tp) == 0


def test_random_interleavings_of_in_order_acks_never_ack_past_an_unfinished_event() -> None:
    rng = random.Random(4)
    for _ in range(200):
        acks, acked = InOrderAcks(), []
        tickets, unfinished, next_offset = {}, set(), [0, 0]
        for _ in range(60):
            if rng.random() < 0.5:
                p = rng.randrange(2)
                event = AckedEvent(AckedMessage("t.observations", p, next_offset[p], acked))
                tickets[(p, next_offset[p])] = acks.arrived(event)  # type: ignore[arg-type]
                unfinished.add((p, next_offset[p]))
                next_offset[p] += 1
            elif unfinished:
                done = rng.choice(sorted(unfinished))
                unfinished.discard(done)
                acks.done(tickets[done])
            for p, offset in acked:
                assert all(o > offset for q, o in unfinished if q == p), (p, offset, unfinished)
        for p in (0, 1):  # each partition's acks come in arrival order, with no gap
            mine = [o for q, o in acked if q == p]
            assert mine == list(range(len(mine)))


async def test_a_turn_comes_once_every_earlier_event_of_the_partition_is_done() -> None:
    acks, acked = InOrderAcks(), []
    first, second = (acks.arrived(AckedEvent(AckedMessage(  # type: ignore[arg-type]
        "t.completed", 0, o, acked))) for o in (0, 1))
    waiting = asyncio.create_task(acks.turn(second))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    acks.done(first)
    await acks.wake()
    await asyncio.wait_for(waiting, 1)
    await acks.turn(first)  # already done: no wait


def test_an_event_that_came_before_a_re_read_start_is_acked_after_it() -> None:
    # FirstReads saw offset 7 first and read the partition again from 6: 7 arrives twice.
    acks, acked = InOrderAcks(), []
    early, start, again = (acks.arrived(AckedEvent(AckedMessage("t.obs", 0, o, acked)))  # type: ignore[arg-type]
                           for o in (7, 6, 7))
    acks.done(early)
    assert acked == []  # 6 is not done: acking 7 would let faust commit past it
    acks.done(start)
    assert acked == [(0, 6), (0, 7)]
    acks.done(again)
    assert acked == [(0, 6), (0, 7), (0, 7)]


def test_forgotten_partitions_are_never_acked() -> None:
    acks, acked = InOrderAcks(), []
    ticket = acks.arrived(AckedEvent(AckedMessage("t.observations", 0, 5, acked)))  # type: ignore[arg-type]
    acks.forget([("t.observations", 0)])
    acks.done(ticket)  # its partition moved away: the next owner reads it again
    assert acked == []


def test_faust_apps_connect_as_the_kafka_security_settings_say(tmp_path: Path) -> None:
    """faust gives aiokafka what our own clients get (kafka_clients.security_options)."""
    settings = load_settings(infra={"data_dir": tmp_path}, kafka={
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": "webgym", "sasl_password": "pw-1234567890",
        "ssl_cafile": certifi.where()})
    app = make_faust_app(settings, Group.POLICY)
    auth = credentials_to_aiokafka_auth(app.conf.broker_credentials, app.conf.ssl_context)
    ours = security_options(settings.kafka)
    assert isinstance(auth.pop("ssl_context"), ssl.SSLContext)
    assert isinstance(ours.pop("ssl_context"), ssl.SSLContext)
    assert auth == ours == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
                            "sasl_plain_username": "webgym", "sasl_plain_password": "pw-1234567890"}
    tls_only = load_settings(infra={"data_dir": tmp_path}, kafka={"security_protocol": "SSL"})
    auth = credentials_to_aiokafka_auth(
        make_faust_app(tls_only, Group.POLICY).conf.broker_credentials, None)
    assert auth["security_protocol"] == "SSL" and isinstance(auth["ssl_context"], ssl.SSLContext)
    plain = make_faust_app(load_settings(infra={"data_dir": tmp_path}), Group.POLICY)
    assert credentials_to_aiokafka_auth(plain.conf.broker_credentials, None) == {
        "security_protocol": "PLAINTEXT"}
