"""Publishing what an input event caused, inside that event's Kafka transaction.

With `processing_guarantee="exactly_once"` faust keeps one transactional
producer per input partition and, every commit interval, commits in one Kafka
transaction the records produced on it together with the input offsets acked
so far. Faust routes `topic.send` by the *destination* partition, which only
works for topics the app consumes; our outputs (scores, blocklist, dead
letters) go to topics it does not, so we send them on the transactional
producer of the *input* partition instead: they commit together with the
input's offset, or are aborted together with it.

One more step closes a gap: faust's commit runs concurrently with the agents,
and takes its snapshot of acked offsets before it takes the transaction lock.
Outputs sent while a commit is in flight could commit without their input's
offset (a crash then re-scores the episode). So `publish_and_ack` waits until
no commit is in flight, then, under the transaction lock, acks the input and
appends the outputs: the next commit carries both or neither.

In `at_least_once` mode the outputs are sent (and acknowledged by the broker)
before the input is acked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

import faust

log = logging.getLogger(__name__)


class Record(NamedTuple):
    topic: str
    key: bytes | None
    value: bytes


class Outbox:
    def __init__(self, app: faust.App, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    def transactional_id(self, event: faust.EventT) -> str | None:
        """The transaction the input event's partition commits in (None: no transactions)."""
        if not self.app.in_transaction:
            return None
        msg = event.message
        group = self.app.assignor.group_for_topic(msg.topic)
        return f"{self.app.conf.id}-{group}-{msg.partition}"

    async def publish_and_ack(self, event: faust.EventT, records: Sequence[Record]) -> None:
        """Publish `records` and mark `event` as handled, as one step."""
        tid = self.transactional_id(event)
        if tid is None:
            sent = [await self.app.producer.send(r.topic, r.key, r.value, None, None, None)
                    for r in records]
            await asyncio.wait_for(asyncio.gather(*sent), self.timeout_s)
            event.ack()
            return
        sent = await self._in_transaction(tid, event, records)
        # The broker's acknowledgement; the transaction's commit makes them visible.
        await asyncio.wait_for(asyncio.gather(*sent), self.timeout_s)

    async def _in_transaction(
        self, tid: str, event: faust.EventT, records: Sequence[Record]
    ) -> list[asyncio.Future]:
        producer: Any = self.app.producer  # faust's aiokafka driver: per-tid producers + locks
        consumer: Any = self.app.consumer
        while True:
            await consumer.maybe_wait_for_commit_to_finish()
            async with producer._trn_locks[tid]:
                if consumer._commit_fut is not None:
                    continue  # a commit started while we waited for the lock: let it finish
                # A commit that starts from here on sees this offset acked, and waits for
                # this lock: it carries the records appended below as well.
                event.ack()
                transaction = producer._transaction_producers[tid]
                return [await transaction.send(r.topic, r.value, key=r.key) for r in records]
