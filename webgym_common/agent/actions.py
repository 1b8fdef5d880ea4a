"""WebGym's action grammar, written once: `ACTIONS` holds one `ActionSpec` per action.

Everything else is derived from that table: the prompt's action list
(prompts.action_list), the structured-output regex (`reply_regex`), the parser
(`parse_action`), the canonical string (`format_action`), the teacher's
resolution of reference steps, and the browser executor's dispatch (one handler
per kind, checked by a test). Adding an action is one entry here plus its handler.

An action is its name followed by bracketed arguments (`Type [4] [blue shoes]`).
What the first bracket names depends on the interaction mode: an element number
`[N]` in set-of-marks mode, a screenshot pixel `[x, y]` in coordinates mode.

A string that does not parse becomes an explicit `Invalid` action carrying the
reason; parsing never raises. An action the model is not offered (`offered=False`: Visit,
how the pipeline opens a page) is refused by the parser too, unless the caller is the
pipeline itself (`offered_only=False`): the structured-output regex is not the only guard,
since a server may ignore it or run without it, and a page's text may ask for anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from webgym_common.choices import InteractionMode
from webgym_common.events import ParsedAction

# An InteractionMode or its value: events and episode state carry modes as plain strings.
Mode: TypeAlias = InteractionMode | str

_SOM = InteractionMode.SET_OF_MARKS
_XY = InteractionMode.COORDINATES


class ActionKind(StrEnum):
    """An action's name, exactly as the model writes it and events carry it."""

    CLICK = "Click"
    HOVER = "Hover"
    TYPE = "Type"
    SCROLL = "Scroll"
    HOVER_AND_SCROLL = "HoverAndScroll"
    WAIT = "Wait"
    GO_BACK = "GoBack"
    TAB_AND_ENTER = "TabAndEnter"
    ANSWER = "ANSWER"
    VISIT = "Visit"
    INVALID = "Invalid"  # not in the grammar: what a string that does not parse becomes


class Slot(StrEnum):
    """One bracketed argument; the value is how the prompt writes it."""

    ELEMENT = "N"
    POINT = "x, y"
    ELEMENT_OR_WINDOW = "N|WINDOW"
    POINT_OR_WINDOW = "x, y|WINDOW"
    TEXT = "text"
    DIRECTION = "up|down"
    URL = "url"

    @property
    def is_target(self) -> bool:
        """Names a place on the page (an element or a point), always the first argument."""
        return self in _TARGETS

    @property
    def takes_window(self) -> bool:
        return self in (Slot.ELEMENT_OR_WINDOW, Slot.POINT_OR_WINDOW)

    @property
    def is_point(self) -> bool:
        return self in (Slot.POINT, Slot.POINT_OR_WINDOW)

    @property
    def field(self) -> str:
        """The ParsedAction field a non-target slot fills (a target: `element`, or `x` and `y`)."""
        return _FIELD[self]


_TARGETS = frozenset({Slot.ELEMENT, Slot.POINT, Slot.ELEMENT_OR_WINDOW, Slot.POINT_OR_WINDOW})

# What structured output lets the model write in each slot (the parser is more lenient).
_SLOT_REGEX: dict[Slot, str] = {
    Slot.ELEMENT: r"[0-9]{1,3}",
    Slot.POINT: r"[0-9]{1,4}, [0-9]{1,4}",
    Slot.ELEMENT_OR_WINDOW: r"([0-9]{1,3}|WINDOW)",
    Slot.POINT_OR_WINDOW: r"([0-9]{1,4}, [0-9]{1,4}|WINDOW)",
    Slot.TEXT: r"[^\[\]\n]{1,80}",
    Slot.DIRECTION: r"(up|down)",
    Slot.URL: r"[^\[\]\s]{1,500}",
}
_FIELD = {Slot.TEXT: "text", Slot.DIRECTION: "direction", Slot.URL: "url"}


@dataclass(frozen=True)
class Form:
    """An action's shape in one interaction mode."""

    slots: tuple[Slot, ...]
    description: str  # one line, shown to the model
    example: str  # a complete action string in this mode

    def __post_init__(self) -> None:
        # The grammar has room for: nothing, one argument, or a target then one argument.
        if len(self.slots) > 2 or any(s.is_target for s in self.slots[1:]) or (
            len(self.slots) == 2 and not self.slots[0].is_target
        ):
            raise ValueError(f"no action can take the arguments {self.slots}")


@dataclass(frozen=True)
class ActionSpec:
    """One action of the grammar: its name, and its form in each mode it exists in."""

    kind: ActionKind
    forms: Mapping[InteractionMode, Form]  # the modes the action exists in
    offered: bool = True  # False: the pipeline issues it; the prompt and the regex leave it out

    @property
    def modes(self) -> tuple[InteractionMode, ...]:
        return tuple(self.forms)

    def syntax(self, mode: Mode) -> str:
        """How the prompt writes the action, e.g. `Type [N] [text]`."""
        slots = self.forms[InteractionMode(mode)].slots
        return " ".join([self.kind.value, *(f"[{s.value}]" for s in slots)])


