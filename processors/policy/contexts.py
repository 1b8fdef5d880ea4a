"""The policy's memory: one entry per episode in a faust table whose changelog is in Kafka.

Delivery: an entry is written down durably (`put` returns once the broker has
acknowledged its changelog record, webgym_common.stream.faust_app.put_durably), so whatever
follows it — an action published, an observation acked — never stands without it.
The table is co-partitioned with the policy's sources by episode id: a restarted or
rebalanced processor recovers the entries of the partitions it takes.
"""

from __future__ import annotations

import time

import faust

from processors.policy.decisions import (
    Entry,
    Live,
    entry_from_json,
    entry_to_json,
    expired_ended,
)
from webgym_common.config import Settings
from webgym_common.stream.faust_app import faust_table, put_durably
from webgym_common.topics import StateTable, Topic, topic_specs

PURGE_EVERY_MS = 60_000


class Contexts:
    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.table = faust_table(app, settings.kafka, StateTable.POLICY_CONTEXTS)
        self.timeout_s = settings.kafka.request_timeout_ms / 1000
        # Ended entries are kept as long as their episodes' observations can be re-read.
        self.ended_ttl_ms = topic_specs(settings.kafka)[Topic.OBSERVATIONS].retention_ms
        self.purged_at: dict[int, int] = {}  # partition -> when its old Ended entries went

    def entry_of(self, episode_id: str) -> Entry | None:
        data = self.table.get(episode_id)
        return entry_from_json(data) if data is not None else None

    get = entry_of  # the handlers' state (webgym_common.stream.reliable.TableState)

    async def put(self, episode_id: str, entry: Entry | None, partition: int) -> bool:
        """Write the entry down (True once the broker has it): see the module's story."""
        if entry is None:
            raise ValueError(f"{episode_id}: the policy forgets entries by purging them")
        writing = time.perf_counter()
        written = await put_durably(self.app, self.table, episode_id, entry_to_json(entry),
                                    partition, self.timeout_s)
        if isinstance(entry, Live) and entry.pending is not None:
            # Telemetry on the action about to be published (the same object): the copy
            # written down lacks it, which a republish can live with.
            entry.pending.action.timings_ms["remember"] = (time.perf_counter() - writing) * 1000
        return written

    def purge(self, partition: int, now_ms: int) -> None:
        """Drop `partition`'s Ended entries past their time (at most once a minute)."""
        if now_ms - self.purged_at.get(partition, 0) <= PURGE_EVERY_MS:
            return
        self.purged_at[partition] = now_ms
        for key in expired_ended(list(self.table.items()), partition, now_ms,
                                 self.ended_ttl_ms):
            del self.table[key]
