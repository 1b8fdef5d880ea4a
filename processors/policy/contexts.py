"""The policy's memory: one entry per episode in a faust table whose changelog is in Kafka.

Delivery: an entry is written down durably (`remember` returns once the broker has
acknowledged its changelog record, webgym_common.stream.faust_app.put_durably), so whatever
follows it — an action published, an observation acked — never stands without it.
The table is co-partitioned with the policy's sources by episode id: a restarted or
rebalanced processor recovers the entries of the partitions it takes.
"""

from __future__ import annotations

import faust

from processors.policy.decisions import (
    Ended,
    Entry,
    entry_from_json,
    entry_to_json,
    expired_ended,
    live_from_request,
)
from processors.policy.retry import retried
from webgym_common.config import Settings
from webgym_common.events import EpisodeRequested
from webgym_common.stream.faust_app import faust_table, put_durably
from webgym_common.topics import StateTable, Topic, topic_specs

PURGE_EVERY_MS = 60_000


class Contexts:
    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.table = faust_table(app, settings.kafka, StateTable.POLICY_CONTEXTS)
        self.timeout_s = settings.kafka.request_timeout_ms / 1000
        self.max_backoff_s = settings.policy.retry_max_backoff_s
        # Ended entries are kept as long as their episodes' observations can be re-read.
        self.ended_ttl_ms = topic_specs(settings.kafka)[Topic.OBSERVATIONS].retention_ms
        self.purged_at: dict[int, int] = {}  # partition -> when its old Ended entries went

    def entry_of(self, episode_id: str) -> Entry | None:
        data = self.table.get(episode_id)
        return entry_from_json(data) if data is not None else None

    async def remember(self, episode_id: str, entry: Entry, partition: int) -> bool:
        """Write the entry down (True once the broker has it): see the module's story."""
        return await put_durably(self.app, self.table, episode_id, entry_to_json(entry),
                                 partition, self.timeout_s)

    async def remembered(self, episode_id: str, entry: Entry, partition: int) -> None:
        """remember(), tried again for as long as Kafka does not take it."""
        await retried(lambda: self.remember(episode_id, entry, partition),
                      f"{episode_id} entry", lambda _: True, self.max_backoff_s)

    def purge(self, partition: int, now_ms: int) -> None:
        """Drop `partition`'s Ended entries past their time (at most once a minute)."""
        if now_ms - self.purged_at.get(partition, 0) <= PURGE_EVERY_MS:
            return
        self.purged_at[partition] = now_ms
        for key in expired_ended(list(self.table.items()), partition, now_ms,
                                 self.ended_ttl_ms):
            del self.table[key]

    async def start(self, req: EpisodeRequested, partition: int) -> None:
        """A new episode's Live entry (a live or ended one stays as it is)."""
        if req.episode_id not in self.table:
            await self.remembered(req.episode_id, live_from_request(req), partition)

    async def end(self, episode_id: str, partition: int, now_ms: int) -> bool:
        """The episode's Ended entry; False if it had one already."""
        if isinstance(self.entry_of(episode_id), Ended):
            return False
        await self.remembered(episode_id, Ended(now_ms, partition), partition)
        return True