def _everywhere(form: Form) -> dict[InteractionMode, Form]:
    return dict.fromkeys(InteractionMode, form)


_SPECS = (
    ActionSpec(ActionKind.CLICK, {
        _SOM: Form((Slot.ELEMENT,), "click element N", "Click [3]"),
        _XY: Form(
            (Slot.POINT,), "click the pixel (x, y) of the screenshot", "Click [640, 360]"
        ),
    }),
    ActionSpec(ActionKind.HOVER, {
        _SOM: Form((Slot.ELEMENT,), "hover over element N", "Hover [12]"),
        _XY: Form((Slot.POINT,), "hover over the pixel (x, y)", "Hover [200, 48]"),
    }),
    ActionSpec(ActionKind.TYPE, {
        _SOM: Form(
            (Slot.ELEMENT, Slot.TEXT), "clear element N, type text, press Enter",
            "Type [4] [blue shoes]",
        ),
        _XY: Form(
            (Slot.POINT, Slot.TEXT), "click (x, y), clear, type text, press Enter",
            "Type [300, 40] [blue shoes]",
        ),
    }),
    ActionSpec(ActionKind.SCROLL, {
        _SOM: Form(
            (Slot.ELEMENT_OR_WINDOW, Slot.DIRECTION), "scroll element N, or the whole page",
            "Scroll [WINDOW] [down]",
        ),
        _XY: Form(
            (Slot.POINT_OR_WINDOW, Slot.DIRECTION), "scroll at (x, y), or the whole page",
            "Scroll [640, 360] [up]",
        ),
    }),
    ActionSpec(ActionKind.HOVER_AND_SCROLL, {
        _XY: Form(
            (Slot.POINT, Slot.DIRECTION), "move the mouse to (x, y), then scroll",
            "HoverAndScroll [640, 500] [down]",
        ),
    }),
    ActionSpec(ActionKind.WAIT, _everywhere(Form((), "wait 5 seconds", "Wait"))),
    ActionSpec(ActionKind.GO_BACK, _everywhere(Form((), "go back one page", "GoBack"))),
    ActionSpec(
        ActionKind.TAB_AND_ENTER, _everywhere(Form((), "press Tab, then Enter", "TabAndEnter"))
    ),
    ActionSpec(
        ActionKind.ANSWER, _everywhere(Form((Slot.TEXT,), "finish with this answer", "ANSWER [$5]"))
    ),
    ActionSpec(
        ActionKind.VISIT,
        _everywhere(Form((Slot.URL,), "open the URL", "Visit [http://127.0.0.1/shop/]")),
        offered=False,  # how an episode opens its start page, not a model's move
    ),
)
ACTIONS: dict[ActionKind, ActionSpec] = {spec.kind: spec for spec in _SPECS}
"""The one table of the grammar, in the order the prompt lists it."""

_BY_LOWER_NAME = {kind.value.lower(): kind for kind in ACTIONS}
_NAME = re.compile(r"^([A-Za-z_]+)\s*(.*)$", re.S)
_NUM = r"-?\d+(?:\.\d+)?"
_POINT = re.compile(rf"^\s*({_NUM})\s*,\s*({_NUM})\s*$")
_INDEX = re.compile(r"^\s*(\d+)\s*$")


def kind_of(name: str) -> ActionKind | None:
    """The kind an event's `kind` string names (exact spelling), or None."""
    try:
        return ActionKind(name)
    except ValueError:
        return None


def _mode_of(mode: str) -> InteractionMode | None:
    try:
        return InteractionMode(mode)
    except ValueError:
        return None


def offered(mode: Mode) -> list[tuple[ActionSpec, Form]]:
    """The actions the model may choose in a mode, in the table's order, with their forms."""
    mode = InteractionMode(mode)
    return [
        (spec, spec.forms[mode]) for spec in ACTIONS.values() if spec.offered and mode in spec.forms
    ]


def invalid(raw: str, reason: str, mode: Mode = _SOM) -> ParsedAction:
    return ParsedAction(
        kind=ActionKind.INVALID.value, mode=str(mode), text=raw, valid=False, error=reason
    )


class _Unparsable(Exception):
    """Internal: carries the reason out of the slot readers."""


