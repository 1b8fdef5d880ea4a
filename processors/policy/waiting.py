"""How far the policy has read its episodes partitions, and waiting for a request there.

An observation whose EpisodeRequested is not in the table waits while the request
can still arrive (decisions.request_may_come): the episodes partition of the same
number is read by another agent, with no order between the two. `RequestWatch`
keeps, per episodes partition, the offset below which every request is in the
table (from the committed offset at assignment, then the requests handled: several
readers write requests down at once, so only the run of done offsets counts), and
wakes the waiting actors whenever the readers wrote something.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from faust.types import TP

from processors.policy.decisions import Entry, Verdict, request_may_come, triage
from webgym_common.events import StepObserved
from webgym_common.stream.handlers import Origin

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class RequestWatch:
    def __init__(self, episodes_topic: str, grace_s: float,
                 end_offsets: Callable[[Any], Awaitable[Mapping[Any, int]]]) -> None:
        self.episodes_topic = episodes_topic
        self.grace_ms = int(grace_s * 1000)
        self.end_offsets = end_offsets  # the consumer's `highwaters(tp)`
        self.read_up_to: dict[Any, int] = {}  # episodes partition -> requests below are read
        self.arrivals = asyncio.Condition()

    def starting_at(self, positions: Mapping[Any, int]) -> None:
        """Assigned partitions and where their reading starts (their committed offsets)."""
        for tp, offset in positions.items():
            if tp.topic == self.episodes_topic:
                self.read_up_to[tp] = max(self.read_up_to.get(tp, 0), offset)

    def forget(self, partitions: set[Any]) -> None:
        for tp in partitions:
            self.read_up_to.pop(tp, None)

    async def read(self, tp: Any, below: int) -> None:
        """Every record of `tp` below offset `below` is handled: wake the waiting actors.

        With several readers at once a record can be done before an earlier one, so
        `below` is the first still in flight (InOrderAcks.done_below), not the last done.
        """
        if tp.topic == self.episodes_topic:
            self.read_up_to[tp] = max(self.read_up_to.get(tp, 0), below)
        await self.wake()

    async def wake(self) -> None:
        """Something was written down: the waiting actors look again."""
        async with self.arrivals:
            self.arrivals.notify_all()

    async def triaged(self, origin: Origin, obs: StepObserved,
                      entry_of: Callable[[str], Entry | None], owned: Callable[[Any], bool]
                      ) -> tuple[Verdict, str, Entry | None]:
        """What to do with the observation read at `origin`, once its request is read or
        cannot come."""
        tp = TP(origin.topic, origin.partition)
        requests_tp = TP(self.episodes_topic, origin.partition)
        obs_ms = min(origin.timestamp_ms, now_ms())  # a future timestamp waits not
        end: int | None = None
        end_at: int | None = None
        told = False  # a wait past the grace is logged once: a silent wait reads as a hang
        while True:
            entry = entry_of(obs.episode_id)
            may_come = request_may_come(obs_ms, self.grace_ms, end_at, end,
                                        self.read_up_to.get(requests_tp, 0))
            verdict, why = triage(obs, entry, now_ms(), may_come)
            if verdict is not Verdict.WAIT:
                return verdict, why, entry
            if not owned(tp):
                return Verdict.SKIP, "its partition moved to another worker", None
            if end is None and now_ms() >= obs_ms + self.grace_ms:
                at = now_ms()  # the end as of now, when a request would long be published
                with contextlib.suppress(Exception):  # Kafka busy: measure it next round
                    end = (await self.end_offsets(requests_tp))[requests_tp]
                    end_at = at
            if not told and now_ms() >= obs_ms + self.grace_ms:
                told = True
                log.info("%s step %d: waiting for its request: %s read below offset %d of "
                         "end %s", obs.episode_id, obs.step, requests_tp,
                         self.read_up_to.get(requests_tp, 0), end)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0), self.arrivals:
                    await self.arrivals.wait()
