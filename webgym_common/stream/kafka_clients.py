"""The project's Kafka clients, configured in one place: idempotent producers (acks=all),
consumers that commit by hand and read committed records only."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from webgym_common.config import Settings


def make_producer(settings: Settings, client_id: str = "webgym",
                  transactional_id: str | None = None) -> AIOKafkaProducer:
    """`transactional_id`: a transactional producer; starting one fences (and aborts the open
    transaction of) an earlier producer with the same id."""
    k = settings.kafka
    return AIOKafkaProducer(
        transactional_id=transactional_id,
        bootstrap_servers=k.bootstrap_servers,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        compression_type=None if k.compression == "none" else k.compression,
        linger_ms=k.linger_ms,
        max_request_size=k.max_request_size,
        request_timeout_ms=k.request_timeout_ms,
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
    )
