"""Every action kind, in both interaction modes, through a real browser worker.

One `webgym worker browser` (2 contexts) serves the whole module; each test hand-feeds one
episode on the sandbox's action playground (/playground/) and reads the page's visible status
lines back from the next observation's aria snapshot. In set-of-marks mode a target is `[N]`;
in coordinates mode it is the centre of the same mark's box.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from harness.hand_fed import HandFedEpisode, mark_index
from harness.launch import BrowserWorkerProcess
from webgym_common.agent.actions import Mode
from webgym_common.choices import Driver
from webgym_common.config import Settings
from webgym_common.events import StepObserved
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

MODES: list[Mode] = ["set_of_marks", "coordinates"]
JPEG_MAGIC = b"\xff\xd8"


# -- one worker for the module ------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def pg_settings(stack_base: Settings) -> Settings:
    """Like conftest's `settings`, but shared by the module so one worker serves every test."""
    prefix = f"t{uuid.uuid4().hex[:10]}"
    kafka = stack_base.kafka.model_copy(update={"topic_prefix": prefix})
    browser = stack_base.browser.model_copy(
        update={"group_id": f"{prefix}-browsers", "settle_max_s": 1.0, "wait_action_s": 1.0,
                "observe_timeout_s": 8.0, "action_timeout_s": 5.0}
    )
    s = stack_base.model_copy(update={"kafka": kafka, "browser": browser})
    await create_topics(s)
    return s


@pytest.fixture(scope="module")
def worker(pg_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    log = tmp_path_factory.mktemp("browser-actions") / "worker.log"
    w = BrowserWorkerProcess(pg_settings, 2, log)
    try:
        yield
    finally:
        w.stop()


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def pg_producer(pg_settings: Settings) -> AsyncIterator[EventProducer]:
    async with EventProducer(pg_settings, client_id="test-actions") as p:
        yield p


@contextlib.asynccontextmanager
async def playground(
    settings: Settings, producer: EventProducer, mode: Mode, page: str = "",
    max_steps: int = 30,
) -> AsyncIterator[HandFedEpisode]:
    """An episode on /playground/<page>; ended with an ANSWER if the test did not get that far."""
    # Driven from outside, as webgym drive is: every action of the grammar runs, Visit too.
    ep = HandFedEpisode(settings, producer, f"{settings.sandbox_url}/playground/{page}",
                        mode=mode, max_steps=max_steps, driver=Driver.EXTERNAL)
    try:
        yield ep
    finally:
        if ep.observations and not ep.completions:
            with contextlib.suppress(Exception):  # free the worker's context for the next test
                await ep.send_only("ANSWER [the test stopped early]")
        await ep.close()


# -- helpers --------------------------------------------------------------------------------


def target(obs: StepObserved, mode: Mode, role: str, name: str) -> str:
    """`N` in set-of-marks mode, the centre `x, y` of the same mark in coordinates mode."""
    index = mark_index(obs, role, name)
    if mode == "set_of_marks":
        return str(index)
    m = next(m for m in obs.marks if m.index == index)
    return f"{m.x + m.width / 2:g}, {m.y + m.height / 2:g}"


def status(obs: StepObserved, label: str) -> int:
    """A numeric status line of the playground, e.g. status(obs, "Window scrollY")."""
    found = re.search(rf"{label} (\d+)", obs.accessibility_tree)
    assert found, f"no {label!r} status in:\n{obs.accessibility_tree}"
    return int(found.group(1))


def shows(obs: StepObserved, text: str) -> bool:
    return text in obs.accessibility_tree


async def finish(ep: HandFedEpisode, answer: str) -> None:
    """ANSWER ends the episode with the answer; no step was observed twice."""
    last = ep.step
    await ep.send_only(f"ANSWER [{answer}]")
    done = await ep.completed()
    assert done.termination == "answer", done
    assert done.answer == answer
    assert done.steps == last
    assert sorted(ep.observations) == list(range(last + 1))
    assert ep.duplicates == 0


async def check_screenshots(settings: Settings, ep: HandFedEpisode) -> None:
    """Every observation's screenshot is in MinIO, matches its hash and is a JPEG."""
    store = ObjectStore(settings.s3)
    for step, obs in sorted(ep.observations.items()):
        blob = await store.get_blob(obs.screenshot_uri)
        assert hashlib.sha256(blob).hexdigest() == obs.screenshot_sha256, step
        assert obs.screenshot_format == "jpeg"
        assert blob[:2] == JPEG_MAGIC, (step, blob[:8])


def ok(obs: StepObserved, effect: str) -> None:
    assert obs.error is None, obs.error
    assert effect in (obs.action_effect or ""), obs.action_effect


# -- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_tab_click_hover_and_failed_actions(
    pg_settings: Settings, pg_producer: EventProducer, worker: None, mode: Mode
) -> None:
    start_url = f"{pg_settings.sandbox_url}/playground/"
    async with playground(pg_settings, pg_producer, mode) as ep:
        obs = await ep.start()
        assert obs.url == start_url and obs.title == "Action playground"
        assert obs.error is None
        for idle in ("Button clicked 0 times", "Hover status idle", "Tab status idle"):
            assert shows(obs, idle), idle

        # Focus starts in the autofocus field; the next focusable element is "Tab target".
        obs = await ep.act("TabAndEnter")
        ok(obs, "Tab and Enter")
        assert shows(obs, "Tab status tab-entered")

        obs = await ep.act(f"Click [{target(obs, mode, 'button', 'Press me')}]")
        ok(obs, "clicked")
        assert shows(obs, "Button clicked 1 times")

        obs = await ep.act(f"Hover [{target(obs, mode, 'button', 'Hover target')}]")
        ok(obs, "hovered")
        assert shows(obs, "Hover status hovered")

        # Actions that cannot be carried out: an error in the next observation, same page.
        if mode == "set_of_marks":
            bad = ["Click [999]", f"Type [{target(obs, mode, 'button', 'Press me')}] [x]"]
        else:
            bad = ["Click [5000, 10]", "Click [999]"]  # off the viewport; not a point
        bad.append("Visit [file:///etc/passwd]")
        for action in bad:
            obs = await ep.act(action)
            assert obs.error, action
            assert obs.url == start_url
            assert shows(obs, "Button clicked 1 times")

        # ...and the episode goes on.
        obs = await ep.act(f"Click [{target(obs, mode, 'button', 'Press me')}]")
        ok(obs, "clicked")
        assert shows(obs, "Button clicked 2 times")

        await finish(ep, "clicked twice")
        await check_screenshots(pg_settings, ep)


