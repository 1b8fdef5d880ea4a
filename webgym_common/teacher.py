"""Teacher forcing: turn a task's reference actions into concrete actions on the page seen.

Reference steps name their element by ARIA role and accessible name; the
observation's marks give the number it has on this page. The arguments an action
takes come from its set-of-marks form in the action spec (webgym_common.actions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webgym_common.actions import ACTIONS, ActionKind, Slot, kind_of
from webgym_common.config import InteractionMode
from webgym_common.events import Mark, ParsedAction, ReferenceAction

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
