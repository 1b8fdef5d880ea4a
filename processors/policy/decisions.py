"""The policy processor's decisions, as pure functions over an episode's table entry.

app.py consumes, acting.py calls these and publishes; nothing here touches Kafka or a model.

The `contexts` table holds one entry per episode: `Live` (its context, its deadline,
and the last decided step's action, written down before it is published) from its
EpisodeRequested on, then `Ended` from its EpisodeCompleted on, kept as long
as the episode's observations can be re-read (the observations topic's retention), so
that a re-delivered observation of a finished episode is recognised and skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from processors.policy.policies import Decision
from webgym_common.agent.actions import format_action
from webgym_common.agent.prompts import EpisodeContext, StepRecord
from webgym_common.choices import Driver
from webgym_common.events import ActionChosen, EpisodeRequested, StepObserved
from webgym_common.pagetext import CAPS, cut

ORPHAN = ("no EpisodeRequested for this episode: the episodes partition was read to its end "
          "well after this observation was produced")


@dataclass(frozen=True)
class Pending:
    """The action of the last decided step, written down before it was published, and when
    (the publisher's clock, which also stamps the action's record): a processor restarted
    between the two finds it and publishes it unless the actions partition holds it."""

    action: ActionChosen
    since_ms: int


@dataclass(frozen=True)
class Live:
    """A running episode: what the policy remembers, and when the episode times out."""

    ctx: EpisodeContext
    deadline_ms: int | None = None  # None: an entry written before deadlines were kept
    pending: Pending | None = None  # None: nothing decided yet (or a table's older format)


@dataclass(frozen=True)
class Ended:
    """An episode that has completed; `partition`: where its entry's changelog lives."""

    ended_ms: int
    partition: int


Entry = Live | Ended


def entry_to_json(entry: Entry) -> dict[str, Any]:
    if isinstance(entry, Ended):
        return {"ended_ms": entry.ended_ms, "partition": entry.partition}
    data: dict[str, Any] = {"ctx": entry.ctx.to_json(), "deadline_ms": entry.deadline_ms}
    if entry.pending is not None:
        data["pending"] = {"action": entry.pending.action.model_dump(mode="json"),
                           "since_ms": entry.pending.since_ms}
    return data


def entry_from_json(data: dict[str, Any]) -> Entry:
    if "ended_ms" in data:
        return Ended(int(data["ended_ms"]), int(data.get("partition", -1)))
    if "ctx" in data:
        pending = data.get("pending")
        return Live(EpisodeContext.from_json(data["ctx"]), data.get("deadline_ms"),
                    None if pending is None else Pending(
                        ActionChosen.model_validate(pending["action"]), int(pending["since_ms"])))
    return Live(EpisodeContext.from_json(data))  # a bare context (the table's first format)


def live_from_request(req: EpisodeRequested) -> Live:
    return Live(context_from_request(req), int(req.deadline.timestamp() * 1000))


class Verdict(StrEnum):
    DECIDE = "decide"
    REPUBLISH = "republish"  # its action was written down: publish it unless it is out already
    SKIP = "skip"  # nothing to do, nothing to report: acked
    WAIT = "wait"  # its EpisodeRequested may still arrive
    ORPHAN = "orphan"  # its EpisodeRequested cannot arrive any more: dead-lettered


def context_from_request(req: EpisodeRequested) -> EpisodeContext:
    """A new episode's context: its task, mode, step budget and reference actions."""
    return EpisodeContext(
        episode_id=req.episode_id, task_id=req.task.task_id, task_name=req.task.task_name,
        mode=req.interaction_mode, max_steps=req.max_steps,
        reference_actions=[r.to_avro() for r in req.task.reference_actions],
        demonstration=req.demonstration, policy_version=req.policy_version,
        evaluation=req.split != "train",
        driver=req.driver,
    )


def request_may_come(obs_ms: int, grace_ms: int, end_read_at_ms: int | None,
                     end_offset: int | None, read_up_to: int) -> bool:
    """Whether an observation's EpisodeRequested, not read yet, can still arrive.

    The request is published before the browser starts the episode, so before any
    of its observations, on the same partition number of the episodes topic (both
    are keyed by episode id). It cannot arrive any more once the episodes partition
    has been read (`read_up_to`, exclusive) up to the end offset it had at a moment
    (`end_read_at_ms`) at least `grace_ms` after the observation was produced (slack
    for clocks and for a request published late). Not an age: after downtime the
    observation waits until the requests are read, however old it is.
    """
    if end_read_at_ms is None or end_offset is None:
        return True
    return not (end_read_at_ms >= obs_ms + grace_ms and read_up_to >= end_offset)


