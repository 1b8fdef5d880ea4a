"""The scripted baseline: what counting gets you, so nobody mistakes it for skill.

It reads nothing: at observation step k it clicks mark k+1 (the page's k+1-th numbered
element, whatever it is), and once the page has no such mark, or at the episode's last
step (max_steps - 1), it answers with nothing (`ANSWER []`), which submits. A model
version is worth something on a suite only as far as it beats this. Episodes requested on
the tag "baseline" (webgym_common.versions.BASELINE_VERSION; `webgym eval --baseline`)
are routed to it by the policy processor (processors/policy/app.py).

It keeps no prompt (messages None): it was shown nothing, and a step without a prompt
never becomes a replay sample.
"""

from __future__ import annotations

from processors.policy.policies import Decision
from processors.policy.replies import ParsedReply
from webgym_common.agent.actions import ActionKind, format_action
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.events import Mark, ParsedAction, StepObserved
from webgym_common.versions import BASELINE_VERSION


def is_baseline(ctx: EpisodeContext) -> bool:
    """Whether the scripted baseline decides this episode (it was requested on its tag)."""
    return ctx.policy_version == BASELINE_VERSION


def baseline_action(step: int, marks: list[Mark], max_steps: int) -> ParsedAction:
    """Click mark step+1; answer nothing once there is no such mark or at the last step.
    By mark in either interaction mode, as the teacher acts (webgym_common.agent.teacher): the
    browser executes an action by its own mode, and a mark needs no pixel arithmetic."""
    target = next((m for m in marks if m.index == step + 1), None)
    if target is None or step >= max_steps - 1:
        return ParsedAction(kind=ActionKind.ANSWER.value, text="")
    return ParsedAction(kind=ActionKind.CLICK.value, element=target.index)


class BaselinePolicy:
    """The Policy interface (processors.policy.policies.Policy) around baseline_action."""

    version = BASELINE_VERSION

    async def decide(self, ctx: EpisodeContext, obs: StepObserved) -> Decision:
        action = baseline_action(obs.step, obs.marks, ctx.max_steps)
        thought = (f"baseline: click mark {obs.step + 1}" if action.kind == ActionKind.CLICK
                   else "baseline: answer")
        raw = f"Thought: {thought}\nAction: {format_action(action)}\nMemory_Updated: {{}}"
        return Decision(ParsedReply(thought=thought, action=action, memory_json=None,
                                    reasoning=None, raw=raw), messages=None,
                        policy_version=BASELINE_VERSION)
