"""The policy processor (faust): observations in, actions out.

Consume EpisodeRequested (remember the task) and StepObserved (decide), publish
ActionChosen to webgym.actions. Each episode's context lives in a faust table
whose changelog is in Kafka, so a restarted or rebalanced processor continues
the episode. The agent runs `max_inflight` actors, so one slow model call never
holds up the other episodes. Observations already answered (re-published by a
browser worker that resumed an episode) are skipped by step number.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust

from processors.policy.policies import Decision, VllmPolicy, make_policy, prompt_blob
from webgym_common.actions import format_action
from webgym_common.bus import EventConsumer, EventProducer
from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    DeadLetter,
    EpisodeCompleted,
    EpisodeRequested,
    ModelVersion,
    StepObserved,
    utc_now,
)
from webgym_common.faust_app import make_faust_app
from webgym_common.objectstore import ObjectStore
from webgym_common.prompts import EpisodeContext, StepRecord
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)


def build_app(settings: Settings) -> faust.App:
    k = settings.kafka
    app = make_faust_app(settings, "policy")
    codec = Codec()
    store = ObjectStore(settings.s3)
    policy = make_policy(settings.policy, store)

    def topic(t: Topic) -> faust.TopicT:
        return app.topic(topic_name(k, t), key_type=bytes, value_type=bytes,
                         partitions=k.partitions if t != Topic.DLQ else 1)

    episodes, observations = topic(Topic.EPISODES), topic(Topic.OBSERVATIONS)
    completed, actions = topic(Topic.EPISODES_COMPLETED), topic(Topic.ACTIONS)
    dlq = topic(Topic.DLQ)
    # JSON keys and values: they must read back as the same str/dict after recovery.
    contexts = app.Table("policy-contexts", partitions=k.partitions, schema=faust.Schema(
        key_type=str, key_serializer="json", value_serializer="json"))

    async def decode(event: faust.EventT) -> Any | None:
        try:
            return codec.decode(event.value)
        except DecodeError as err:
            msg = event.message
            letter = DeadLetter(source_topic=msg.topic, source_partition=msg.partition,
                                source_offset=msg.offset, source_key=msg.key,
                                raw_value=msg.value or b"", error=str(err),
                                consumer_group=app.conf.id)
            await (await dlq.send(key=msg.topic.encode(), value=codec.encode(letter)))
            return None

    # -- remember each episode's task -----------------------------------------

    @app.agent(episodes)
    async def remember_tasks(stream: faust.StreamT) -> None:
        async for event in stream.events():
            req = await decode(event)
            if isinstance(req, EpisodeRequested) and req.episode_id not in contexts:
                contexts[req.episode_id] = EpisodeContext(
                    episode_id=req.episode_id, task_id=req.task.task_id,
                    task_name=req.task.task_name, mode=req.interaction_mode,
                    max_steps=req.max_steps,
                    reference_actions=[r.to_avro() for r in req.task.reference_actions],
                ).to_json()

    @app.agent(completed)
    async def forget_finished(stream: faust.StreamT) -> None:
        async for event in stream.events():
            done = await decode(event)
            if isinstance(done, EpisodeCompleted) and done.episode_id in contexts:
                del contexts[done.episode_id]

    # -- decide -----------------------------------------------------------------

    @app.agent(observations, concurrency=settings.policy.max_inflight)
    async def decide(stream: faust.StreamT) -> None:
        async for event in stream.events():
            obs = await decode(event)
            if not isinstance(obs, StepObserved) or obs.terminal:
                continue
            if obs.episode_id not in contexts and age_s(obs) > settings.policy.context_wait_s:
                continue  # history from before this processor's time: nobody waits for it
            ctx = await wait_for_context(obs.episode_id)
            if ctx is None:
                await dead_letter_orphan(event)
                continue
            if obs.step <= ctx.last_decided:
                continue  # answered before: a resumed episode re-published this step
            note_effect(ctx, obs)
            decision = await policy.decide(ctx, obs)
            await publish(ctx, obs, decision)

    async def wait_for_context(episode_id: str) -> EpisodeContext | None:
        """The episode's context; the request travels on another topic, so it may lag."""
        deadline = asyncio.get_running_loop().time() + settings.policy.context_wait_s
        while episode_id not in contexts:
            if asyncio.get_running_loop().time() > deadline:
                return None
            await asyncio.sleep(0.1)
        return EpisodeContext.from_json(contexts[episode_id])

    async def dead_letter_orphan(event: faust.EventT) -> None:
        msg = event.message
        letter = DeadLetter(source_topic=msg.topic, source_partition=msg.partition,
                            source_offset=msg.offset, source_key=msg.key,
                            raw_value=msg.value or b"", consumer_group=app.conf.id,
                            error="no EpisodeRequested for this episode arrived in time")
        await (await dlq.send(key=msg.topic.encode(), value=codec.encode(letter)))

    def note_effect(ctx: EpisodeContext, obs: StepObserved) -> None:
        if ctx.history and ctx.history[-1].step == obs.step - 1:
            ctx.history[-1].effect = obs.error or obs.action_effect or ""

    async def publish(ctx: EpisodeContext, obs: StepObserved, d: Decision) -> None:
        prompt_uri = None
        if d.messages is not None:
            prompt_uri = (await store.put_blob(prompt_blob(d.messages), "application/json")).uri
        chosen = ActionChosen(
            episode_id=ctx.episode_id, step=obs.step, action=d.reply.action,
            action_string=format_action(d.reply.action), thought=d.reply.thought,
            memory_json=d.reply.memory_json, raw_response=d.reply.raw,
            reasoning=d.reply.reasoning, prompt_uri=prompt_uri,
            prompt_tokens=d.prompt_tokens, completion_tokens=d.completion_tokens,
            latency_ms=d.latency_ms, policy_version=policy.version,
        )
        await (await actions.send(key=ctx.episode_id.encode(), value=codec.encode(chosen)))
        ctx.history.append(StepRecord(obs.step, d.reply.thought or "", chosen.action_string))
        if d.reply.memory_json is not None:
            ctx.memory_json = d.reply.memory_json
        ctx.last_decided = obs.step
        contexts[ctx.episode_id] = ctx.to_json()

    # -- follow new model versions ------------------------------------------------

    @app.task
    async def follow_models() -> None:
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

    app.policy = policy  # for tests and benchmarks
    return app


def age_s(event: StepObserved) -> float:
    return (utc_now() - event.produced_at).total_seconds()


def run_policy_worker(settings: Settings) -> None:
    """Run the faust worker in the foreground until SIGTERM/SIGINT."""
    app = build_app(settings)
    worker = faust.Worker(app, loglevel="INFO", quiet=True)
    worker.execute_from_commandline()
