"""The policy processor (faust): observations in, actions out.

Delivery: exactly one action per step, never lost. An observation is acked after its
ActionChosen is acknowledged, in arrival order per partition (webgym_common.stream.reliable),
so a SIGKILL never commits past an observation still being decided. Before an action
is published the episode's new entry is written down with the action `pending`
(contexts.py): a step read again is either undecided (decided now) or its action is
published unless its actions partition holds it already (outputs.py). One actor at a
time handles an episode. Browser workers act on the first action of a step only.

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

from processors.policy.acting import Policy, decide_and_publish, republish
from processors.policy.choosers import Choosers
from processors.policy.contexts import Contexts
from processors.policy.decisions import Live, Verdict
from processors.policy.outputs import Actions
from processors.policy.waiting import RequestWatch, now_ms
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted, EpisodeRequested, StepObserved
from webgym_common.stream.faust_app import faust_topic, make_faust_app
from webgym_common.stream.reliable import ReliableApp, run_worker
from webgym_common.topics import Group, Topic, topic_name

log = logging.getLogger(__name__)
SOURCES = [Topic.EPISODES, Topic.EPISODES_COMPLETED, Topic.OBSERVATIONS]


async def on_request(p: Policy, event: faust.EventT, req: EpisodeRequested) -> None:
    await p.contexts.start(req, event.message.partition)


async def on_completed(p: Policy, event: faust.EventT, done: EpisodeCompleted) -> None:
    partition = event.message.partition
    if await p.contexts.end(done.episode_id, partition, now_ms()):
        await p.watch.wake()
    p.contexts.purge(partition, now_ms())


async def on_observation(p: Policy, event: faust.EventT, obs: StepObserved) -> None:
    # consume: the observation's episode, once its request is read (or cannot come)
    verdict, why, entry = await p.watch.triaged(
        event.message, obs, p.contexts.entry_of, lambda tp: tp in p.app.consumer.assignment())
    what, partition = f"{obs.episode_id} step {obs.step}", event.message.partition
    if verdict is Verdict.ORPHAN:
        await p.reliable.dead_letters(event.message, why)
    elif verdict is Verdict.REPUBLISH and isinstance(entry, Live) and entry.pending:
        log.info("%s: %s", what, why)
        await republish(p, what, obs, entry, entry.pending, partition)
    elif verdict is not Verdict.DECIDE or not isinstance(entry, Live):
        log.info("%s: %s", what, why)
    else:  # decide, remember (with the action pending), then publish
        await decide_and_publish(p, what, obs, entry, partition)


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.policy
    app = make_faust_app(settings, Group.POLICY)
    reliable = ReliableApp(app, settings, SOURCES)
    watch = RequestWatch(topic_name(k, Topic.EPISODES), cfg.context_wait_s,
                         lambda tp: app.consumer.highwaters(tp))
    reliable.on_start(watch.starting_at)
    reliable.on_revoke(watch.forget)
    p = Policy(app, reliable, Contexts(app, settings), watch, Choosers(settings),
               Actions(app, settings), cfg.retry_max_backoff_s)
    episodes, completed, observations = (faust_topic(app, k, t) for t in SOURCES)

    # Requests are written down several at once: a burst of new episodes (a rollout's
    # start) would otherwise queue behind one durable table write each. Two copies of one
    # request take turns; the key is not the episode's own, which `decide` holds while
    # its first observation waits for this very request.
    @app.agent(episodes, concurrency=cfg.max_inflight)
    async def remember_tasks(stream: faust.StreamT) -> None:
        await reliable.each(stream, EpisodeRequested, lambda e, v: on_request(p, e, v),
                            key=lambda req: ("request", req.episode_id),
                            after=lambda e: watch.read(
                                e.message.tp, reliable.acks.done_below(e.message.tp)))

    @app.agent(completed)
    async def forget_finished(stream: faust.StreamT) -> None:
        await reliable.each(stream, EpisodeCompleted, lambda e, v: on_completed(p, e, v))

    @app.agent(observations, concurrency=cfg.max_inflight)
    async def decide(stream: faust.StreamT) -> None:
        await reliable.each(stream, StepObserved, lambda e, v: on_observation(p, e, v),
                            key=lambda obs: obs.episode_id)

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
