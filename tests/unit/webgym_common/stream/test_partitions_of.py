"""A range reader's partitions (webgym_common.stream.bus.partitions_of): metadata asked
for its topics alone, looked at as soon as it comes, waited for while a topic is new."""

from __future__ import annotations

from typing import Any, cast

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from webgym_common.stream.bus import partitions_of


class FakeClient:
    def __init__(self, known_after: int) -> None:
        self.known_after = known_after  # metadata updates before the topics are known
        self.updates: list[list[str] | None] = []
        self.topics: list[str] = []

    async def set_topics(self, topics: list[str]) -> None:
        self.topics = list(topics)
        self.updates.append(self.topics)

    async def force_metadata_update(self) -> None:
        self.updates.append(self.topics)


class FakeConsumer:
    def __init__(self, known_after: int) -> None:
        self._client = FakeClient(known_after)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        known = len(self._client.updates) > self._client.known_after
        return {1, 0} if known and topic in self._client.topics else None


def consumer(known_after: int) -> Any:
    return cast(AIOKafkaConsumer, FakeConsumer(known_after))


async def test_one_update_for_the_topics_alone_and_no_wait() -> None:
    c = consumer(known_after=0)
    got = await partitions_of(c, ["a", "b"])
    assert got == [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0),
                   TopicPartition("b", 1)]
    assert c._client.updates == [["a", "b"]]  # never None: every topic of the cluster


async def test_a_topic_just_created_is_waited_for() -> None:
    c = consumer(known_after=2)
    assert len(await partitions_of(c, ["a"])) == 2
    assert c._client.updates == [["a"], ["a"], ["a"]]


async def test_a_topic_that_never_comes_is_named_as_missing() -> None:
    with pytest.raises(LookupError, match="missing"):
        await partitions_of(consumer(known_after=10**6), ["missing"], timeout_s=0.3)
