"""A browser worker's view of webgym.control: the CancelEpisode events.

Read from the beginning without a group, so a cancel published before its request
reached this worker (or before the worker started) is still seen.
"""

from __future__ import annotations

from collections.abc import Callable

from webgym_common.config import Settings
from webgym_common.events import CancelEpisode
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic


async def follow_cancels(settings: Settings, producer: EventProducer,
                         on_cancel: Callable[[CancelEpisode], None]) -> None:
    """Call `on_cancel` for every CancelEpisode, forever."""
    async with EventConsumer(
        settings, [Topic.CONTROL], None, producer, client_id="browser-control"
    ) as control:
        async for received in control.events():
            if isinstance(received.event, CancelEpisode):
                on_cancel(received.event)
