"""The policy processor (faust): observations in, actions out.

Delivery: exactly one action per step, never lost. An observation is acked after its
ActionChosen is acknowledged by the broker, in arrival order per partition
(webgym_common.faust_app.InOrderAcks), so a SIGKILL never commits past an observation
still being decided: the restarted processor reads it again. Before an action is
published, the episode's new context is written down with the action in it as
`pending`, and the table's changelog record is acknowledged (put_durably). So a step
read again is either undecided (decided now), or its action is written down: published
only if its actions partition, read from when it was written down, does not hold it
(the kill fell between the two writes). Browser workers still act on the first action
of a step only.

Consume EpisodeRequested (remember the task), EpisodeCompleted (remember that the
episode ended) and StepObserved (decide), publish ActionChosen to webgym.actions.
Each episode's entry lives in a faust table whose changelog is in Kafka, so a
restarted or rebalanced processor continues the episode. The three topics are
co-partitioned by episode id. The agent runs `max_inflight` actors, so one slow
model call never holds up the other episodes.

What happens to an observation (decisions.py): terminal, of an ended episode, past
its deadline or answered already: skipped. Its request not read yet: it waits as
long as the request can still arrive (`request_may_come`), then it is dead-lettered.
The model server or MinIO down: retried with backoff until the episode's deadline;
the model refusing the request (HTTP 4xx): an explicit Invalid action carrying the
error, so the episode goes on. Undecodable bytes and bugs: dead-lettered with the
reason. Nothing escapes the agent. The decisions are in decisions.py, the waiting for
a request in waiting.py, the trying again in retry.py.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import faust

from processors.policy.baseline import BaselinePolicy, is_baseline
from processors.policy.decisions import (
    Ended,
    Entry,
    Live,
    Pending,
    Verdict,
    action_event,
    decided,
    entry_from_json,
    entry_to_json,
    expired_ended,
    live_from_request,
    note_effect,
    published_already,
    take_instruction,
)
from processors.policy.models import ServedModels
from processors.policy.policies import (
    TeacherForcingPolicy,
    VllmPolicy,
    make_policy,
    prompt_blob,
    refused,
)
from processors.policy.retry import retried
from processors.policy.waiting import RequestWatch, now_ms
from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    StepObserved,
)
from webgym_common.faust_app import (
    FirstReads,
    InOrderAcks,
    OneAtATime,
    decode_error,
    dlq_sender,
    faust_table,
    faust_topic,
    make_faust_app,
    put_durably,
    rewind_uncommitted,
    typed_events,
)
from webgym_common.objectstore import ObjectStore
from webgym_common.readers import PartitionLog
from webgym_common.topics import Group, StateTable, Topic, topic_specs

log = logging.getLogger(__name__)
PURGE_EVERY_MS = 60_000


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.policy
    app = make_faust_app(settings, Group.POLICY)
    store = ObjectStore(settings.s3)
    policy = make_policy(cfg, store, settings.trainer.model_name)
    # Demonstration episodes (EpisodeRequested.demonstration) are teacher-forced.
    teacher = TeacherForcingPolicy(max_element_chars=cfg.max_element_chars)
    baseline = BaselinePolicy()  # episodes requested on "baseline" (webgym eval --baseline)
    served = ServedModels(settings, policy) if isinstance(policy, VllmPolicy) else None
    specs = topic_specs(k)
    sources = [Topic.EPISODES, Topic.EPISODES_COMPLETED, Topic.OBSERVATIONS]
    episodes, completed, observations = (faust_topic(app, k, t) for t in sources)
    actions = faust_topic(app, k, Topic.ACTIONS)
    action_log = PartitionLog(settings, Codec(), "policy-actions")  # what was published
    timeout_s = k.request_timeout_ms / 1000
    dead_letters = dlq_sender(app, settings)
    contexts = faust_table(app, k, StateTable.POLICY_CONTEXTS)  # episode_id -> entry JSON
    ended_ttl_ms = specs[Topic.OBSERVATIONS].retention_ms  # as long as they can be re-read
    acks = InOrderAcks()
    in_turn = OneAtATime()  # one handler per episode at a time (a re-delivery waits)
    first_reads = FirstReads(app)  # faust's post-recovery seek race (see FirstReads)
    watch = RequestWatch(specs[Topic.EPISODES].name, cfg.context_wait_s,
                         lambda tp: app.consumer.highwaters(tp))
    purged_at: dict[int, int] = {}  # partition -> when its old Ended entries were purged

    @app.on_rebalance_complete.connect
    async def rewind(*args: Any, **kwargs: Any) -> None:
        starts = await rewind_uncommitted(app, {specs[t].name for t in sources})
        watch.starting_at(starts)
        first_reads.starting_at(starts)

    @app.on_before_shutdown.connect
    async def stop(*args: Any, **kwargs: Any) -> None:
        await action_log.stop()

    @app.on_partitions_revoked.connect
    async def revoked(*args: Any, **kwargs: Any) -> None:
        gone = set(args[1]) if len(args) > 1 else set()  # (app, revoked partitions)
        acks.forget(gone)  # their next owner reads what was not acked
        watch.forget(gone)

    @app.agent(episodes)
    async def remember_tasks(stream: faust.StreamT) -> None:
        async for event in stream.events():
            if await first_reads.check(event):
                continue  # it comes again after its partition's start (see FirstReads)
            if (error := decode_error(event)) is not None:
                await dead_letters(event.message, error)
            elif isinstance(req := event.value, EpisodeRequested) and (
                    req.episode_id not in contexts):  # a live or ended episode stays as it is
                await remembered(req.episode_id, live_from_request(req), event.message.partition)
            await watch.read(event.message.tp, event.message.offset)

    @app.agent(completed)
    async def forget_finished(stream: faust.StreamT) -> None:
        async for event, done in typed_events(stream, dead_letters, EpisodeCompleted,
                                              first_reads):
            partition, now = event.message.partition, now_ms()
            if not isinstance(entry_of(done.episode_id), Ended):
                await remembered(done.episode_id, Ended(now, partition), partition)
                await watch.read(event.message.tp, event.message.offset)
            if now - purged_at.get(partition, 0) > PURGE_EVERY_MS:  # written on this partition
                purged_at[partition] = now
                for key in expired_ended(list(contexts.items()), partition, now, ended_ttl_ms):
                    del contexts[key]

    @app.agent(observations, concurrency=cfg.max_inflight)
    async def decide(stream: faust.StreamT) -> None:
        async for event in cast(Any, stream).noack().events():  # acked by `acks`, in order
            if await first_reads.check(event):
                continue  # it comes again after its partition's start (see FirstReads)
            ticket = acks.arrived(event)
            try:
                await handle(event)
            except Exception as err:  # a bug with one observation must not stop the rest
                log.exception("cannot decide %s", event.message)
                await dead_letters(event.message, f"policy error: {type(err).__name__}: {err}")
            acks.done(ticket)

    def entry_of(episode_id: str) -> Entry | None:
        data = contexts.get(episode_id)
        return entry_from_json(data) if data is not None else None

    async def remember(episode_id: str, entry: Entry, partition: int) -> bool:
        # Written down before what follows it (an action, an ack): see the module's story.
        return await put_durably(app, contexts, episode_id, entry_to_json(entry), partition,
                                 timeout_s)

    async def remembered(episode_id: str, entry: Entry, partition: int) -> None:
        """remember(), tried again for as long as Kafka does not take it."""
        await retried(lambda: remember(episode_id, entry, partition), f"{episode_id} entry",
                      lambda _: True, cfg.retry_max_backoff_s)

    async def handle(event: faust.EventT) -> None:
        if (error := decode_error(event)) is not None:
            await dead_letters(event.message, error)
            return
        if isinstance(obs := event.value, StepObserved):
            async with in_turn.of(obs.episode_id):
                await handle_observation(event, obs)

    async def handle_observation(event: faust.EventT, obs: StepObserved) -> None:
        # consume: the observation's episode, once its request is read (or cannot come)
        verdict, why, entry = await watch.triaged(
            event.message, obs, entry_of, lambda tp: tp in app.consumer.assignment())
        if verdict is Verdict.ORPHAN:
            await dead_letters(event.message, why)
            return
        what = f"{obs.episode_id} step {obs.step}"

        def useful(next_try_in_s: float) -> bool:
            deadline = entry.deadline_ms if isinstance(entry, Live) else None
            return isinstance(entry_of(obs.episode_id), Live) and (
                deadline is None or now_ms() + next_try_in_s * 1000 < deadline)

        partition = event.message.partition  # the episode's, on every topic it is on
        if verdict is Verdict.REPUBLISH and isinstance(entry, Live) and (
                pending := entry.pending) is not None:
            log.info("%s: %s", what, why)
            await retried(lambda: republish(pending, partition), what, useful,
                          cfg.retry_max_backoff_s)
            return
        if verdict is not Verdict.DECIDE or not isinstance(entry, Live):
            log.info("%s: %s", what, why)
            return
        # decide (a dependency down: tried again while the episode can use an action)

        ctx = take_instruction(note_effect(entry.ctx, obs), obs)
        chooser = teacher if ctx.demonstration else baseline if is_baseline(ctx) else policy
        if served is not None and chooser is policy:  # the scripted ones need no model
            await served.ready.wait()  # on the newest served version, even right after a start
            if not ctx.evaluation:  # an evaluation names its version (VllmPolicy.choice)
                served.pin(ctx.policy_version)
        decision = await retried(lambda: chooser.decide(ctx, obs), what, useful,
                                 cfg.retry_max_backoff_s, lambda err: refused(err, ctx.mode))
        if decision is None:
            return
        prompt_uri = None
        if decision.messages is not None:
            blob = prompt_blob(decision.messages)
            ref = await retried(lambda: store.put_blob(blob, "application/json"), what, useful,
                                cfg.retry_max_backoff_s)
            if ref is None:
                return
            prompt_uri = ref.uri
        chosen = action_event(ctx, obs, decision, prompt_uri,
                              decision.policy_version or chooser.version)
        # remember (with the action pending), then publish
        if not isinstance(entry_of(obs.episode_id), Live):
            return  # it ended while the model thought: the action is of no use
        after = decided(entry, ctx, chosen, now_ms())
        if await retried(lambda: remember(ctx.episode_id, after, partition), what, useful,
                         cfg.retry_max_backoff_s) is None:
            return
        await retried(lambda: publish(chosen, partition), what, useful, cfg.retry_max_backoff_s)

    async def publish(chosen: ActionChosen, partition: int) -> bool:
        # On the observation's partition (co-partitioned by key anyway): where a restarted
        # processor looks for it (republish).
        await (await actions.send(key=chosen.episode_id.encode(), value=chosen,
                                  partition=partition))
        return True

    async def republish(pending: Pending, partition: int) -> bool:
        """Publish a written-down action unless its actions partition holds it already."""
        since = await action_log.events_since(Topic.ACTIONS, partition, pending.since_ms,
                                              timeout_s)
        return published_already(pending.action, since) or await publish(pending.action,
                                                                         partition)

    @app.task
    async def follow_models() -> None:
        """Switch to each newer trained version once vLLM serves it (processors/policy/models)."""
        if served is not None:
            await served.follow()

    return app


def run_policy_worker(settings: Settings) -> None:
    """Run the faust worker in the foreground until SIGTERM/SIGINT."""
    app = build_app(settings)
    worker = faust.Worker(app, loglevel="INFO", quiet=True)
    worker.execute_from_commandline()
