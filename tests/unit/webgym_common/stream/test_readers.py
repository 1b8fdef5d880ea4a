"""PartitionLog's timeout holds even when the Kafka client swallows its cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.stream.readers import PartitionLog
from webgym_common.topics import Topic


class WedgedConsumer:
    """Answers no offset lookup and ignores the first cancellation (as a wedged client
    can); the second one, at the end of the test's loop, ends it."""

    def __init__(self) -> None:
        self.stopped = False

    def assign(self, parts: Any) -> None:
        pass

    async def offsets_for_times(self, query: Any) -> dict[Any, Any]:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(3600)
        return {}

    async def stop(self) -> None:
        self.stopped = True


class EmptyConsumer(WedgedConsumer):
    async def offsets_for_times(self, query: Any) -> dict[Any, Any]:
        return {}

    async def end_offsets(self, parts: Any) -> dict[Any, int]:
        return {p: 0 for p in parts}


async def test_a_wedged_read_times_out_and_the_next_read_connects_afresh() -> None:
    log = PartitionLog(Settings(), Codec(), "test")
    wedged = WedgedConsumer()
    log.consumer = wedged  # type: ignore[assignment]
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(TimeoutError, match="took over"):
        await log.events_since(Topic.ACTIONS, 0, 0, timeout_s=0.2)
    assert loop.time() - began < 2.0
    assert log.consumer is None  # abandoned with its read

    fresh = EmptyConsumer()
    log.consumer = fresh  # type: ignore[assignment]
    # The wedged read still holds the old lock; the new read must not wait for it.
    assert await log.events_since(Topic.ACTIONS, 0, 0, timeout_s=1.0) == []
