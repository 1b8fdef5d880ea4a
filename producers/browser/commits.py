"""Committing a browser worker's offsets: only what OffsetHolds allows, only where still owned.

A partition that moved away is not committed here: its new owner re-reads from the
last commit, which is what lets it resume the episodes that were running.
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from producers.browser.routing import offsets_to_commit
from webgym_common.offsets import OffsetHolds


async def commit_held(holds: OffsetHolds, consumer: AIOKafkaConsumer,
                      only: set[TopicPartition] | None = None) -> None:
    """Commit every offset that moved forward and is not held (on `only`, when given)."""
    offsets = offsets_to_commit(holds.committable(), consumer.assignment(), only)
    if offsets:
        await consumer.commit({tp: OffsetAndMetadata(off, "") for tp, off in offsets.items()})
        holds.mark_committed(offsets)


async def commit_every(period_s: float, holds: OffsetHolds, consumer: AIOKafkaConsumer) -> None:
    while True:
        await asyncio.sleep(period_s)
        await commit_held(holds, consumer)
