"""The policy's decisions (decisions.py): pure functions over an episode's context."""

from __future__ import annotations

from datetime import timedelta

from processors.policy.decisions import (
    action_event,
    context_from_request,
    next_context,
    note_effect,
    should_decide,
    triage,
)
from processors.policy.policies import Decision
from tests.factories import sample_event
from webgym_common.actions import parse_action
from webgym_common.events import EpisodeRequested, StepObserved, Viewport, utc_now
from webgym_common.prompts import EpisodeContext, StepRecord
from webgym_common.replies import ParsedReply


def observation(step: int, **update: object) -> StepObserved:
    return StepObserved(episode_id="ep", task_id="t", step=step, url="http://x/",
                        viewport=Viewport(width=1, height=1)).model_copy(update=update)


def decision(action: str = "Click [3]", memory: str | None = '{"k": 1}') -> Decision:
    reply = ParsedReply(thought="look", action=parse_action(action), memory_json=memory,
                        reasoning="why", raw=f"Thought: look\nAction: {action}")
    return Decision(reply, messages=[{"role": "user", "content": "x"}], prompt_tokens=7,
                    completion_tokens=3, latency_ms=12.5)


def context(**update: object) -> EpisodeContext:
    ctx = EpisodeContext(episode_id="ep", task_id="t", task_name="find it")
    for name, value in update.items():
        setattr(ctx, name, value)
    return ctx


def test_a_request_becomes_a_context_with_its_task_and_reference_actions() -> None:
    req = sample_event("EpisodeRequested")
    assert isinstance(req, EpisodeRequested)
    ctx = context_from_request(req)
    assert (ctx.episode_id, ctx.task_id, ctx.task_name) == (
        req.episode_id, req.task.task_id, req.task.task_name)
    assert (ctx.mode, ctx.max_steps) == (req.interaction_mode, req.max_steps)
    assert ctx.reference_actions == [r.to_avro() for r in req.task.reference_actions]
    assert ctx.history == [] and ctx.last_decided == -1
    assert EpisodeContext.from_json(ctx.to_json()) == ctx  # the table's JSON round trip


def test_triage_skips_terminal_and_old_unknown_observations_only() -> None:
    now = utc_now()
    fresh, old = observation(2, produced_at=now), observation(2, produced_at=now - timedelta(
        seconds=60))
    assert triage(fresh, set(), now, 30) is None  # its request may still be on its way
    assert triage(old, {"ep"}, now, 30) is None  # known: old or not, it is answered
    assert "never saw requested" in (triage(old, set(), now, 30) or "")
    assert "terminal" in (triage(observation(2, terminal=True), {"ep"}, now, 30) or "")


def test_steps_answered_before_are_not_decided_again() -> None:
    ctx = context(last_decided=2)
    assert should_decide(ctx, observation(3)) is None
    assert "answered already" in (should_decide(ctx, observation(2)) or "")
    assert should_decide(ctx, observation(1)) is not None


def test_the_previous_steps_effect_is_noted_without_changing_the_old_context() -> None:
    ctx = context(history=[StepRecord(0, "a", "Click [1]"), StepRecord(1, "b", "Click [2]")])
    noted = note_effect(ctx, observation(2, action_effect="opened a menu"))
    assert noted.history[-1].effect == "opened a menu" and ctx.history[-1].effect == ""
    assert noted.history[0] == ctx.history[0]
    errored = note_effect(ctx, observation(2, error="no element 2", action_effect="x"))
    assert errored.history[-1].effect == "no element 2"  # the error wins
    assert note_effect(ctx, observation(5, action_effect="x")) == ctx  # not the next step
    assert note_effect(context(), observation(0, action_effect="x")) == context()


def test_the_action_event_carries_the_decision_and_its_provenance() -> None:
    chosen = action_event(context(), observation(4), decision(), "s3://b/p.json", "base")
    assert (chosen.episode_id, chosen.step, chosen.action_string) == ("ep", 4, "Click [3]")
    assert chosen.action.kind == "Click" and chosen.action.element == 3
    assert (chosen.thought, chosen.memory_json, chosen.reasoning) == ("look", '{"k": 1}', "why")
    assert chosen.raw_response.startswith("Thought: look")
    assert (chosen.prompt_uri, chosen.policy_version) == ("s3://b/p.json", "base")
    assert (chosen.prompt_tokens, chosen.completion_tokens, chosen.latency_ms) == (7, 3, 12.5)


def test_the_next_context_remembers_the_step_its_memory_and_what_was_decided() -> None:
    ctx = context(memory_json='{"old": 1}', last_decided=3)
    after = next_context(ctx, action_event(ctx, observation(4), decision(), None, "v"))
    assert after.history == [StepRecord(4, "look", "Click [3]")]
    assert (after.memory_json, after.last_decided) == ('{"k": 1}', 4)
    assert ctx.history == [] and ctx.last_decided == 3  # the old context is unchanged
    kept = next_context(ctx, action_event(ctx, observation(4), decision(memory=None), None, "v"))
    assert kept.memory_json == '{"old": 1}'  # a reply without memory keeps the old one
