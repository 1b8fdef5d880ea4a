"""The policy processor's decisions, as pure functions over an episode's context.

app.py consumes, calls these, and publishes; nothing here touches Kafka or a model.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import replace
from datetime import datetime

from processors.policy.policies import Decision
from webgym_common.actions import format_action
from webgym_common.events import ActionChosen, EpisodeRequested, StepObserved
from webgym_common.prompts import EpisodeContext, StepRecord

ORPHAN = "no EpisodeRequested for this episode arrived in time"


def context_from_request(req: EpisodeRequested) -> EpisodeContext:
    """A new episode's context: its task, mode, step budget and reference actions."""
    return EpisodeContext(
        episode_id=req.episode_id, task_id=req.task.task_id, task_name=req.task.task_name,
        mode=req.interaction_mode, max_steps=req.max_steps,
        reference_actions=[r.to_avro() for r in req.task.reference_actions],
    )


def triage(obs: StepObserved, known: Container[str], now: datetime, context_wait_s: float
           ) -> str | None:
    """Why this observation needs no decision, told before its context is awaited.

    None: it may need one. `known`: the episodes whose context is in the table.
    """
    if obs.terminal:
        return "terminal observation: the episode is over"
    age_s = (now - obs.produced_at).total_seconds()
    if obs.episode_id not in known and age_s > context_wait_s:
        # History from before this processor's time: nobody waits for an answer.
        return "an old observation of an episode this processor never saw requested"
    return None


def should_decide(ctx: EpisodeContext, obs: StepObserved) -> str | None:
    """Why this observation gets no action (None: decide it)."""
    if obs.step <= ctx.last_decided:
        return f"step {obs.step} was answered already (a resumed episode re-published it)"
    return None


def note_effect(ctx: EpisodeContext, obs: StepObserved) -> EpisodeContext:
    """The context with what the previous step's action did, as this observation reports it."""
    if not ctx.history or ctx.history[-1].step != obs.step - 1:
        return ctx
    last = replace(ctx.history[-1], effect=obs.error or obs.action_effect or "")
    return replace(ctx, history=[*ctx.history[:-1], last])


def action_event(ctx: EpisodeContext, obs: StepObserved, d: Decision, prompt_uri: str | None,
                 policy_version: str) -> ActionChosen:
    """The ActionChosen to publish for this observation."""
    return ActionChosen(
        episode_id=ctx.episode_id, step=obs.step, action=d.reply.action,
        action_string=format_action(d.reply.action), thought=d.reply.thought,
        memory_json=d.reply.memory_json, raw_response=d.reply.raw,
        reasoning=d.reply.reasoning, prompt_uri=prompt_uri,
        prompt_tokens=d.prompt_tokens, completion_tokens=d.completion_tokens,
        latency_ms=d.latency_ms, policy_version=policy_version,
    )


def next_context(ctx: EpisodeContext, chosen: ActionChosen) -> EpisodeContext:
    """The context after publishing `chosen`: one more step of history, memory, last step."""
    record = StepRecord(chosen.step, chosen.thought or "", chosen.action_string)
    return replace(
        ctx,
        history=[*ctx.history, record],
        memory_json=chosen.memory_json if chosen.memory_json is not None else ctx.memory_json,
        last_decided=chosen.step,
    )
