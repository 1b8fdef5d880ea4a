"""The policy's two acts on an observation, as app.py's `on_observation` dispatches them.

Delivery: both return effects the runtime applies (webgym_common.stream.reliable): the
episode's new entry written down with the action `pending` (contexts.py), then the action
published, each returning once Kafka has it, so the observation (acked once its effects
are applied) is acked after its action is acknowledged. `republish` publishes an action
written down before a restart unless its actions partition holds it already
(outputs.py): a step read again is published, not decided again. The model call, the
read and each write are tried again while the episode can still use an action (retry.py,
decisions.still_useful); an episode that ends while the model thinks gets no action.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import faust

from processors.policy.choosers import Choosers
from processors.policy.contexts import Contexts
from processors.policy.decisions import (
    Entry,
    Live,
    Pending,
    decided,
    note_effect,
    still_useful,
    take_instruction,
)
from processors.policy.outputs import Actions
from processors.policy.retry import retried
from processors.policy.waiting import RequestWatch, now_ms
from webgym_common.events import StepObserved
from webgym_common.stream.handlers import NOTHING, Effects, Publish
from webgym_common.topics import Topic

log = logging.getLogger(__name__)


@dataclass
class Policy:
    """What the handlers share: the app, its memory, the choosers, the outputs."""

    app: faust.App
    contexts: Contexts
    watch: RequestWatch
    choosers: Choosers
    actions: Actions
    max_backoff_s: float

    def owns(self, tp: object) -> bool:
        return tp in self.app.consumer.assignment()

    async def ended(self, event: faust.EventT) -> None:
        """An episode's completion is handled: its waiting observations are skipped now, and
        the partition's old ended entries go."""
        await self.watch.wake()
        self.contexts.purge(event.message.partition, now_ms())

    def usefulness(self, obs: StepObserved) -> Callable[[float], bool]:
        """A dependency down: try again while the episode is live, before its deadline."""
        def useful(next_try_in_s: float) -> bool:
            entry = self.contexts.entry_of(obs.episode_id)
            deadline = entry.deadline_ms if isinstance(entry, Live) else None
            return still_useful(entry, deadline, next_try_in_s, now_ms())
        return useful


async def republish(p: Policy, what: str, obs: StepObserved, pending: Pending,
                    partition: int) -> Effects[Entry]:
    """Publish the action written down for this step, unless its partition holds it."""
    there = await retried(lambda: p.actions.published(pending, partition), what,
                          p.usefulness(obs), p.max_backoff_s)
    if there is None or there:
        return NOTHING
    return Effects([Publish(Topic.ACTIONS, obs.episode_id, pending.action)])


async def choose_action(p: Policy, what: str, obs: StepObserved, entry: Live
                        ) -> Effects[Entry]:
    """Decide: the new entry (with the action pending) to remember, then the action."""
    queued_ms = now_ms() - int(obs.produced_at.timestamp() * 1000)
    ctx = take_instruction(note_effect(entry.ctx, obs), obs)
    chosen = await p.choosers.choose(ctx, obs, what, p.usefulness(obs))
    if chosen is None:
        log.info("%s: no action: a dependency stayed down while the episode could use it", what)
        return NOTHING
    if not isinstance(p.contexts.entry_of(obs.episode_id), Live):
        log.info("%s: no action: the episode ended while the model thought", what)
        return NOTHING
    chosen.timings_ms["queue"] = float(max(0, queued_ms))
    return Effects([Publish(Topic.ACTIONS, obs.episode_id, chosen)],
                   decided(entry, ctx, chosen, now_ms()))
