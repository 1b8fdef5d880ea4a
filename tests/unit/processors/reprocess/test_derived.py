"""Derived topics: `webgym reprocess` never writes one of the pipeline's own topics, and
writes its records in one transaction, each on the partition a plain send gives its key."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.partitioner import DefaultPartitioner

from processors.reprocess.derived import DerivedWriter, refusal, transactional_id
from tests.unit.scored import scored
from webgym_common.codec import Codec
from webgym_common.config import load_settings
from webgym_common.events import EpisodeScored


def test_the_pipelines_topics_and_illegal_names_are_refused() -> None:
    s = load_settings(kafka={"topic_prefix": "webgym"})
    assert refusal(s, "webgym.episodes.scored") is not None
    assert refusal(s, "webgym.replay") is not None
    assert refusal(s, "webgym-evaluator-scored-changelog") is not None  # faust's own
    assert refusal(s, "bad name!") is not None and refusal(s, "..") is not None
    assert refusal(s, "webgym.rescored.llm-v2") is None
    assert transactional_id("x.y") == "webgym-replay-x.y"


class FakeBatch:
    def __init__(self, room: int) -> None:
        self.room, self.records = room, []  # type: ignore[var-annotated]

    def append(self, *, key: bytes, value: bytes, timestamp: None) -> object | None:
        if len(self.records) >= self.room:
            return None
        self.records.append((key, value))
        return object()


class FakeProducer:
    """A transactional producer's batch interface: what went to which partition, and when."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.sent: list[tuple[int, list[tuple[bytes, bytes]], bool]] = []
        self.in_txn = False
        self.commits = 0

    def transaction(self) -> Any:
        producer = self

        class Txn:
            async def __aenter__(self) -> None:
                producer.in_txn = True

            async def __aexit__(self, *exc: object) -> None:
                producer.in_txn, producer.commits = False, producer.commits + 1

        return Txn()

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.room)

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int) -> Any:
        self.sent.append((partition, list(batch.records), self.in_txn))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


async def test_a_write_is_one_transaction_each_key_on_a_plain_sends_partition_in_order(
        ) -> None:
    writer = DerivedWriter.__new__(DerivedWriter)
    fake = FakeProducer(room=2)
    writer.name, writer.timeout_s, writer.codec = "t", 5.0, Codec()
    writer.producer, writer.partitioner = fake, DefaultPartitioner()  # type: ignore[assignment]
    events = [(f"ep-{n}:{n % 4}", scored(f"ep-{n}")) for n in range(12)]
    await writer.write(events)
    assert fake.commits == 1 and all(in_txn for _, _, in_txn in fake.sent)
    plain = DefaultPartitioner()
    want: dict[int, list[bytes]] = {}
    for key, _ in events:
        want.setdefault(plain(key.encode(), [0, 1, 2], [0, 1, 2]), []).append(key.encode())
    got: dict[int, list[bytes]] = {}
    for p, records, _ in fake.sent:
        assert 0 < len(records) <= 2  # a full batch goes, a new one takes the record
        got.setdefault(p, []).extend(k for k, _ in records)
    assert got == want and len(want) > 1
    decoded = [Codec().decode(v) for _, records, _ in fake.sent for _, v in records]
    assert sorted(e.episode_id for e in decoded if isinstance(e, EpisodeScored)) == sorted(
        e.episode_id for _, e in events)
