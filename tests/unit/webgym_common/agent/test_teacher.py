"""Teacher forcing: reference steps (role + accessible name) -> actions on the page seen."""

from __future__ import annotations

import pytest

from webgym_common.agent.actions import ACTIONS, ActionKind, Slot, format_action, parse_action
from webgym_common.agent.teacher import ordinal, reference_thought, resolve_reference_action
from webgym_common.choices import InteractionMode
from webgym_common.events import Mark, ParsedAction, ReferenceAction


def mark(index: int, role: str, name: str) -> Mark:
    return Mark(index=index, ref=f"e{index}", role=role, name=name, x=0, y=0, width=9, height=9)


MARKS = [mark(1, "link", "More"), mark(2, "textbox", "Search"), mark(3, "link", "More"),
         mark(4, "button", "Go")]


def resolve(**fields: object) -> ParsedAction:
    return resolve_reference_action(ReferenceAction(**fields), MARKS)


def test_an_element_is_found_by_role_and_name_and_nth() -> None:
    assert resolve(action="Click", role="button", name="Go").element == 4
    assert resolve(action="Click", role="link", name="More").element == 1
    assert resolve(action="Hover", role="link", name="More", nth=1).element == 3


def test_a_missing_element_is_an_invalid_action_naming_it() -> None:
    action = resolve(action="Click", role="link", name="More", nth=2)
    assert not action.valid and action.kind == "Invalid"
    assert action.text == "Click link 'More'"
    assert action.error == "no link named 'More' among the page's marks"
    assert not resolve(action="Type", role="button", name="Stop", text="x").valid


def test_arguments_come_from_the_step_or_their_defaults() -> None:
    typed = resolve(action="Type", role="textbox", name="Search", text="blue shoes")
    assert (typed.kind, typed.element, typed.text) == ("Type", 2, "blue shoes")
    assert format_action(typed) == "Type [2] [blue shoes]"
    page = resolve(action="Scroll", direction="up")
    assert page.element is None and format_action(page) == "Scroll [WINDOW] [up]"
    assert resolve(action="Scroll").direction == "down"
    assert resolve(action="Scroll", role="link", name="More", nth=1).element == 3
    assert resolve(action="ANSWER", text="$5").text == "$5"
    assert resolve(action="ANSWER").text == ""


@pytest.mark.parametrize("kind", ["Wait", "GoBack", "TabAndEnter"])
def test_argument_less_actions_need_nothing_from_the_page(kind: str) -> None:
    action = resolve_reference_action(ReferenceAction(action=kind), [])
    assert action.valid and action.kind == kind and format_action(action) == kind


@pytest.mark.parametrize(("kind", "reason"), [
    ("Select", "unknown action"),
    ("Invalid", "unknown action"),
    ("HoverAndScroll", "no set-of-marks form"),
    ("Visit", "gives no url"),
])
def test_steps_outside_the_set_of_marks_grammar_are_invalid(kind: str, reason: str) -> None:
    action = resolve(action=kind, role="link", name="More")
    assert not action.valid and action.kind == "Invalid" and reason in action.error


@pytest.mark.parametrize("kind", [
    k for k, s in ACTIONS.items()
    if InteractionMode.SET_OF_MARKS in s.forms and Slot.URL not in
    s.forms[InteractionMode.SET_OF_MARKS].slots
])
def test_every_set_of_marks_action_resolves_to_a_parseable_action(kind: ActionKind) -> None:
    action = resolve(action=kind.value, role="link", name="More", text="t", direction="up")
    assert action.valid and action.kind == kind
    assert parse_action(format_action(action)) == action


@pytest.mark.parametrize(("fields", "thought"), [
    ({"action": "Click", "role": "checkbox", "name": "vLr"}, 'click the checkbox "vLr"'),
    ({"action": "Type", "role": "textbox", "name": "Username", "text": "alice"},
     'type "alice" into the textbox "Username"'),
    ({"action": "Type", "role": "textbox", "name": "", "text": "42"},
     'type "42" into the textbox'),
    ({"action": "Click", "role": "button", "name": "Odd", "nth": 2},
     'click the 3rd button "Odd"'),
    ({"action": "Hover", "role": "link", "name": "More"}, 'hover over the link "More"'),
    ({"action": "Scroll", "direction": "up"}, "scroll the page up"),
    ({"action": "Scroll", "role": "listbox", "name": "Fruit"}, 'scroll the listbox "Fruit" down'),
    ({"action": "ANSWER", "text": "42"}, 'answer "42"'),
    ({"action": "GoBack"}, "go back"),
    ({"action": "Wait"}, "wait for the page"),
    ({"action": "TabAndEnter"}, "press Tab, then Enter"),
])
def test_the_teachers_thought_names_the_step_and_its_element(
    fields: dict[str, object], thought: str
) -> None:
    assert reference_thought(ReferenceAction(**fields)) == thought


def test_a_thought_stays_one_short_line() -> None:
    ref = ReferenceAction(action="Type", role="textbox", name='a "b"\nc', text="x\ny " * 60)
    thought = reference_thought(ref)
    assert "\n" not in thought and len(thought) <= 240
    assert thought.endswith("into the textbox \"a 'b' c\"")
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]