def triage(obs: StepObserved, entry: Entry | None, now_ms: int, may_come: bool
           ) -> tuple[Verdict, str]:
    """What to do with an observation, and why (given its episode's entry, if any)."""
    if obs.terminal:
        return Verdict.SKIP, "terminal observation: the episode is over"
    if isinstance(entry, Ended):
        return Verdict.SKIP, "the episode has ended (an observation read again after a restart)"
    if entry is None:
        if may_come:
            return Verdict.WAIT, "its EpisodeRequested has not been read yet"
        return Verdict.ORPHAN, ORPHAN
    if entry.deadline_ms is not None and now_ms >= entry.deadline_ms:
        return Verdict.SKIP, "past the episode's deadline: its browser worker ends it"
    if entry.ctx.driver != Driver.POLICY:
        return Verdict.SKIP, "its actions come from outside (webgym drive, the env server)"
    if entry.pending is not None and entry.pending.action.step == obs.step:
        return Verdict.REPUBLISH, (f"step {obs.step} read again: its action was written down "
                                   "before it was published (a restart since?)")
    return (Verdict.DECIDE, "") if (why := should_decide(entry.ctx, obs)) is None else (
        Verdict.SKIP, why)


def still_useful(current: Entry | None, deadline_ms: int | None, next_try_in_s: float,
                 now_ms: int) -> bool:
    """Whether a step that failed (a dependency down) is worth trying again in
    `next_try_in_s`: its episode is live (`current`: its entry now) and the next try comes
    before the episode's deadline (None: no deadline kept)."""
    return isinstance(current, Live) and (
        deadline_ms is None or now_ms + next_try_in_s * 1000 < deadline_ms)


def expired_ended(entries: Iterable[tuple[str, Any]], partition: int, now_ms: int,
                  ttl_ms: int) -> list[str]:
    """The ids of episodes of `partition` that ended more than `ttl_ms` ago (-1: keep all)."""
    if ttl_ms < 0:
        return []
    out = []
    for key, data in entries:
        if isinstance(data, dict) and "ended_ms" in data:
            ended = entry_from_json(data)
            if isinstance(ended, Ended) and ended.partition == partition and (
                    now_ms - ended.ended_ms > ttl_ms):
                out.append(key)
    return out


def should_decide(ctx: EpisodeContext, obs: StepObserved) -> str | None:
    """Why this observation gets no action (None: decide it)."""
    if obs.step <= ctx.last_decided:
        return f"step {obs.step} was answered already (a resumed episode re-published it)"
    return None


def take_instruction(ctx: EpisodeContext, obs: StepObserved) -> EpisodeContext:
    """The context whose task is the instruction the page wrote, when the observation carries
    one (a MiniWoB++ page states its task at step 0; the task's own text is a placeholder).
    The context is kept after the action, so later steps keep the page's instruction."""
    if not obs.instruction or obs.instruction == ctx.task_name:
        return ctx
    return replace(ctx, task_name=obs.instruction)


def note_effect(ctx: EpisodeContext, obs: StepObserved) -> EpisodeContext:
    """The context with what the previous step's action did, as this observation reports it.
    Cut to the effect's cap: it is the page's text (a dialog's) in every later prompt, and an
    observation published before the worker cut it carries it whole."""
    if not ctx.history or ctx.history[-1].step != obs.step - 1:
        return ctx
    last = replace(ctx.history[-1], effect=cut(obs.error or obs.action_effect or "", CAPS.effect))
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


def decided(entry: Live, ctx: EpisodeContext, chosen: ActionChosen, now_ms: int) -> Live:
    """The entry to write down before `chosen` is published: the next context, and `chosen`
    as pending (the publisher's clock `now_ms` bounds where its record can be)."""
    return Live(next_context(ctx, chosen), entry.deadline_ms, Pending(chosen, now_ms))


def published_already(chosen: ActionChosen, actions: Iterable[Any]) -> bool:
    """Whether `chosen` (by its event id) is among the events read from its actions partition."""
    return any(isinstance(a, ActionChosen) and a.event_id == chosen.event_id for a in actions)


def next_context(ctx: EpisodeContext, chosen: ActionChosen) -> EpisodeContext:
    """The context after publishing `chosen`: one more step of history, memory, last step."""
    record = StepRecord(chosen.step, chosen.thought or "", chosen.action_string)
    return replace(
        ctx,
        history=[*ctx.history, record],
        memory_json=chosen.memory_json if chosen.memory_json is not None else ctx.memory_json,
        last_decided=chosen.step,
    )
