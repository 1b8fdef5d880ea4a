"""The project's Kafka clients, configured in one place: idempotent producers (acks=all),
consumers that commit by hand, read committed records only and share out partitions by
range, so a member of a group that reads several topics owns the same partition numbers of
each (co-partitioning: a browser worker must own an episode's actions with the episode).
Every client, faust's included (faust_app.py), talks to the brokers as the kafka.security_*
settings say: `security_options` is the one translation of them."""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.helpers import create_ssl_context

from webgym_common.config import KafkaSettings, Settings


def tls_context(kafka: KafkaSettings) -> ssl.SSLContext | None:
    """The TLS context of a TLS protocol (the broker's certificate and host name checked
    against kafka.ssl_cafile, else the system's CAs); None without TLS."""
    if not kafka.security_protocol.uses_tls:
        return None
    return create_ssl_context(cafile=str(kafka.ssl_cafile) if kafka.ssl_cafile else None)


def security_options(kafka: KafkaSettings) -> dict[str, Any]:
    """aiokafka's keyword arguments for the kafka.security_* settings (every client's)."""
    options: dict[str, Any] = {"security_protocol": kafka.security_protocol.value}
    if kafka.security_protocol.uses_sasl:
        options |= {"sasl_mechanism": kafka.sasl_mechanism.value,
                    "sasl_plain_username": kafka.sasl_username,
                    "sasl_plain_password": kafka.sasl_password}
    if (context := tls_context(kafka)) is not None:
        options["ssl_context"] = context
    return options


def make_producer(settings: Settings, client_id: str = "webgym",
                  transactional_id: str | None = None,
                  max_batch_size: int | None = None) -> AIOKafkaProducer:
    """`transactional_id`: a transactional producer; starting one fences (and aborts the open
    transaction of) an earlier producer with the same id. `max_batch_size`: the bytes of one
    record batch (aiokafka's default, 16 KiB, unless given)."""
    k = settings.kafka
    return AIOKafkaProducer(
        **({"max_batch_size": max_batch_size} if max_batch_size else {}),
        transactional_id=transactional_id,
        bootstrap_servers=k.bootstrap_servers,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        compression_type=None if k.compression == "none" else k.compression,
        linger_ms=k.linger_ms,
        max_request_size=k.max_request_size,
        request_timeout_ms=k.request_timeout_ms,
        **security_options(k),
    )


def make_consumer(
    settings: Settings, topics: Iterable[str], group_id: str | None, client_id: str = "webgym"
) -> AIOKafkaConsumer:
    k = settings.kafka
    return AIOKafkaConsumer(
        *topics,
        bootstrap_servers=k.bootstrap_servers,
        client_id=client_id,
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=k.session_timeout_ms,
        heartbeat_interval_ms=k.heartbeat_interval_ms,
        max_poll_interval_ms=k.max_poll_interval_ms,
        request_timeout_ms=k.request_timeout_ms,
        # Only read what idempotent/transactional producers have committed.
        isolation_level="read_committed",
        # aiokafka's default, round robin, deals the partitions of all topics out as one
        # list: with 3 browser workers, episodes/0 and actions/0 went to different members
        # and the episodes stalled. Range splits each topic the same way (equal partition
        # counts, which the registry gives co-partitioned topics).
        partition_assignment_strategy=(RangePartitionAssignor,),
        **security_options(k),
    )
