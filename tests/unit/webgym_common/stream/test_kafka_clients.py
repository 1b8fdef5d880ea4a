"""How a consumer group shares out partitions: every member owns the same partition numbers
of every topic it reads, whatever the number of members (the browser's episodes+actions);
and how every client connects (the kafka.security_* settings)."""

from __future__ import annotations

import ssl
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import certifi
import pytest
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from webgym_common.config import Settings, SettingsError, load_settings
from webgym_common.stream.admin import admin_client
from webgym_common.stream.kafka_clients import make_consumer, make_producer, security_options
from webgym_common.topics import Topic, topic_name

TOPICS = ["webgym.episodes", "webgym.actions"]
CAFILE = certifi.where()  # any real CA bundle


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


SASL_SSL = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "webgym", "sasl_password": "pw-1234567890", "ssl_cafile": CAFILE}


def client_security(client: Any) -> tuple[str, str | None, str | None, str | None, bool]:
    """What an aiokafka client (a producer's, a consumer's or the admin's) will connect with."""
    return (client._security_protocol, client._sasl_mechanism, client._sasl_plain_username,
            client._sasl_plain_password, isinstance(client._ssl_context, ssl.SSLContext))


async def test_every_client_connects_as_the_kafka_security_settings_say(tmp_path: Path) -> None:
    settings = load_settings(infra={"data_dir": tmp_path}, kafka=SASL_SSL)
    expected = ("SASL_SSL", "SCRAM-SHA-512", "webgym", "pw-1234567890", True)
    producer = make_producer(settings)
    consumer = make_consumer(settings, TOPICS, "g")
    admin = admin_client(settings)
    try:
        assert client_security(producer.client) == expected
        assert client_security(consumer._client) == expected
        assert client_security(admin._client) == expected
    finally:  # never started: closing only keeps them from warning
        await producer.stop()
        await consumer.stop()
        await admin.close()
    # The TLS context checks the broker's certificate and name against the configured CA.
    context = security_options(settings.kafka)["ssl_context"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.get_ca_certs()  # loaded from ssl_cafile


async def test_plaintext_by_default(tmp_path: Path) -> None:
    settings = load_settings(infra={"data_dir": tmp_path})
    assert security_options(settings.kafka) == {"security_protocol": "PLAINTEXT"}
    producer = make_producer(settings)
    assert client_security(producer.client)[0] == "PLAINTEXT"
    await producer.stop()


def test_incomplete_security_settings_are_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="WEBGYM_KAFKA__SASL_PASSWORD"):
        load_settings(infra={"data_dir": tmp_path},
                      kafka={"security_protocol": "SASL_SSL", "sasl_username": "u"})
    with pytest.raises(SettingsError, match="ssl_cafile is only used with TLS"):
        load_settings(infra={"data_dir": tmp_path}, kafka={"ssl_cafile": CAFILE})
