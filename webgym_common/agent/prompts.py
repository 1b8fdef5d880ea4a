"""Prompt building: an episode's state and current observation -> OpenAI chat messages.

The prompt carries the task, the current URL, the last 15 steps as
Thought / Action / Action Effect, the memory (JSON), and either the page view
(webgym_common.agent.pageview: elements with their numbers, state and values, and the
page's text) or the screenshot (coordinates; also attached in set-of-marks mode
for vision models). The system prompt is sent on every step, so it is kept short.
`PROMPT_VERSION` names the format; training rows record it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webgym_common.agent.actions import Mode, offered
from webgym_common.agent.pageview import page_view
from webgym_common.choices import InteractionMode
from webgym_common.config import PolicySettings
from webgym_common.events import Mark

# Changes whenever what the model is shown changes (system prompt, page view, layout).
PROMPT_VERSION = "p2"
HISTORY_STEPS = 15
# The page view's budget unless a caller gives one (PolicySettings.max_element_chars).
PAGE_CHARS: int = PolicySettings.model_fields["max_element_chars"].default
PAGE_HEADING = "Page (elements end with their [number]):"

SYSTEM = """You are a web agent doing the user's task in a browser, one action per turn.
Actions:
{actions}
Reply with:
Thought: <what to do next>
Action: <one action>
Memory_Updated: <JSON of facts to keep, e.g. {{"price": "$5"}}>"""


def action_list(mode: Mode) -> str:
    """The actions offered in a mode, one per line: `syntax - what it does`."""
    return "\n".join(f"{spec.syntax(mode)} - {form.description}" for spec, form in offered(mode))


@dataclass
class StepRecord:
    step: int
    thought: str
    action: str
    effect: str = ""


@dataclass
class EpisodeContext:
    """Everything the policy remembers about one episode (kept in a changelog-backed table)."""

    episode_id: str
    task_id: str
    task_name: str
    mode: str = "set_of_marks"
    max_steps: int = 30
    reference_actions: list[dict[str, Any]] = field(default_factory=list)
    demonstration: bool = False  # teacher-forced from reference_actions (EpisodeRequested)
    policy_version: str = ""  # the version the episode was requested on (at least that one)
    # A test/ood episode measures exactly the version it was requested on, at the evaluation
    # temperature; a training episode runs on the newest served version (at least its own).
    evaluation: bool = False
    driver: str = "policy"  # EpisodeRequested.driver: external episodes are not ours
    history: list[StepRecord] = field(default_factory=list)
    memory_json: str = "{}"
    last_decided: int = -1  # the last observation step an action was published for

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["history"] = [dict(r.__dict__) for r in self.history]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeContext:
        data = dict(data)
        data["history"] = [StepRecord(**r) for r in data.get("history", [])]
        return cls(**data)


def history_text(history: list[StepRecord]) -> str:
    recent = history[-HISTORY_STEPS:]
    if not recent:
        return "(none yet)"
    return "\n".join(
        f"Step {r.step}:\nThought: {r.thought}\nAction: {r.action}\nAction Effect: {r.effect}"
        for r in recent
    )


def build_messages(
    ctx: EpisodeContext,
    url: str,
    marks: list[Mark],
    image_url: str | None = None,
    max_element_chars: int = PAGE_CHARS,
    tree: str = "",
) -> list[dict[str, Any]]:
    """OpenAI chat messages; `image_url` (data: or presigned http URL) adds a vision part.
    `tree` is the observation's aria snapshot; without it the page view has the marks only."""
    mode = InteractionMode(ctx.mode)
    text = (
        f"Task: {ctx.task_name}\n"
        f"Current URL: {url}\n\n"
        f"Previous steps:\n{history_text(ctx.history)}\n\n"
        f"Memory: {ctx.memory_json}\n"
    )
    if mode == InteractionMode.SET_OF_MARKS:
        # The task is stated above: a page that prints it (MiniWoB) need not repeat it.
        view = page_view(tree, marks, max_element_chars, omit=(ctx.task_name,))
        text += f"\n{PAGE_HEADING}\n{view}\n"
    else:
        text += "\nThe screenshot of the current page is attached.\n"
    text += f"\nStep {len(ctx.history)} of at most {ctx.max_steps}. What is your next action?"
    user: str | list[dict[str, Any]] = text
    if image_url is not None:
        user = [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": image_url}},
        ]
    return [
        {"role": "system", "content": SYSTEM.format(actions=action_list(mode))},
        {"role": "user", "content": user},
    ]
