"""Model replies -> (thought, action, memory), WebGym's three labelled parts.

    Thought: ...
    Action: Click [3]
    Memory_Updated: {"price": "$5"}

Thinking models put reasoning in <think>...</think> first; it is stripped before
parsing and kept in `reasoning`. A reply that does not parse becomes an Invalid
action with the reason; parsing never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from webgym_common.agent.actions import Mode, invalid, parse_action
from webgym_common.events import ParsedAction

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S | re.I)
# "Action:", "**Action:**" and "**Action**:" all count.
_LABEL = re.compile(
    r"^\s*\**\s*(thought|action|memory_updated|memory)\s*\**\s*:\s*\**\s*", re.I | re.M
)


@dataclass(frozen=True)
class ParsedReply:
    thought: str | None
    action: ParsedAction
    memory_json: str | None  # a JSON object, or None when the reply had none usable
    reasoning: str | None
    raw: str


def split_reasoning(raw: str) -> tuple[str, str | None]:
    """Strip <think>...</think> (an unclosed one runs to the end) and return it separately."""
    found = _THINK.findall(raw)
    if not found:
        return raw, None
    visible = _THINK.sub("", raw)
    return visible, "\n".join(part.strip() for part in found).strip() or None


def _sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    matches = list(_LABEL.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        label = m.group(1).lower()
        label = "memory_updated" if label == "memory" else label
        out.setdefault(label, text[m.end():end].strip())
    return out


def _memory(text: str | None) -> str | None:
    if not text:
        return None
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None


def parse_reply(raw: str, mode: Mode = "set_of_marks") -> ParsedReply:
    visible, reasoning = split_reasoning(raw or "")
    parts = _sections(visible)
    action_text = parts.get("action", "")
    # The action is the first non-empty line after the label (models add chatter below).
    line = next((ln.strip().strip("`") for ln in action_text.splitlines() if ln.strip()), "")
    if not line:
        action = invalid(visible.strip()[:500], "the reply has no 'Action:' line", mode)
    else:
        action = parse_action(line, mode)
    return ParsedReply(
        thought=parts.get("thought") or None,
        action=action,
        memory_json=_memory(parts.get("memory_updated")),
        reasoning=reasoning,
        raw=raw,
    )
