"""The executor's dispatch: one handler per action of the spec, run against a recording page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from producers.browser.execute import HANDLERS, ActionFailed, _act, intercepting, refusal
from webgym_common.agent.actions import ACTIONS, ActionKind, parse_action
from webgym_common.choices import Driver
from webgym_common.config import BrowserSettings
from webgym_common.events import Mark, ParsedAction

CFG = BrowserSettings(wait_action_s=0.0, url_allowlist=["127.0.0.1"])


@dataclass
class Recorder:
    """Stands in for playwright's Page, its mouse and keyboard, and a Locator."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        if name in ("mouse", "keyboard"):
            return self

        async def call(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, *args))

        return call

    def locator(self, selector: str) -> Recorder:
        self.calls.append(("locator", selector))
        return self


@dataclass
class Request:
    driver: str = Driver.POLICY.value


@dataclass
class Session:
    marks: dict[int, Mark] = field(default_factory=dict)
    request: Request = field(default_factory=Request)


def test_every_action_of_the_spec_has_a_handler() -> None:
    assert set(HANDLERS) == set(ActionKind) - {ActionKind.INVALID} == set(ACTIONS)


async def run(text: str, mode: str = "set_of_marks", marks: dict[int, Mark] | None = None,
              driver: Driver = Driver.POLICY, calls: list[tuple[Any, ...]] | None = None,
              ) -> tuple[str, list[tuple[Any, ...]]]:
    """Parse `text` as the pipeline would (every action of the grammar) and run it."""
    page = Recorder(calls if calls is not None else [])
    action = parse_action(text, mode, offered_only=False)
    session = Session(marks or {}, Request(driver.value))
    effect = await _act(session, page, action, CFG)  # type: ignore[arg-type]
    return effect, page.calls


async def test_set_of_marks_actions_act_on_the_marked_element() -> None:
    marks = {3: Mark(index=3, ref="e7", role="button", name="Go", x=0, y=0, width=1, height=1)}
    effect, calls = await run("Click [3]", marks=marks)
    assert effect == "clicked" and calls == [("locator", "aria-ref=e7"), ("click",)]
    effect, calls = await run("Type [3] [blue]", marks=marks)
    assert effect == "typed 'blue' and pressed Enter"
    assert calls == [("locator", "aria-ref=e7"), ("fill", "blue"), ("press", "Enter")]
    with pytest.raises(ActionFailed, match=r"there is no element \[4\] on this page"):
        await run("Hover [4]", marks=marks)


async def test_coordinate_actions_use_the_mouse_inside_the_viewport() -> None:
    effect, calls = await run("Hover [10, 20]", "coordinates")
    assert effect == "hovered" and calls == [("move", 10, 20)]
    effect, calls = await run("HoverAndScroll [10, 20] [up]", "coordinates")
    assert effect == "scrolled up" and calls == [("move", 10, 20), ("wheel", 0, -576.0)]
    with pytest.raises(ActionFailed, match="outside the 1280x720 viewport"):
        await run("Click [2000, 20]", "coordinates")


async def test_page_wide_actions() -> None:
    effect, calls = await run("Scroll [WINDOW] [down]")
    assert effect == "scrolled down" and calls == [("move", 640, 360), ("wheel", 0, 576.0)]
    assert await run("TabAndEnter") == (
        "pressed Tab and Enter", [("press", "Tab"), ("press", "Enter")]
    )
    assert await run("Wait") == ("waited 0 s", [])
    assert await run("ANSWER [done]") == ("answered", [])


async def test_a_refused_visit_fails_without_touching_the_page() -> None:
    with pytest.raises(ActionFailed, match="refused to visit http://example.com/"):
        await run("Visit [http://example.com/]", driver=Driver.EXTERNAL)


def test_only_an_external_driver_may_issue_an_action_the_model_is_not_offered() -> None:
    offered = [k for k, s in ACTIONS.items() if s.offered]
    assert all(refusal(k, d) is None for k in offered for d in Driver)
    assert refusal(ActionKind.VISIT, Driver.EXTERNAL) is None
    why = refusal(ActionKind.VISIT, Driver.POLICY)
    assert why is not None and "only an external driver" in why and "policy" in why


async def test_a_visit_in_a_policy_driven_episode_is_refused_and_never_navigates() -> None:
    url = "http://127.0.0.1/shop/"  # allowed by the URL policy: only the driver refuses it
    assert await run(f"Visit [{url}]", driver=Driver.EXTERNAL) == (
        f"visited {url}", [("goto", url)])
    calls: list[tuple[Any, ...]] = []
    with pytest.raises(ActionFailed, match="refused to run Visit"):
        await run(f"Visit [{url}]", calls=calls)
    assert calls == []


async def test_invalid_and_unknown_actions_fail() -> None:
    with pytest.raises(ActionFailed, match="invalid action: unknown action 'Fly'"):
        await run("Fly [3]")
    with pytest.raises(ActionFailed, match="unknown action kind Select"):
        await _act(Session(), Recorder(), ParsedAction(kind="Select"), CFG)  # type: ignore[arg-type]


def test_the_element_taking_a_targets_clicks_is_read_from_playwrights_call_log() -> None:
    log = """Locator.click: Timeout 2000ms exceeded.
Call log:
  - waiting for locator("aria-ref=e12")
  - attempting click action
    2 x waiting for element to be visible, enabled and stable
      - element is visible, enabled and stable
      - scrolling into view if needed
      - done scrolling
      - <div id="cookie-banner" class="pg-banner">…</div> intercepts pointer events
    - retrying click action
      - <div id="sync-task-cover">START</div> intercepts pointer events"""
    assert intercepting(log) == '<div id="sync-task-cover">START</div>'
    frame = "  - <p>hi</p> from <iframe name=\"x\"></iframe> subtree intercepts pointer events"
    assert intercepting(frame) == '<p>hi</p> from <iframe name="x"></iframe> subtree'
    assert intercepting("Locator.click: Timeout 2000ms exceeded.\n  - element is not visible") \
        is None
