"""The bus layer against a real Kafka broker and a real MinIO."""

from __future__ import annotations

import asyncio
import hashlib
import io
import uuid

import fastavro
import httpx
import pytest

from tests.factories import all_sample_events, sample_event
from webgym_common.codec import SINGLE_OBJECT_MAGIC, Codec
from webgym_common.config import Settings
from webgym_common.events import DeadLetter, StepObserved
from webgym_common.objectstore import ObjectStore, ObjectStoreError
from webgym_common.stream.admin import create_topics, describe_topic_configs
from webgym_common.stream.bus import EventConsumer, EventProducer, Received
from webgym_common.stream.readers import read_compacted, read_events, read_to_end
from webgym_common.topics import Topic, all_topic_specs, topic_name, topic_specs

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_every_event_type_round_trips_through_the_broker(
    settings: Settings, producer: EventProducer
) -> None:
    sent = all_sample_events()
    for event in sent:
        await producer.publish(Topic.OBSERVATIONS, f"key-{type(event).__name__}", event)
    got = await read_events(settings, Topic.OBSERVATIONS, len(sent), producer)
    by_id = {r.event.event_id: r for r in got}
    assert len(by_id) == len(sent)
    for event in sent:
        received = by_id[event.event_id]
        assert received.event == event
        assert received.key == f"key-{type(event).__name__}"


async def test_message_written_with_an_old_schema_decodes_with_the_new_reader(
    settings: Settings, producer: EventProducer
) -> None:
    current = StepObserved.schema.raw
    # v0 of StepObserved: before worker_id and action_effect existed.
    old = {
        **current,
        "fields": [f for f in current["fields"] if f["name"] not in ("worker_id", "action_effect")],
    }
    old_body = {
        **sample_event("StepObserved").to_avro(),
    }
    del old_body["worker_id"], old_body["action_effect"]
    parsed_old = fastavro.parse_schema(old)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed_old, old_body)
    old_fp = bytes.fromhex(
        fastavro.schema.fingerprint(fastavro.schema.to_parsing_canonical_form(parsed_old),
                                    "CRC-64-AVRO")
    )
    raw = SINGLE_OBJECT_MAGIC + old_fp + buf.getvalue()
    await producer.publish_raw(producer.topic(Topic.OBSERVATIONS), b"old", raw)

    reader_codec = Codec(producer.codec.schemas.with_versions([old]))
    reader = EventProducer(settings, reader_codec, client_id="old-reader")
    await reader.start()
    try:
        (received,) = await read_events(settings, Topic.OBSERVATIONS, 1, reader)
    finally:
        await reader.stop()
    event = received.event
    assert isinstance(event, StepObserved)
    assert event.worker_id == "" and event.action_effect is None  # defaults of the new fields
    assert event.episode_id == old_body["episode_id"]
    assert event.marks[0].name == old_body["marks"][0]["name"]


async def test_compacted_topics_really_are_compacted(settings: Settings) -> None:
    specs = topic_specs(settings.kafka)
    configs = await describe_topic_configs(settings, [s.name for s in specs.values()])
    for topic, spec in specs.items():
        assert configs[spec.name]["cleanup.policy"] == spec.cleanup_policy, topic
    for topic in (Topic.TASKS, Topic.TASK_HISTORY, Topic.MODELS, Topic.METRICS, Topic.BLOCKLIST):
        assert configs[specs[topic].name]["cleanup.policy"] == "compact"
    assert configs[specs[Topic.EPISODES].name]["cleanup.policy"] == "delete"


async def test_topic_creation_is_idempotent(settings: Settings) -> None:
    again = await create_topics(settings)
    assert {r.status for r in again} == {"exists"}
    assert len(again) == len(all_topic_specs(settings.kafka))


async def test_object_store_put_get_presign_round_trip(settings: Settings) -> None:
    store = ObjectStore(settings.s3)
    await store.ensure_bucket()
    data = uuid.uuid4().bytes * 1000
    ref = await store.put_blob(data, "image/png")
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert ref.uri == f"s3://{settings.s3.bucket}/sha256/{ref.sha256[:2]}/{ref.sha256}.png"
    assert await store.put_blob(data, "image/png") == ref  # same bytes, same reference
    assert await store.get_blob(ref.uri) == data
    url = await store.presign(ref.uri, expires_s=60)
    async with httpx.AsyncClient(timeout=10) as client:
        resp = await client.get(url)
    assert resp.status_code == 200 and resp.content == data
    with pytest.raises(ObjectStoreError):
        await store.get_blob("http://not-s3/x")


async def test_garbage_goes_to_the_dead_letter_topic_and_the_consumer_continues(
    settings: Settings, producer: EventProducer
) -> None:
    topic = producer.topic(Topic.ACTIONS)
    garbage = [b"\x00\x01not avro", b"", b"\xc3\x01" + b"\x99" * 8 + b"body"]
    # One key: one partition, so the garbage is read before the good event.
    for g in garbage:
        await producer.publish_raw(topic, b"episode-1", g)
    good = sample_event("ActionChosen")
    await producer.publish(Topic.ACTIONS, "episode-1", good)

    group = f"g-{uuid.uuid4().hex[:8]}"
    async with EventConsumer(settings, [Topic.ACTIONS], group, producer) as consumer:
        async with asyncio.timeout(30):
            async for received in consumer.events():
                await consumer.commit(received)
                break
    assert received.event == good
    assert consumer.dead_lettered == len(garbage)

    letters = await read_events(settings, Topic.DLQ, len(garbage), producer)
    assert [type(r.event) for r in letters] == [DeadLetter] * len(garbage)
    assert {r.key for r in letters} == {topic}
    assert sorted(r.event.raw_value for r in letters) == sorted(garbage)
    for r in letters:
        assert r.event.source_topic == topic and r.event.consumer_group == group
        assert r.event.error
    assert "unknown writer schema fingerprint" in " ".join(r.event.error for r in letters)

    # The group committed past the garbage and the good event: a restart reads nothing old.
    async with EventConsumer(settings, [Topic.ACTIONS], group, producer) as consumer:
        fresh = sample_event("ActionChosen")
        await producer.publish(Topic.ACTIONS, "episode-1", fresh)
        async with asyncio.timeout(30):
            first = await anext(consumer.events())
    assert first.event == fresh


