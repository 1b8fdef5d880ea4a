"""The policy processor (faust): observations in, actions out.

Delivery: exactly one action per step, never lost. Each handler (an event and its
episode's entry in, effects out) decides; the runtime (webgym_common.stream.reliable)
writes the entry down, then publishes, then acks in arrival order per partition, so a
SIGKILL never commits past an observation still being decided. A decided step's entry
holds its action `pending` (contexts.py): a step read again is either undecided (decided
now) or its action is published unless its actions partition holds it (outputs.py).
One actor at a time handles an episode. Browser workers act on a step's first action.

webgym.episodes (EpisodeRequested) → `on_request`: remember the task;
webgym.episodes.completed → `on_completed`: remember that the episode ended;
webgym.observations (StepObserved) → `on_observation` → webgym.actions (ActionChosen): by
its verdict it is decided, or its written-down action is published again (acting.py).
The topics and the table are co-partitioned by episode id; `max_inflight` actors decide
at once, so one slow model call never holds up the other episodes.

An observation (decisions.triage) terminal, of an ended episode, late or answered: skipped;
its request unread: it waits while the request can come (waiting.py), then it is
dead-lettered. The model server or MinIO down: tried again until the episode's deadline
(retry.py); a request the model refuses (HTTP 4xx): an explicit Invalid action.
"""

from __future__ import annotations

import logging

import faust

from processors.policy.acting import Policy, choose_action, republish
from processors.policy.choosers import Choosers
from processors.policy.contexts import Contexts
from processors.policy.decisions import Ended, Entry, Live, Verdict, live_from_request
from processors.policy.outputs import Actions
from processors.policy.waiting import RequestWatch, now_ms
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted, EpisodeRequested, StepObserved
from webgym_common.stream.faust_app import faust_topic, make_faust_app
from webgym_common.stream.handlers import NOTHING, Effects, Origin
from webgym_common.stream.reliable import ReliableApp, run_worker
from webgym_common.topics import Group, Topic, topic_name

log = logging.getLogger(__name__)
SOURCES = [Topic.EPISODES, Topic.EPISODES_COMPLETED, Topic.OBSERVATIONS]


async def on_request(req: EpisodeRequested, entry: Entry | None, at: Origin) -> Effects[Entry]:
    """A new episode's Live entry (a live or ended one stays as it is)."""
    return Effects(state=live_from_request(req)) if entry is None else NOTHING


async def on_completed(done: EpisodeCompleted, entry: Entry | None, at: Origin
                       ) -> Effects[Entry]:
    return NOTHING if isinstance(entry, Ended) else Effects(state=Ended(now_ms(), at.partition))


async def on_observation(p: Policy, obs: StepObserved, entry: Entry | None, at: Origin
                         ) -> Effects[Entry]:
    # consume: the observation's episode, once its request is read (or cannot come)
    verdict, why, entry = await p.watch.triaged(at, obs, p.contexts.entry_of, p.owns)
    what = f"{obs.episode_id} step {obs.step}"
    if verdict is Verdict.ORPHAN:
        return Effects(refuse=why)
    if verdict is Verdict.DECIDE and isinstance(entry, Live):
        return await choose_action(p, what, obs, entry)  # remember (action pending), publish
    log.info("%s: %s", what, why)
    if verdict is Verdict.REPUBLISH and isinstance(entry, Live) and entry.pending:
        return await republish(p, what, obs, entry.pending, at.partition)
    return NOTHING


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.policy
    app = make_faust_app(settings, Group.POLICY)
    reliable = ReliableApp(app, settings, SOURCES, max_backoff_s=cfg.retry_max_backoff_s)
    watch = RequestWatch(topic_name(k, Topic.EPISODES), cfg.context_wait_s,
                         lambda tp: app.consumer.highwaters(tp))
    reliable.on_start(watch.starting_at)
    reliable.on_revoke(watch.forget)
    p = Policy(app, contexts := Contexts(app, settings), watch, Choosers(settings),
               Actions(settings), cfg.retry_max_backoff_s)
    episodes, completed, observations = (faust_topic(app, k, t) for t in SOURCES)

    # Requests are written down several at once (a rollout's start is a burst of them).
    # Two copies of one request take turns; not the episode's own turn, which `decide`
    # holds while its first observation waits for this very request.
    @app.agent(episodes, concurrency=cfg.max_inflight)
    async def remember_tasks(stream: faust.StreamT) -> None:
        await reliable.each(stream, EpisodeRequested, on_request, key=lambda r: r.episode_id,
                            state=contexts, turn=lambda r: ("request", r.episode_id),
                            after=lambda e: watch.read(
                                e.message.tp, reliable.acks.done_below(e.message.tp)))

    @app.agent(completed)
    async def forget_finished(stream: faust.StreamT) -> None:
        await reliable.each(stream, EpisodeCompleted, on_completed,
                            key=lambda d: d.episode_id, state=contexts, after=p.ended)

    @app.agent(observations, concurrency=cfg.max_inflight)
    async def decide(stream: faust.StreamT) -> None:
        await reliable.each(stream, StepObserved, lambda o, e, at: on_observation(p, o, e, at),
                            key=lambda o: o.episode_id, state=contexts,
                            turn=lambda o: o.episode_id, retry_while=p.usefulness)

    @app.on_before_shutdown.connect
    async def stop(*args: object, **kwargs: object) -> None:
        await p.actions.stop()

    @app.task
    async def follow_models() -> None:
        """Switch to each newer trained version once vLLM serves it (models.py)."""
        await p.choosers.follow_models()

    return app


def run_policy_worker(settings: Settings) -> None:
    run_worker(build_app(settings))
