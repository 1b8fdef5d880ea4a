"""Teacher forcing: turn a task's reference actions into concrete actions on the page seen.

Reference steps name their element by ARIA role and accessible name; the
observation's marks give the number it has on this page.
"""

from __future__ import annotations

from collections.abc import Sequence

from webgym_common.actions import format_action
from webgym_common.events import Mark, ParsedAction, ReferenceAction


def resolve_reference_action(ref: ReferenceAction, marks: Sequence[Mark]) -> ParsedAction:
    kind = ref.action
    if kind in ("Wait", "GoBack", "TabAndEnter"):
        return ParsedAction(kind=kind)
    if kind == "ANSWER":
        return ParsedAction(kind="ANSWER", text=ref.text or "")
    if kind == "Scroll" and ref.role is None:
        return ParsedAction(kind="Scroll", direction=ref.direction or "down")
    matches = [m for m in marks if m.role == ref.role and m.name == ref.name]
    nth = ref.nth or 0
    if len(matches) <= nth:
        return ParsedAction(
            kind="Invalid", valid=False, text=f"{kind} {ref.role} {ref.name!r}",
            error=f"no {ref.role} named {ref.name!r} among the page's marks",
        )
    mark = matches[nth]
    if kind == "Type":
        return ParsedAction(kind="Type", element=mark.index, text=ref.text or "")
    if kind == "Scroll":
        return ParsedAction(kind="Scroll", element=mark.index, direction=ref.direction or "down")
    return ParsedAction(kind=kind, element=mark.index)


def reference_action_string(ref: ReferenceAction, marks: Sequence[Mark]) -> str:
    return format_action(resolve_reference_action(ref, marks))
