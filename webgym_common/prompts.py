"""Prompt building: an episode's state and current observation -> OpenAI chat messages.

The prompt carries the task, the current URL, the last 15 steps as
Thought / Action / Action Effect, the memory (JSON), and either the numbered
element list (set-of-marks) or the screenshot (coordinates; also attached in
set-of-marks mode for vision models).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webgym_common.actions import Mode, offered
from webgym_common.config import InteractionMode
from webgym_common.events import Mark

HISTORY_STEPS = 15

SYSTEM = """You are a web agent. You complete the user's task in a web browser, one action \
per turn. Actions:
{actions}

Reply in exactly three labelled parts:
Thought: <what you see and what to do next>
Action: <one action from the list>
Memory_Updated: <a JSON object of facts worth remembering, e.g. {{"price": "$5"}}>"""


def action_list(mode: Mode) -> str:
    """The actions offered in a mode, one per line: syntax, then what it does."""
    rows = [(spec.syntax(mode), form.description) for spec, form in offered(mode)]
    width = max(len(syntax) for syntax, _ in rows) + 2
    return "\n".join(f"{syntax:<{width}}{description}" for syntax, description in rows)


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


def element_list(marks: list[Mark], max_chars: int) -> str:
    lines: list[str] = []
    used = 0
    for m in marks:
        line = f'[{m.index}] {m.role} "{m.name}"' if m.name else f"[{m.index}] {m.role}"
        if used + len(line) > max_chars:
            lines.append(f"... ({len(marks) - len(lines)} more elements not shown)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines) or "(no interactive elements)"


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
    max_element_chars: int = 4000,
) -> list[dict[str, Any]]:
    """OpenAI chat messages; `image_url` (data: or presigned http URL) adds a vision part."""
    mode = InteractionMode(ctx.mode)
    text = (
        f"Task: {ctx.task_name}\n"
        f"Current URL: {url}\n\n"
        f"Previous steps:\n{history_text(ctx.history)}\n\n"
        f"Memory: {ctx.memory_json}\n"
    )
    if mode == InteractionMode.SET_OF_MARKS:
        text += f"\nInteractive elements:\n{element_list(marks, max_element_chars)}\n"
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
