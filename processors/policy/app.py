"""The policy processor (faust): observations in, actions out.

Delivery: at least once. An observation's offset is acked after its ActionChosen
is acknowledged by the broker; a restarted processor may answer a step again, and
browser workers act on the first action of a step only.

Consume EpisodeRequested (remember the task) and StepObserved (decide), publish
ActionChosen to webgym.actions. Each episode's context lives in a faust table
whose changelog is in Kafka, so a restarted or rebalanced processor continues
the episode. The agent runs `max_inflight` actors, so one slow model call never
holds up the other episodes. Observations already answered (re-published by a
browser worker that resumed an episode) are skipped by step number. The
decisions are in decisions.py.
"""

from __future__ import annotations

import asyncio
import logging

import faust

from processors.policy.decisions import (
    ORPHAN,
    action_event,
    context_from_request,
    next_context,
    note_effect,
    should_decide,
    triage,
)
from processors.policy.policies import Decision, VllmPolicy, make_policy, prompt_blob
from webgym_common.bus import EventConsumer, EventProducer
from webgym_common.config import Settings
from webgym_common.events import (
    EpisodeCompleted,
    EpisodeRequested,
    ModelVersion,
    StepObserved,
    utc_now,
)
from webgym_common.faust_app import (
    dlq_sender,
    faust_table,
    faust_topic,
    make_faust_app,
    typed_events,
)
from webgym_common.objectstore import ObjectStore
from webgym_common.prompts import EpisodeContext
from webgym_common.topics import Group, StateTable, Topic

log = logging.getLogger(__name__)


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.policy
    app = make_faust_app(settings, Group.POLICY)
    store = ObjectStore(settings.s3)
    policy = make_policy(cfg, store)
    episodes, observations = faust_topic(app, k, Topic.EPISODES), faust_topic(
        app, k, Topic.OBSERVATIONS)
    completed, actions = faust_topic(app, k, Topic.EPISODES_COMPLETED), faust_topic(
        app, k, Topic.ACTIONS)
    dead_letters = dlq_sender(app, k)
    contexts = faust_table(app, k, StateTable.POLICY_CONTEXTS)  # episode_id -> context JSON

    @app.agent(episodes)
    async def remember_tasks(stream: faust.StreamT) -> None:
        async for _, req in typed_events(stream, dead_letters, EpisodeRequested):
            if req.episode_id not in contexts:
                contexts[req.episode_id] = context_from_request(req).to_json()

    @app.agent(completed)
    async def forget_finished(stream: faust.StreamT) -> None:
        async for _, done in typed_events(stream, dead_letters, EpisodeCompleted):
            if done.episode_id in contexts:
                del contexts[done.episode_id]

    @app.agent(observations, concurrency=cfg.max_inflight)
    async def decide(stream: faust.StreamT) -> None:
        async for event, obs in typed_events(stream, dead_letters, StepObserved):
            # consume
            if triage(obs, contexts, utc_now(), cfg.context_wait_s) is not None:
                continue
            ctx = await wait_for_context(obs.episode_id)
            if ctx is None:
                await dead_letters(event.message, ORPHAN)
                continue
            # decide
            if should_decide(ctx, obs) is not None:
                continue
            ctx = note_effect(ctx, obs)
            decision = await policy.decide(ctx, obs)
            chosen = action_event(ctx, obs, decision, await store_prompt(decision),
                                  policy.version)
            # publish, then remember
            await (await actions.send(key=ctx.episode_id.encode(), value=chosen))
            contexts[ctx.episode_id] = next_context(ctx, chosen).to_json()

    async def wait_for_context(episode_id: str) -> EpisodeContext | None:
        """The episode's context; the request travels on another topic, so it may lag."""
        deadline = asyncio.get_running_loop().time() + cfg.context_wait_s
        while episode_id not in contexts:
            if asyncio.get_running_loop().time() > deadline:
                return None
            await asyncio.sleep(0.1)
        return EpisodeContext.from_json(contexts[episode_id])

    async def store_prompt(decision: Decision) -> str | None:
        if decision.messages is None:
            return None
        return (await store.put_blob(prompt_blob(decision.messages), "application/json")).uri

    @app.task
    async def follow_models() -> None:
        """Use each new ModelVersion (webgym.models) from the next decision on."""
        if not isinstance(policy, VllmPolicy):
            return
        async with EventProducer(settings, client_id="policy-models") as producer:
            async with EventConsumer(settings, [Topic.MODELS], None, producer,
                                     client_id="policy-models") as models:
                async for received in models.events():
                    if isinstance(received.event, ModelVersion):
                        mv = received.event
                        policy.use_model(mv.model_name, f"{mv.model_name}:v{mv.version}")
                        log.info("policy now uses %s v%d", mv.model_name, mv.version)

    return app


def run_policy_worker(settings: Settings) -> None:
    """Run the faust worker in the foreground until SIGTERM/SIGINT."""
    app = build_app(settings)
    worker = faust.Worker(app, loglevel="INFO", quiet=True)
    worker.execute_from_commandline()
