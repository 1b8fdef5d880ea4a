"""Teacher forcing: turn a task's reference actions into concrete actions on the page seen.

Reference steps name their element by ARIA role and accessible name; the
observation's marks give the number it has on this page. The arguments an action
takes come from its set-of-marks form in the action spec (webgym_common.agent.actions).
`reference_thought` writes the demonstration's Thought: what the step does to which
element, as the page view names it, so a model learns to find the element by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webgym_common.agent.actions import ACTIONS, ActionKind, Slot, kind_of
from webgym_common.agent.pageview import clean
from webgym_common.choices import InteractionMode
from webgym_common.events import Mark, ParsedAction, ReferenceAction

# The reply grammar's Thought is one line of at most 240 characters (actions.reply_regex).
THOUGHT_CHARS = 240
_VERBS = {
    ActionKind.CLICK: "click", ActionKind.HOVER: "hover over", ActionKind.SCROLL: "scroll",
}
_NO_TARGET = {
    ActionKind.WAIT: "wait for the page", ActionKind.GO_BACK: "go back",
    ActionKind.TAB_AND_ENTER: "press Tab, then Enter",
}

# What a reference step that leaves an argument out means.
_DEFAULTS = {Slot.TEXT: "", Slot.DIRECTION: "down"}


def _unresolved(text: str, error: str) -> ParsedAction:
    return ParsedAction(kind=ActionKind.INVALID.value, valid=False, text=text, error=error)


def resolve_reference_action(ref: ReferenceAction, marks: Sequence[Mark]) -> ParsedAction:
    kind = kind_of(ref.action)
    if kind is None or kind is ActionKind.INVALID:
        return _unresolved(ref.action, f"unknown action {ref.action!r}")
    form = ACTIONS[kind].forms.get(InteractionMode.SET_OF_MARKS)
    if form is None:
        return _unresolved(ref.action, f"{kind} has no set-of-marks form")
    fields: dict[str, Any] = {}
    for slot in form.slots:
        if not slot.is_target:
            value = getattr(ref, slot.field, None) or _DEFAULTS.get(slot)
            if value is None:
                return _unresolved(ref.action, f"a reference step gives no {slot.field}")
            fields[slot.field] = value
        elif not (slot.takes_window and ref.role is None):  # no role: the whole page
            matches = [m for m in marks if m.role == ref.role and m.name == ref.name]
            nth = ref.nth or 0
            if len(matches) <= nth:
                return _unresolved(
                    f"{kind} {ref.role} {ref.name!r}",
                    f"no {ref.role} named {ref.name!r} among the page's marks",
                )
            fields["element"] = matches[nth].index
    return ParsedAction(kind=kind.value, **fields)


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _target(ref: ReferenceAction) -> str:
    """`the checkbox "vLr"`, `the 2nd button "Odd"` (nth counts same-named elements)."""
    nth = f"{ordinal(ref.nth + 1)} " if ref.nth else ""
    name = clean(ref.name or "", 80).replace('"', "'")
    return f'the {nth}{ref.role}' + (f' "{name}"' if name else "")


def reference_thought(ref: ReferenceAction) -> str:
    """The Thought of a teacher's step, naming what it does: `click the checkbox "vLr"`,
    `type "alice" into the textbox "Username"`, `scroll the page down`, `answer "42"`."""
    kind = kind_of(ref.action)
    text = clean(ref.text or "", 80)
    if kind is ActionKind.TYPE:
        thought = f'type "{text}" into {_target(ref)}'
    elif kind is ActionKind.ANSWER:
        thought = f'answer "{text}"'
    elif kind is ActionKind.SCROLL:
        where = _target(ref) if ref.role else "the page"
        thought = f"scroll {where} {ref.direction or _DEFAULTS[Slot.DIRECTION]}"
    elif kind in _VERBS:
        thought = f"{_VERBS[kind]} {_target(ref)}"
    elif kind in _NO_TARGET:
        thought = _NO_TARGET[kind]
    else:
        thought = f"do {clean(ref.action, 40)}"
    return clean(thought, THOUGHT_CHARS)
