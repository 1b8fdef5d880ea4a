"""WebGym's action grammar: action strings <-> ParsedAction, in both interaction modes.

set-of-marks:  Click [N]  Hover [N]  Type [N] [text]  Scroll [N|WINDOW] [up|down]
coordinates:   Click [x, y]  Hover [x, y]  Type [x, y] [text]  Scroll [x, y|WINDOW] [up|down]
               HoverAndScroll [x, y] [up|down]
both:          Wait  GoBack  TabAndEnter  ANSWER [text]  Visit [url]

A string that does not parse becomes an explicit `Invalid` action carrying the
reason; parsing never raises.
"""

from __future__ import annotations

import re
from typing import Literal

from webgym_common.events import ParsedAction

Mode = Literal["set_of_marks", "coordinates"]
KINDS = (
    "Click", "Hover", "Type", "Scroll", "HoverAndScroll", "Wait", "GoBack", "TabAndEnter",
    "ANSWER", "Visit",
)
_KIND_BY_LOWER = {k.lower(): k for k in KINDS}
_NUM = r"-?\d+(?:\.\d+)?"
_POINT = re.compile(rf"^\s*({_NUM})\s*,\s*({_NUM})\s*$")
_INDEX = re.compile(r"^\s*(\d+)\s*$")


def invalid(raw: str, reason: str, mode: Mode = "set_of_marks") -> ParsedAction:
    return ParsedAction(kind="Invalid", mode=mode, text=raw, valid=False, error=reason)


def parse_action(text: str, mode: Mode = "set_of_marks") -> ParsedAction:
    raw = text.strip()
    m = re.match(r"^([A-Za-z_]+)\s*(.*)$", raw, re.S)
    if not m:
        return invalid(raw, "no action name", mode)
    kind = _KIND_BY_LOWER.get(m.group(1).lower())
    rest = m.group(2).strip()
    if kind is None:
        return invalid(raw, f"unknown action {m.group(1)!r}", mode)
    if kind in ("Wait", "GoBack", "TabAndEnter"):
        if rest:
            return invalid(raw, f"{kind} takes no arguments", mode)
        return ParsedAction(kind=kind, mode=mode)
    if kind in ("ANSWER", "Visit"):
        if not (rest.startswith("[") and rest.endswith("]")):
            return invalid(raw, f"{kind} needs [text]", mode)
        value = rest[1:-1].strip()
        if kind == "Visit":
            return ParsedAction(kind=kind, mode=mode, url=value) if value else invalid(
                raw, "Visit needs a URL", mode
            )
        return ParsedAction(kind=kind, mode=mode, text=value)
    groups = _parse_groups(rest)
    if groups is None:
        return invalid(raw, "arguments must be in [brackets]", mode)
    return _with_target(raw, kind, groups, mode)


def _parse_groups(rest: str) -> list[str] | None:
    if not rest.startswith("[") or not rest.endswith("]"):
        return None
    first_end = rest.find("]")
    first = rest[1:first_end]
    tail = rest[first_end + 1 :].strip()
    if not tail:
        return [first]
    if not (tail.startswith("[") and tail.endswith("]")):
        return None
    return [first, tail[1:-1]]


def _with_target(raw: str, kind: str, groups: list[str], mode: Mode) -> ParsedAction:
    target = groups[0].strip()
    fields: dict[str, object] = {"kind": kind, "mode": mode}
    if kind == "HoverAndScroll" and mode != "coordinates":
        return invalid(raw, "HoverAndScroll exists only in coordinates mode", mode)
    if kind == "Scroll" and target.upper() == "WINDOW":
        pass
    elif mode == "set_of_marks":
        idx = _INDEX.match(target)
        if not idx:
            return invalid(raw, f"expected an element number, got [{target}]", mode)
        fields["element"] = int(idx.group(1))
    else:
        pt = _POINT.match(target)
        if not pt:
            return invalid(raw, f"expected [x, y], got [{target}]", mode)
        fields["x"], fields["y"] = float(pt.group(1)), float(pt.group(2))
    if kind in ("Click", "Hover"):
        if len(groups) != 1:
            return invalid(raw, f"{kind} takes one [target]", mode)
    elif kind == "Type":
        if len(groups) != 2:
            return invalid(raw, "Type needs [target] [text]", mode)
        fields["text"] = groups[1]
    else:  # Scroll, HoverAndScroll
        direction = groups[1].strip().lower() if len(groups) == 2 else ""
        if direction not in ("up", "down"):
            return invalid(raw, f"{kind} needs [up] or [down]", mode)
        fields["direction"] = direction
    return ParsedAction(**fields)


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def format_action(action: ParsedAction) -> str:
    """The canonical string for an action (what the model is asked to write)."""
    k = action.kind
    if k in ("Wait", "GoBack", "TabAndEnter"):
        return k
    if k == "ANSWER":
        return f"ANSWER [{action.text or ''}]"
    if k == "Visit":
        return f"Visit [{action.url or ''}]"
    if k == "Invalid":
        return action.text or ""
    if action.element is not None:
        target = str(action.element)
    elif action.x is not None and action.y is not None:
        target = f"{_fmt_num(action.x)}, {_fmt_num(action.y)}"
    else:
        target = "WINDOW"
    if k == "Type":
        return f"{k} [{target}] [{action.text or ''}]"
    if k in ("Scroll", "HoverAndScroll"):
        return f"{k} [{target}] [{action.direction}]"
    return f"{k} [{target}]"


def reply_regex(mode: Mode, thinking: bool = False) -> str:
    """A regex for a whole reply whose Action line is always in the grammar (structured output)."""
    text = r"[^\[\]\n]{1,80}"
    if mode == "set_of_marks":
        target = r"[0-9]{1,3}"
        scroll = rf"Scroll \[({target}|WINDOW)\] \[(up|down)\]"
        extra = ""
    else:
        target = r"[0-9]{1,4}, [0-9]{1,4}"
        scroll = rf"Scroll \[({target}|WINDOW)\] \[(up|down)\]"
        extra = rf"|HoverAndScroll \[{target}\] \[(up|down)\]"
    action = (
        rf"(Click \[{target}\]|Hover \[{target}\]|Type \[{target}\] \[{text}\]|{scroll}{extra}"
        rf"|Wait|GoBack|TabAndEnter|ANSWER \[{text}\])"
    )
    think = r"(<think>[^<]{0,2000}</think>\n)?" if thinking else ""
    # A small flat JSON object of strings, so the reply ends where the grammar does.
    pair = r'"[A-Za-z_ ]{1,24}": "[^"\\\n]{0,60}"'
    memory = rf"\{{({pair}(, {pair}){{0,4}})?\}}"
    return rf"{think}Thought: [^\n]{{1,240}}\nAction: {action}\nMemory_Updated: {memory}"