@pytest.mark.parametrize("mode", MODES)
async def test_type_goback_wait_visit_answer(
    pg_settings: Settings, pg_producer: EventProducer, worker: None, mode: Mode
) -> None:
    base = pg_settings.sandbox_url
    start_url = f"{base}/playground/"
    async with playground(pg_settings, pg_producer, mode) as ep:
        obs = await ep.start()

        obs = await ep.act(f"Type [{target(obs, mode, 'textbox', 'Echo')}] [hello world]")
        ok(obs, "typed 'hello world'")
        assert obs.url == f"{base}/playground/echo?text=hello+world"
        assert obs.title == "Echo"
        assert shows(obs, "You typed: hello world")

        obs = await ep.act("GoBack")
        ok(obs, "went back")
        assert obs.url == start_url
        assert shows(obs, "Action playground")

        obs = await ep.act(f"Click [{target(obs, mode, 'link', 'Next page')}]")
        ok(obs, "clicked")
        assert obs.url == f"{base}/playground/next"
        assert shows(obs, "You followed the link from the playground.")

        obs = await ep.act("GoBack")
        ok(obs, "went back")
        assert obs.url == start_url

        step = ep.step
        obs = await ep.act("Wait")
        ok(obs, "wait")
        assert obs.step == step + 1 and obs.url == start_url

        obs = await ep.act(f"Visit [{base}/playground/echo?text=visited]")
        ok(obs, "visited")
        assert obs.url == f"{base}/playground/echo?text=visited"
        assert shows(obs, "You typed: visited")

        await finish(ep, "hello world")
        await check_screenshots(pg_settings, ep)


@pytest.mark.parametrize("mode", MODES)
async def test_scrolling(
    pg_settings: Settings, pg_producer: EventProducer, worker: None, mode: Mode
) -> None:
    async with playground(pg_settings, pg_producer, mode) as ep:
        obs = await ep.start()
        assert status(obs, "Box scrollTop") == 0 and status(obs, "Window scrollY") == 0

        # The inner box scrolls, the window does not.
        obs = await ep.act(f"Scroll [{target(obs, mode, 'region', 'Scroll box')}] [down]")
        ok(obs, "scrolled down")
        box = status(obs, "Box scrollTop")
        assert box > 0
        assert status(obs, "Window scrollY") == 0

        if mode == "coordinates":
            action = f"HoverAndScroll [{target(obs, mode, 'region', 'Scroll box')}] [down]"
            obs = await ep.act(action)
            ok(obs, "scrolled down")
            assert status(obs, "Box scrollTop") > box
            box = status(obs, "Box scrollTop")
            assert status(obs, "Window scrollY") == 0

        obs = await ep.act(f"Scroll [{target(obs, mode, 'region', 'Scroll box')}] [up]")
        ok(obs, "scrolled up")
        assert status(obs, "Box scrollTop") < box
        box = status(obs, "Box scrollTop")

        # The window scrolls, the box stays where it was.
        obs = await ep.act("Scroll [WINDOW] [down]")
        ok(obs, "scrolled down")
        window = status(obs, "Window scrollY")
        assert window > 0
        assert status(obs, "Box scrollTop") == box
        # Marks follow the page: the scrolled-away button is now above the viewport.
        press = next(m for m in obs.marks if m.name == "Press me")
        assert press.y < 0

        obs = await ep.act("Scroll [WINDOW] [up]")
        ok(obs, "scrolled up")
        assert status(obs, "Window scrollY") < window

        await finish(ep, "scrolled")
        await check_screenshots(pg_settings, ep)


