"""How a consumer group shares out partitions: every member owns the same partition numbers
of every topic it reads, whatever the number of members (the browser's episodes+actions)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from webgym_common.config import Settings
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.topics import Topic, topic_name

TOPICS = ["webgym.episodes", "webgym.actions"]


def assignments(assignor: type, members: int, partitions: int = 8) -> list[dict[str, list[int]]]:
    cluster = SimpleNamespace(partitions_for_topic=lambda topic: set(range(partitions)))
    meta = {f"browser-{i}": ConsumerProtocolMemberMetadata(0, TOPICS, b"")
            for i in range(members)}
    out = assignor.assign(cluster, meta)
    return [dict(a.assignment) for a in out.values()]


@pytest.mark.parametrize("members", [1, 2, 3, 5, 8, 11])
async def test_every_member_owns_an_episode_with_its_actions(members: int) -> None:
    consumer = make_consumer(Settings(), TOPICS, "g")  # never started: no broker needed
    (assignor,) = consumer._partition_assignment_strategy
    for owned in assignments(assignor, members):
        assert owned.get(TOPICS[0], []) == owned.get(TOPICS[1], []), owned


def test_round_robin_would_split_them_with_three_members() -> None:
    split = [o for o in assignments(RoundRobinPartitionAssignor, 3) if o[TOPICS[0]] != o[TOPICS[1]]]
    assert split  # why the clients do not use aiokafka's default


def test_the_browser_topics_have_equal_partition_counts() -> None:
    settings = Settings()
    names = {topic_name(settings.kafka, t) for t in (Topic.EPISODES, Topic.ACTIONS)}
    assert names == set(TOPICS)