async def test_a_consumer_killed_after_a_dead_letter_reads_the_good_events_before_it_again(
    settings: Settings, producer: EventProducer
) -> None:
    topic = producer.topic(Topic.ACTIONS)
    before = [sample_event("ActionChosen") for _ in range(3)]
    after = sample_event("ActionChosen")
    # One key, one partition: good, good, good, poison, good in one fetch.
    for event in before:
        await producer.publish(Topic.ACTIONS, "episode-7", event)
    await producer.publish_raw(topic, b"episode-7", b"\x00poison")
    await producer.publish(Topic.ACTIONS, "episode-7", after)

    group = f"g-{uuid.uuid4().hex[:8]}"
    first = EventConsumer(settings, [Topic.ACTIONS], group, producer)
    await first.start()
    batch: list[Received] = []
    try:
        async with asyncio.timeout(30):
            while first.dead_lettered == 0 or len(batch) < 4:  # read past the poison
                batch += await first.poll(200)
        assert [r.event for r in batch] == [*before, after]
        # It dies here, before handling any of them (a SIGKILL: no commit on the way out).
    finally:
        await first.stop()

    async with EventConsumer(settings, [Topic.ACTIONS], group, producer) as again:
        async with asyncio.timeout(30):
            reread = []
            async for received in again.events():
                reread.append(received.event)
                await again.commit(received)
                if received.event == after:
                    break
    # The good events before the poison come again (none was lost); so does the poison,
    # whose commit waited for them: its letter is in the DLQ already, so none is written.
    assert reread == [*before, after]
    assert again.dead_lettered == 0
    letters = await dlq_letters(settings, producer)
    assert [(d.source_topic, d.consumer_group) for d in letters] == [(topic, group)]


async def test_readers_without_a_group_dead_letter_a_poison_once_however_often_they_read_it(
    settings: Settings, producer: EventProducer
) -> None:
    # Table readers (the task catalog, a trainer's replay) read every record at each start.
    await producer.publish(Topic.TASKS, "t1", sample_event("Task"))
    await producer.publish_raw(producer.topic(Topic.TASKS), b"t2", b"\x00poison")
    for _ in range(3):
        table = await read_compacted(settings, Topic.TASKS, producer)
        assert list(table) == ["t1"]
    letters = await dlq_letters(settings, producer)
    assert [(d.source_topic, d.raw_value, d.consumer_group) for d in letters] == [
        (producer.topic(Topic.TASKS), b"\x00poison", None)]
    # A group reading the same topic writes its own letter (it must skip the record too).
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with EventConsumer(settings, [Topic.TASKS], group, producer) as consumer:
        async with asyncio.timeout(30):
            await anext(consumer.events())
            while consumer.dead_lettered == 0:  # noqa: ASYNC110 (the next poll reads it)
                await consumer.poll(200)
    letters = await dlq_letters(settings, producer)
    assert sorted(map(str, (d.consumer_group for d in letters))) == sorted(["None", group])


async def test_an_aborted_transactions_records_are_no_ones_outcomes(
    settings: Settings, producer: EventProducer
) -> None:
    """What a killed exactly-once processor had half done is invisible to every reader:
    the pipeline's consumers and the chaos suite's counter (which once counted it)."""
    from aiokafka import AIOKafkaProducer

    from harness.topic_reads import read_topic

    name = topic_name(settings.kafka, Topic.EPISODES_SCORED)
    codec = Codec()
    aborted, kept = (sample_event("EpisodeScored").model_copy(update={"event_id": uuid.uuid4().hex})
                     for _ in range(2))
    txn = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers,
                           transactional_id=f"test-abort-{uuid.uuid4().hex[:8]}")
    await txn.start()
    try:
        async with txn.transaction():
            await txn.send_and_wait(name, codec.encode(kept), key=b"kept")
        await txn.begin_transaction()
        await txn.send_and_wait(name, codec.encode(aborted), key=b"aborted")
        await txn.abort_transaction()
    finally:
        await txn.stop()
    counted = [codec.decode(r.value).event_id for r in await read_topic(
        settings, Topic.EPISODES_SCORED) if r.value is not None]
    assert kept.event_id in counted and aborted.event_id not in counted
    read = [r.event.event_id for r in await read_events(
        settings, Topic.EPISODES_SCORED, 1, producer, timeout_s=30)]
    assert aborted.event_id not in read


async def dlq_letters(settings: Settings, producer: EventProducer) -> list[DeadLetter]:
    async with EventConsumer(settings, [Topic.DLQ], None, producer, any_type=True) as c:
        return [r.event for r in await read_to_end(c) if isinstance(r.event, DeadLetter)]