async def test_goback_on_the_first_page_stays_there(
    pg_settings: Settings, pg_producer: EventProducer, worker: None
) -> None:
    start_url = f"{pg_settings.sandbox_url}/playground/"
    async with playground(pg_settings, pg_producer, "set_of_marks") as ep:
        await ep.start()
        obs = await ep.act("GoBack")
        assert obs.error is None
        assert obs.action_effect == "there was no page to go back to"
        assert obs.url == start_url
        assert shows(obs, "Action playground")
        await finish(ep, "stayed")


async def test_goback_after_an_in_page_link(
    pg_settings: Settings, pg_producer: EventProducer, worker: None
) -> None:
    start_url = f"{pg_settings.sandbox_url}/playground/"
    async with playground(pg_settings, pg_producer, "set_of_marks") as ep:
        obs = await ep.start()
        obs = await ep.act(f"Click [{mark_index(obs, 'link', 'Jump to tall section')}]")
        ok(obs, "clicked")
        assert obs.url == f"{start_url}#tall"
        assert status(obs, "Window scrollY") > 0
        obs = await ep.act("GoBack")
        assert obs.error is None
        assert obs.url == start_url  # this part works
        assert status(obs, "Window scrollY") == 0
        assert obs.action_effect == "went back"
        await finish(ep, "back")


async def test_a_covered_element_fails_naming_its_cover_and_works_once_it_is_gone(
    pg_settings: Settings, pg_producer: EventProducer, worker: None
) -> None:
    async with playground(pg_settings, pg_producer, "set_of_marks", "covered", 10) as ep:
        obs = await ep.start()
        assert shows(obs, "Covered button idle")
        # Playwright would retry for the whole action timeout; the worker reports the cover
        # (it is the one thing the agent must act on first) after its short check instead.
        obs = await ep.act(f"Click [{target(obs, 'set_of_marks', 'button', 'Covered button')}]")
        assert obs.error and "is covered by" in obs.error and "cookie-banner" in obs.error, (
            obs.error)
        assert shows(obs, "Covered button idle")  # nothing was clicked
        obs = await ep.act(f"Click [{target(obs, 'set_of_marks', 'button', 'Accept cookies')}]")
        ok(obs, "clicked")
        obs = await ep.act(f"Click [{target(obs, 'set_of_marks', 'button', 'Covered button')}]")
        ok(obs, "clicked")
        assert shows(obs, "Covered button clicked")
        await finish(ep, "clicked it")


async def test_the_page_driven_settle_waits_for_requests_and_changes_but_not_forever(
    pg_settings: Settings, pg_producer: EventProducer, worker: None
) -> None:
    cap_ms = pg_settings.browser.settle_max_s * 1000
    async with playground(pg_settings, pg_producer, "set_of_marks", "settle", 10) as ep:
        obs = await ep.start()
        assert shows(obs, "Late status idle")
        # A fixed wait shorter than the request (400 ms) would observe "waiting".
        obs = await ep.act(f"Click [{target(obs, 'set_of_marks', 'button', 'Load later')}]")
        ok(obs, "clicked")
        assert shows(obs, "Late status loaded"), obs.accessibility_tree
        assert 400 <= obs.timings_ms["settle"] < cap_ms, obs.timings_ms
        obs = await ep.act(f"Click [{target(obs, 'set_of_marks', 'button', 'Animate')}]")
        assert shows(obs, "Animation status done"), obs.accessibility_tree
        # A page that never quiets down is observed as it is at the cap.
        obs = await ep.act(f"Click [{target(obs, 'set_of_marks', 'button', 'Restless')}]")
        ok(obs, "clicked")
        assert "Restless tick" in obs.accessibility_tree
        assert cap_ms - 50 <= obs.timings_ms["settle"] < cap_ms + 1000, obs.timings_ms
        # Every step says where its time went (webgym_common.timings).
        for phase in ("action_wait", "execute", "settle", "screenshot", "tree", "upload",
                      "publish", "total"):
            assert obs.timings_ms.get(phase, -1) >= 0, (phase, obs.timings_ms)
        assert "action_wait" not in ep.observations[0].timings_ms  # no action came before it
        await finish(ep, "settled")
