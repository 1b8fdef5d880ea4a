"""Reply parsing: the three labelled parts, thinking blocks, and garbage never raises."""

from __future__ import annotations

import random
import string

from processors.policy.replies import parse_reply, split_reasoning
from webgym_common.agent.actions import format_action, parse_action


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


def test_the_reply_mode_reaches_the_action() -> None:
    reply = parse_reply("Thought: t\nAction: Click [5, 6]\nMemory_Updated: {}", "coordinates")
    assert reply.action.valid and (reply.action.x, reply.action.y) == (5, 6)
    assert reply.action.mode == "coordinates"


def test_a_reply_without_an_action_line_is_invalid() -> None:
    reply = parse_reply("Thought: nothing to do")
    assert not reply.action.valid and "no 'Action:' line" in reply.action.error


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
