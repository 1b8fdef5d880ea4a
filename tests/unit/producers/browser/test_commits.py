"""A browser worker commits what its holds allow, and only on partitions it still owns."""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError
from aiokafka.structs import OffsetAndMetadata

from producers.browser.commits import commit_every, commit_held
from webgym_common.stream.offsets import OffsetHolds

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


class FakeConsumer:
    def __init__(self, assigned: set[TopicPartition]) -> None:
        self.assigned = assigned
        self.commits: list[dict[TopicPartition, OffsetAndMetadata]] = []

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.commits.append(offsets)


async def test_held_offsets_stay_uncommitted_and_moved_partitions_are_left_alone() -> None:
    holds = OffsetHolds()
    holds.seen(P0, 4)
    holds.hold(P0, 5, "running")
    holds.seen(P0, 6)
    holds.seen(P1, 9)
    consumer = FakeConsumer({P0})
    await commit_held(holds, consumer)
    assert consumer.commits == [{P0: OffsetAndMetadata(5, "")}]
    await commit_held(holds, consumer)
    assert len(consumer.commits) == 1  # nothing moved


async def test_only_limits_the_commit_to_the_given_partitions() -> None:
    holds = OffsetHolds()
    holds.seen(P0, 1)
    holds.seen(P1, 2)
    consumer = FakeConsumer({P0, P1})
    await commit_held(holds, consumer, only={P1})
    assert consumer.commits == [{P1: OffsetAndMetadata(3, "")}]


class FailingOnceConsumer(FakeConsumer):
    """A consumer whose first commit fails as in a rebalance."""

    def __init__(self, assigned: set[TopicPartition]) -> None:
        super().__init__(assigned)
        self.failed = False
        self.committed = asyncio.Event()

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if not self.failed:
            self.failed = True
            raise CommitFailedError("rebalance in progress")
        await super().commit(offsets)
        self.committed.set()


async def test_a_failed_commit_is_retried_and_later_commits_go_on() -> None:
    holds = OffsetHolds()
    holds.seen(P0, 4)
    consumer = FailingOnceConsumer({P0})
    loop = asyncio.create_task(commit_every(0.01, holds, consumer))
    try:
        async with asyncio.timeout(10):
            await consumer.committed.wait()  # the failed commit is tried again
        assert consumer.commits == [{P0: OffsetAndMetadata(5, "")}]
        consumer.committed.clear()
        holds.seen(P0, 9)
        async with asyncio.timeout(10):
            await consumer.committed.wait()  # and the loop is still committing
        assert consumer.commits[1] == {P0: OffsetAndMetadata(10, "")}
        assert not loop.done()
    finally:
        loop.cancel()
