"""The action grammar and reply parsing: every form in both modes, and garbage never raises."""

from __future__ import annotations

import random
import re
import string

import pytest

from webgym_common.actions import format_action, parse_action, reply_regex
from webgym_common.replies import parse_reply, split_reasoning

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


@pytest.mark.parametrize(("mode", "text"), [("set_of_marks", t) for t in SET_OF_MARKS]
                         + [("coordinates", t) for t in COORDINATES])
def test_every_action_form_parses_and_formats_back(mode: str, text: str) -> None:
    kind, fields = (SET_OF_MARKS if mode == "set_of_marks" else COORDINATES)[text]
    action = parse_action(text, mode)
    assert action.valid and action.kind == kind and action.mode == mode
    for name, value in fields.items():
        assert getattr(action, name) == value, name
    assert parse_action(format_action(action), mode) == action


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
])
def test_bad_actions_are_explicitly_invalid(mode: str, text: str, reason: str) -> None:
    action = parse_action(text, mode)
    assert not action.valid and action.kind == "Invalid" and reason in action.error
    assert action.text == text  # the raw text is kept


def test_instruct_reply() -> None:
    raw = 'Thought: search first\nAction: Type [2] [Cobalt]\nMemory_Updated: {"seen": "home"}'
    reply = parse_reply(raw)
    assert reply.thought == "search first"
    assert reply.action.kind == "Type" and reply.action.text == "Cobalt"
    assert reply.memory_json == '{"seen": "home"}' and reply.reasoning is None and reply.raw == raw


def test_thinking_reply_keeps_reasoning_out_of_the_parse() -> None:
    raw = ("<think>The box is [2]. Action: Click [9] would be wrong.</think>\n"
           "Thought: type it\nAction: Click [2]\nMemory_Updated: {}")
    reply = parse_reply(raw)
    assert reply.action.kind == "Click" and reply.action.element == 2
    assert "would be wrong" in reply.reasoning and reply.memory_json == "{}"


def test_unclosed_think_is_all_reasoning() -> None:
    visible, reasoning = split_reasoning("<think>still thinking Action: Click [1]")
    assert visible == "" and "still thinking" in reasoning
    assert not parse_reply("<think>still thinking Action: Click [1]").action.valid


def test_labels_are_found_in_any_case_and_with_markdown() -> None:
    reply = parse_reply("**Thought:** ok\n**Action:** `GoBack`\n**Memory_Updated:** not json")
    assert reply.action.kind == "GoBack" and reply.memory_json is None


def _garbage(rng: random.Random) -> str:
    valid = 'Thought: t\nAction: Type [3] [x]\nMemory_Updated: {"a": "b"}'
    kind = rng.randrange(5)
    if kind == 0:
        return "".join(rng.choices(string.printable, k=rng.randint(0, 200)))
    if kind == 1:
        return valid[: rng.randint(0, len(valid) - 1)]  # truncated
    if kind == 2:
        swap = {"[": rng.choice("({<"), "]": rng.choice(")}>")}
        return "".join(swap.get(c, c) if rng.random() < 0.5 else c for c in valid)
    if kind == 3:
        return f"Action: {rng.choice(['Click', 'Type', 'Scroll', 'ANSWER'])} " + "".join(
            rng.choices("[]0123456789, abc", k=rng.randint(0, 30)))
    return "<think>" + "".join(rng.choices(string.ascii_letters + " []:", k=50))


def test_hundreds_of_malformed_replies_never_raise() -> None:
    rng = random.Random(1234)
    invalid = 0
    for _ in range(500):
        raw = _garbage(rng)
        reply = parse_reply(raw)
        assert reply.raw == raw
        if not reply.action.valid:
            invalid += 1
            assert reply.action.kind == "Invalid" and reply.action.error
        else:  # whatever parsed must be a real action that formats back
            assert parse_action(format_action(reply.action)) == reply.action
    assert invalid > 300


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
