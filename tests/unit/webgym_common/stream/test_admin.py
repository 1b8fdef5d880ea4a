"""webgym_common/stream/admin.py: topics are created with min.insync.replicas for their replicas."""

from __future__ import annotations

from webgym_common.config import KafkaSettings
from webgym_common.stream.admin import _new_topic
from webgym_common.topics import Topic, min_insync_replicas, topic_specs


def test_min_insync_replicas_lets_one_replica_be_down() -> None:
    assert [min_insync_replicas(rf) for rf in (1, 2, 3, 5)] == [1, 1, 2, 2]


def test_new_topics_carry_min_insync_replicas() -> None:
    spec = topic_specs(KafkaSettings())[Topic.EPISODES]
    three = _new_topic(spec, 3)
    assert three.replication_factor == 3
    assert three.topic_configs["min.insync.replicas"] == "2"
    assert three.topic_configs["cleanup.policy"] == "delete"
    assert _new_topic(spec, 1).topic_configs["min.insync.replicas"] == "1"