def parse_action(text: str, mode: Mode = _SOM, *, offered_only: bool = True) -> ParsedAction:
    """`text` as an action of `mode`. `offered_only` (a model's reply): an action the model
    is not offered in the mode is Invalid; False: the pipeline's own actions (Visit) too."""
    raw = text.strip()
    m = _NAME.match(raw)
    if not m:
        return invalid(raw, "no action name", mode)
    kind = _BY_LOWER_NAME.get(m.group(1).lower())
    if kind is None:
        return invalid(raw, f"unknown action {m.group(1)!r}", mode)
    known_mode = _mode_of(mode)
    if known_mode is None:
        return invalid(raw, f"unknown interaction mode {mode!r}", mode)
    spec = ACTIONS[kind]
    form = spec.forms.get(known_mode)
    if form is None:
        return invalid(raw, f"{kind} exists only in {' and '.join(spec.modes)} mode", mode)
    if offered_only and not spec.offered:
        return invalid(raw, f"{kind} is not one of the actions offered", mode)
    try:
        fields = _read_slots(kind, form.slots, m.group(2).strip())
    except _Unparsable as err:
        return invalid(raw, str(err), mode)
    return ParsedAction(kind=kind.value, mode=str(mode), **fields)


def _read_slots(kind: ActionKind, slots: tuple[Slot, ...], rest: str) -> dict[str, Any]:
    if not slots:
        if rest:
            raise _Unparsable(f"{kind} takes no arguments")
        return {}
    if not slots[0].is_target:  # one free argument: everything inside the outer brackets
        if not (rest.startswith("[") and rest.endswith("]")):
            raise _Unparsable(f"{kind} needs [{slots[0].value}]")
        return {slots[0].field: _free_value(kind, slots[0], rest[1:-1].strip())}
    groups = _parse_groups(rest)
    if groups is None:
        raise _Unparsable("arguments must be in [brackets]")
    fields = _read_target(slots[0], groups[0].strip())
    if len(slots) == 1:
        if len(groups) != 1:
            raise _Unparsable(f"{kind} takes one [target]")
        return fields
    extra, value = slots[1], groups[1] if len(groups) == 2 else None
    if extra is Slot.DIRECTION:
        direction = (value or "").strip().lower()
        if direction not in ("up", "down"):
            raise _Unparsable(f"{kind} needs [up] or [down]")
        fields["direction"] = direction
    elif value is None:
        raise _Unparsable(f"{kind} needs [target] [{extra.value}]")
    else:
        fields[extra.field] = _free_value(kind, extra, value)
    return fields


def _free_value(kind: ActionKind, slot: Slot, value: str) -> str:
    if slot is Slot.URL and not value.strip():
        raise _Unparsable(f"{kind} needs a URL")
    return value


def _parse_groups(rest: str) -> list[str] | None:
    """`[a] [b]` -> ["a", "b"]; the second group runs to the last `]` (text may hold brackets)."""
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


def _read_target(slot: Slot, target: str) -> dict[str, Any]:
    if slot.takes_window and target.upper() == "WINDOW":
        return {}
    if slot.is_point:
        pt = _POINT.match(target)
        if not pt:
            raise _Unparsable(f"expected [x, y], got [{target}]")
        return {"x": float(pt.group(1)), "y": float(pt.group(2))}
    idx = _INDEX.match(target)
    if not idx:
        raise _Unparsable(f"expected an element number, got [{target}]")
    return {"element": int(idx.group(1))}



def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _slot_text(slot: Slot, action: ParsedAction) -> str:
    if not slot.is_target:
        return getattr(action, slot.field) or ""
    if action.element is not None:
        return str(action.element)
    if action.x is not None and action.y is not None:
        return f"{_fmt_num(action.x)}, {_fmt_num(action.y)}"
    return "WINDOW"


def format_action(action: ParsedAction) -> str:
    """The canonical string for an action (what the model is asked to write)."""
    kind = kind_of(action.kind)
    if kind is None or kind is ActionKind.INVALID:
        return action.text or ""
    spec = ACTIONS[kind]
    mode = _mode_of(action.mode)
    form = (spec.forms.get(mode) if mode else None) or next(iter(spec.forms.values()))
    return " ".join([kind.value, *(f"[{_slot_text(s, action)}]" for s in form.slots)])


def reply_regex(mode: Mode, thinking: bool = False) -> str:
    """A regex for a whole reply whose Action line is always in the grammar (structured output)."""
    mode = InteractionMode(mode)
    alternatives = "|".join(
        spec.kind.value + "".join(rf" \[{_SLOT_REGEX[s]}\]" for s in form.slots)
        for spec, form in offered(mode)
    )
    think = r"(<think>[^<]{0,2000}</think>\n)?" if thinking else ""
    # A small flat JSON object of strings, so the reply ends where the grammar does.
    pair = r'"[A-Za-z_ ]{1,24}": "[^"\\\n]{0,60}"'
    memory = rf"\{{({pair}(, {pair}){{0,4}})?\}}"
    return rf"{think}Thought: [^\n]{{1,240}}\nAction: ({alternatives})\nMemory_Updated: {memory}"
