"""Where the policy's actions went: webgym.actions, on the observation's partition.

Delivery: the runtime publishes an action (webgym_common.stream.reliable) on its
observation's partition, where `published` looks for it: an action written down before a
kill is published again only if the actions partition, read from when it was written
down, does not hold it already (by event id), so a step decided before a restart goes out
exactly once.
"""

from __future__ import annotations

from processors.policy.decisions import Pending, published_already
from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.stream.readers import PartitionLog
from webgym_common.topics import Topic


class Actions:
    def __init__(self, settings: Settings) -> None:
        self.log = PartitionLog(settings, Codec(), "policy-actions")  # what was published
        self.timeout_s = settings.kafka.request_timeout_ms / 1000

    async def published(self, pending: Pending, partition: int) -> bool:
        """Whether the actions partition holds this written-down action already."""
        since = await self.log.events_since(Topic.ACTIONS, partition, pending.since_ms,
                                            self.timeout_s)
        return published_already(pending.action, since)

    async def stop(self) -> None:
        await self.log.stop()
