"""Committing a browser worker's offsets: only what OffsetHolds allows, only where still owned.

A partition that moved away is not committed here: its new owner re-reads from the
last commit, which is what lets it resume the episodes that were running. A commit
that fails (a rebalance in progress, the coordinator moving, a timeout) is only late:
what it would have committed is still committable, and the next period tries again.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from producers.browser.routing import offsets_to_commit
from webgym_common.stream.offsets import OffsetHolds

log = logging.getLogger(__name__)
COMMIT_TIMEOUT_S = 30.0


async def commit_held(holds: OffsetHolds, consumer: AIOKafkaConsumer,
                      only: set[TopicPartition] | None = None,
                      timeout_s: float = COMMIT_TIMEOUT_S) -> None:
    """Commit every offset that moved forward and is not held (on `only`, when given)."""
    offsets = offsets_to_commit(holds.committable(), consumer.assignment(), only)
    if offsets:
        await asyncio.wait_for(
            consumer.commit({tp: OffsetAndMetadata(off, "") for tp, off in offsets.items()}),
            timeout_s,
        )
        holds.mark_committed(offsets)


async def commit_every(period_s: float, holds: OffsetHolds, consumer: AIOKafkaConsumer) -> None:
    """Commit what may be committed every `period_s`, forever; a failed commit is retried."""
    failures = 0
    while True:
        await asyncio.sleep(period_s)
        try:
            await commit_held(holds, consumer)
        except Exception as err:  # CommitFailedError in a rebalance, timeouts
            failures += 1
            # Once, then every 20th time in a row: a rebalance makes several in a row.
            if failures == 1 or failures % 20 == 0:
                log.warning("commit failed (%d in a row), retrying: %r", failures, err)
            continue
        if failures:
            log.info("committing again after %d failures", failures)
        failures = 0
