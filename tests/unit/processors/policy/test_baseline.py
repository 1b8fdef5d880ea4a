"""The scripted baseline (baseline.py): counting marks, then answering nothing."""

from __future__ import annotations

from processors.policy.baseline import BaselinePolicy, baseline_action, is_baseline
from processors.policy.policies import Policy
from tests.factories import sample_event
from webgym_common.agent.actions import format_action
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.events import Mark, StepObserved
from webgym_common.versions import BASELINE_VERSION, version_number


def marks(n: int) -> list[Mark]:
    return [Mark(index=i, ref=f"e{i}", role="button", name=f"b{i}", x=10 * i, y=5, width=8,
                 height=4) for i in range(1, n + 1)]


def observation(step: int, n_marks: int) -> StepObserved:
    obs = sample_event("StepObserved")
    assert isinstance(obs, StepObserved)
    return obs.model_copy(update={"step": step, "marks": marks(n_marks)})


def test_step_k_clicks_mark_k_plus_one_then_it_answers_nothing() -> None:
    strings = [format_action(baseline_action(k, marks(3), 30)) for k in range(5)]
    assert strings == ["Click [1]", "Click [2]", "Click [3]", "ANSWER []", "ANSWER []"]


def test_it_answers_at_the_last_step_whatever_is_left_to_click() -> None:
    assert format_action(baseline_action(3, marks(10), 5)) == "Click [4]"
    assert format_action(baseline_action(4, marks(10), 5)) == "ANSWER []"  # step limit - 1
    assert format_action(baseline_action(0, [], 5)) == "ANSWER []"  # nothing to click


def test_it_clicks_by_the_marks_number_not_its_position_in_the_list() -> None:
    renumbered = [m.model_copy(update={"index": m.index + 10}) for m in marks(3)]
    assert format_action(baseline_action(10, renumbered, 30)) == "Click [11]"
    assert format_action(baseline_action(0, renumbered, 30)) == "ANSWER []"


async def test_the_policy_tags_its_actions_and_keeps_no_prompt() -> None:
    policy: Policy = BaselinePolicy()  # the interface the policy processor calls
    ctx = EpisodeContext(episode_id="e", task_id="t", task_name="x", max_steps=4,
                         policy_version=BASELINE_VERSION, evaluation=True)
    first = await policy.decide(ctx, observation(0, 2))
    assert first.reply.action.kind == "Click" and first.reply.action.element == 1
    assert first.reply.action.valid and first.messages is None
    assert first.policy_version == policy.version == "baseline"
    assert "Action: Click [1]" in first.reply.raw
    last = await policy.decide(ctx, observation(3, 9))
    assert last.reply.action.kind == "ANSWER" and last.reply.action.text == ""


def test_only_episodes_requested_on_the_baseline_tag_are_the_baselines() -> None:
    ctx = EpisodeContext(episode_id="e", task_id="t", task_name="x")
    assert is_baseline(EpisodeContext(**{**ctx.__dict__, "policy_version": "baseline"}))
    assert not any(is_baseline(EpisodeContext(**{**ctx.__dict__, "policy_version": tag}))
                   for tag in ("base", "v3", "demonstration", ""))
    assert version_number(BASELINE_VERSION) is None  # no model version: nothing is pinned
