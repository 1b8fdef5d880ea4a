"""Prompt building: what the model is shown for an episode."""

from __future__ import annotations

from pathlib import Path

import pytest

from webgym_common.agent.actions import offered
from webgym_common.agent.marks import parse_marks
from webgym_common.agent.prompts import (
    HISTORY_STEPS,
    PAGE_HEADING,
    PROMPT_VERSION,
    EpisodeContext,
    StepRecord,
    action_list,
    build_messages,
)
from webgym_common.choices import InteractionMode
from webgym_common.events import Mark

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "aria"


def ctx(mode: str = "set_of_marks", steps: int = 0) -> EpisodeContext:
    c = EpisodeContext(episode_id="e1", task_id="t1", task_name="Find the price", mode=mode,
                       max_steps=20, memory_json='{"seen": "home"}')
    c.history = [StepRecord(i, f"thought {i}", f"Click [{i}]", f"effect {i}") for i in range(steps)]
    return c


MARKS = [Mark(index=1, ref="e1", role="searchbox", name="Search", x=0, y=0, width=9, height=9),
         Mark(index=2, ref="e2", role="link", name="", x=0, y=9, width=9, height=9)]


def test_set_of_marks_prompt_has_task_url_history_memory_and_elements() -> None:
    system, user = build_messages(ctx(steps=3), "http://x/shop", MARKS)
    assert "Type [N] [text]" in system["content"] and "Memory_Updated" in system["content"]
    text = user["content"]
    assert "Task: Find the price" in text and "Current URL: http://x/shop" in text
    assert "Step 2:\nThought: thought 2\nAction: Click [2]\nAction Effect: effect 2" in text
    assert 'Memory: {"seen": "home"}' in text
    assert f'{PAGE_HEADING}\n"Search" searchbox [1]\nlink [2]\n' in text  # marks only


def test_the_page_view_comes_from_the_snapshot_when_there_is_one() -> None:
    tree = (FIXTURES / "click-checkboxes.txt").read_text()
    c = ctx()
    c.task_name = "Select 91YPF, i6Vdpn2, nd7Qt, XPMut and click Submit."  # the page's words
    _, user = build_messages(c, "http://x/", parse_marks(tree, 300), tree=tree)
    page = user["content"].split(PAGE_HEADING + "\n", 1)[1]
    assert page.startswith('"91YPF" checkbox checked focused [1]\n'
                           '"i6Vdpn2" checkbox unchecked [2]\n')
    assert c.task_name not in page  # stated once, as the task


def test_only_the_last_15_steps_are_shown() -> None:
    assert HISTORY_STEPS == 15
    _, user = build_messages(ctx(steps=20), "http://x", MARKS)
    assert "Step 4:" not in user["content"] and "Step 5:" in user["content"]
    assert "Step 19:" in user["content"]


def test_coordinates_mode_attaches_the_screenshot_instead_of_elements() -> None:
    system, user = build_messages(
        ctx("coordinates"), "http://x", MARKS, "data:image/jpeg;base64,AA"
    )
    assert "HoverAndScroll [x, y]" in system["content"]
    text, image = user["content"]
    assert PAGE_HEADING not in text["text"]
    assert image == {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AA"}}


@pytest.mark.parametrize("mode", list(InteractionMode))
def test_the_system_prompt_lists_the_offered_actions_of_the_mode(mode: InteractionMode) -> None:
    system, _ = build_messages(ctx(mode.value), "http://x", MARKS)
    listed = action_list(mode)
    assert listed in system["content"]
    rows = listed.splitlines()
    assert [r.split(" ")[0] for r in rows] == [s.kind for s, _ in offered(mode)]
    for row, (spec, form) in zip(rows, offered(mode), strict=True):
        assert row == f"{spec.syntax(mode)} - {form.description}"
    assert "Visit" not in listed


def test_the_page_view_is_cut_to_its_budget() -> None:
    many = [Mark(index=i, ref=f"e{i}", role="link", name=f"item {i}", x=0, y=0, width=1,
                 height=1) for i in range(1, 200)]
    _, user = build_messages(ctx(), "http://x", many, max_element_chars=300)
    page = user["content"].split(PAGE_HEADING + "\n", 1)[1].split("\n\nStep ", 1)[0]
    assert len(page) <= 300 and page.endswith(" elements not shown)")
    assert page.startswith('"item 1" link [1]\n"item 2" link [2]\n')


def test_the_system_prompt_is_short_and_the_format_has_a_version() -> None:
    system, _ = build_messages(ctx(), "http://x", MARKS)
    assert len(system["content"]) < 700  # sent on every step (166 SmolLM2 tokens; 183 before p2)
    assert PROMPT_VERSION == "p2"  # bump it whenever what the model is shown changes


def test_context_round_trips_through_json() -> None:
    c = ctx(steps=2)
    assert EpisodeContext.from_json(c.to_json()) == c
