"""The one way this project configures a faust app: our broker settings, raw bytes, our codec."""

from __future__ import annotations

from typing import Any

import faust

from webgym_common.config import Settings


def make_faust_app(settings: Settings, role: str, **overrides: Any) -> faust.App:
    """A faust app `<prefix>-<role>` with memory stores (tables rebuilt from their changelogs)."""
    k = settings.kafka
    options: dict[str, Any] = {
        "broker": f"kafka://{k.bootstrap_servers}",
        "store": "memory://",
        "topic_partitions": k.partitions,
        "topic_replication_factor": k.replication_factor,
        "web_enabled": False,
        "consumer_auto_offset_reset": "earliest",
        "broker_session_timeout": k.session_timeout_ms / 1000,
        "broker_heartbeat_interval": k.heartbeat_interval_ms / 1000,
        "producer_acks": -1,
        "producer_compression_type": None if k.compression == "none" else k.compression,
        # Values are our Avro events, decoded with webgym_common.codec, never faust's codecs.
        "key_serializer": "raw",
        "value_serializer": "raw",
    }
    options.update(overrides)
    return faust.App(f"{k.topic_prefix}-{role}", **options)
