"""The policy's two acts on an observation, as app.py's `on_observation` dispatches them.

Delivery: `decide_and_publish` writes the episode's new entry down with the action
`pending` (contexts.py), then publishes the action (outputs.py), each returning once Kafka
has it, so the observation (acked when its handler returns) is acked after its action is
acknowledged. `republish` publishes an action written down before a restart unless its
actions partition holds it already: a step read again is published, not decided again.
The model call and each write are tried again while the episode can still use an action
(retry.py, decisions.still_useful); an episode that ends while the model thinks gets no
action.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import faust

from processors.policy.choosers import Choosers
from processors.policy.contexts import Contexts
from processors.policy.decisions import (
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
from webgym_common.stream.reliable import ReliableApp

log = logging.getLogger(__name__)


@dataclass
class Policy:
    """What the handlers share: the app, its memory, the choosers, the outputs."""

    app: faust.App
    reliable: ReliableApp
    contexts: Contexts
    watch: RequestWatch
    choosers: Choosers
    actions: Actions
    max_backoff_s: float


def usefulness(p: Policy, obs: StepObserved, entry: Live) -> Callable[[float], bool]:
    """A dependency down: try again while the episode is live, before its deadline."""
    return lambda next_try_in_s: still_useful(
        p.contexts.entry_of(obs.episode_id), entry.deadline_ms, next_try_in_s, now_ms())


async def republish(p: Policy, what: str, obs: StepObserved, entry: Live, pending: Pending,
                    partition: int) -> None:
    """Publish the action written down for this step, unless its partition holds it."""
    await retried(lambda: p.actions.republish(pending, partition), what,
                  usefulness(p, obs, entry), p.max_backoff_s)


async def decide_and_publish(p: Policy, what: str, obs: StepObserved, entry: Live,
                             partition: int) -> None:
    """Decide, remember (with the action pending), then publish."""
    useful = usefulness(p, obs, entry)
    queued_ms = now_ms() - int(obs.produced_at.timestamp() * 1000)
    ctx = take_instruction(note_effect(entry.ctx, obs), obs)
    chosen = await p.choosers.choose(ctx, obs, what, useful)
    if chosen is None:
        log.info("%s: no action: a dependency stayed down while the episode could use it", what)
        return
    if not isinstance(p.contexts.entry_of(obs.episode_id), Live):
        log.info("%s: no action: the episode ended while the model thought", what)
        return
    remembering = time.perf_counter()
    chosen.timings_ms["queue"] = float(max(0, queued_ms))
    after = decided(entry, ctx, chosen, now_ms())
    if await retried(lambda: p.contexts.remember(ctx.episode_id, after, partition), what,
                     useful, p.max_backoff_s) is not None:
        # Telemetry only: the written-down copy lacks it, which a republish can live with.
        chosen.timings_ms["remember"] = (time.perf_counter() - remembering) * 1000
        await retried(lambda: p.actions.publish(chosen, partition), what, useful,
                      p.max_backoff_s)
    else:
        log.info("%s: no action: it could not be written down before the episode's end", what)
