"""Where the policy's actions go: webgym.actions, on the observation's partition.

Delivery: `publish` returns once the broker has acknowledged the action. `republish`
publishes an action written down before a kill only if the actions partition, read
from when it was written down, does not hold it already (by event id): a step decided
before a restart goes out exactly once.
"""

from __future__ import annotations

import faust

from processors.policy.decisions import Pending, published_already
from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.events import ActionChosen
from webgym_common.stream.faust_app import faust_topic
from webgym_common.stream.readers import PartitionLog
from webgym_common.topics import Topic


class Actions:
    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.topic = faust_topic(app, settings.kafka, Topic.ACTIONS)
        self.log = PartitionLog(settings, Codec(), "policy-actions")  # what was published
        self.timeout_s = settings.kafka.request_timeout_ms / 1000

    async def publish(self, chosen: ActionChosen, partition: int) -> bool:
        # On the observation's partition (co-partitioned by key anyway): where a restarted
        # processor looks for it (republish). True once sent (for retry.retried).
        await (await self.topic.send(key=chosen.episode_id.encode(), value=chosen,
                                     partition=partition))
        return True

    async def republish(self, pending: Pending, partition: int) -> bool:
        """Publish a written-down action unless its actions partition holds it already."""
        since = await self.log.events_since(Topic.ACTIONS, partition, pending.since_ms,
                                            self.timeout_s)
        return published_already(pending.action, since) or await self.publish(
            pending.action, partition)

    async def stop(self) -> None:
        await self.log.stop()
