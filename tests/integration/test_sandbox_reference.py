"""Replay every sandbox task's reference actions in real Chromium (the 57 hand-written tasks
and the 675 generated ones), and probe the hostile pages.

Each step must resolve to exactly one visible element by ARIA role and accessible name (what a
teacher-forcing policy relies on), and the final answer must be visible on the last page.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, Request
from playwright.async_api import TimeoutError as PlaywrightTimeout

from environments.app import GENERATED_TASKS_FILE, TASKS_FILE
from tests.support.chromium import chromium
from tests.support.sandbox import serving_sandbox

pytestmark = pytest.mark.integration

STEP_MS = 8_000
CONCURRENCY = 8  # tabs replaying at once: more than the cores, as pages wait for the server


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def sandbox_url() -> AsyncIterator[str]:
    async with serving_sandbox() as url:
        yield url


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


def _tasks(path: Path = TASKS_FILE) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class _NavWatch:
    """Clicks and Enter do not wait for the navigation they start; track it ourselves."""

    def __init__(self, page: Page) -> None:
        self.pending = False
        page.on("request", self._on_request)
        page.on("load", self._on_load)
        self._page = page

    def _on_request(self, request: Request) -> None:
        if request.is_navigation_request() and request.frame == self._page.main_frame:
            self.pending = True

    def _on_load(self, _page: Page) -> None:
        self.pending = False

    async def settle(self) -> None:
        await asyncio.sleep(0.15)
        for _ in range(200):  # at most 10 s for a started navigation to finish loading
            if not self.pending:
                break
            await asyncio.sleep(0.05)
        await self._page.wait_for_load_state("load", timeout=STEP_MS)
        await asyncio.sleep(0.05)


async def _resolve_one(page: Page, step: dict[str, Any]) -> Any:
    loc = page.get_by_role(step["role"], name=step["name"], exact=True)
    if "nth" in step:
        loc = loc.nth(step["nth"])
    count = 0
    for _ in range(40):  # the page may still be rendering; poll up to ~4 s
        count = await loc.count()
        if count == 1 and await loc.is_visible():
            return loc
        await asyncio.sleep(0.1)
    raise AssertionError(f"{step['role']} {step['name']!r} matched {count} visible elements")


async def _perform(page: Page, nav: _NavWatch, step: dict[str, Any]) -> None:
    kind = step["action"]
    if kind in ("Click", "Hover", "Type", "Select"):
        loc = await _resolve_one(page, step)
        if kind == "Click":
            await loc.click(timeout=STEP_MS)
        elif kind == "Hover":
            await loc.hover(timeout=STEP_MS)
        elif kind == "Type":
            await loc.fill(step["text"], timeout=STEP_MS)
            await loc.press("Enter", timeout=STEP_MS)
        else:
            await loc.select_option(label=step["option"], timeout=STEP_MS)
    elif kind == "Scroll":
        await page.mouse.wheel(0, 600 if step.get("direction", "down") == "down" else -600)
    elif kind == "GoBack":
        await page.go_back(wait_until="load", timeout=STEP_MS)
    elif kind == "Wait":
        await asyncio.sleep(0.5)  # WebGym waits 5 s; nothing here needs that long
    else:
        raise AssertionError(f"unknown action {kind}")
    await nav.settle()


async def _body_contains(page: Page, text: str) -> str:
    body = ""
    for _ in range(30):
        body = await page.inner_text("body", timeout=STEP_MS)
        if text in body:
            return body
        await asyncio.sleep(0.1)
    return body


class _Tab:
    """One page that replays task after task: a fresh page (a new renderer process) per task
    cost a quarter of this file's time. The sites keep a visitor's state in cookies only
    (the shop's cart, the forum's session), which are cleared before each task; a task that
    fails leaves the tab for a fresh one."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.open: tuple[BrowserContext, Page, _NavWatch] | None = None

    async def page(self) -> tuple[Page, _NavWatch]:
        if self.open is None:
            context = await self.browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(STEP_MS)
            page = await context.new_page()
            self.open = (context, page, _NavWatch(page))
        context, page, nav = self.open
        await context.clear_cookies()
        nav.pending = False
        return page, nav

    async def close(self) -> None:
        if self.open is not None:
            context, self.open = self.open[0], None
            await asyncio.wait_for(context.close(), 15)


async def _replay(tab: _Tab, base: str, task: dict[str, Any]) -> str | None:
    """Return None on success, else a one-line description of the failure."""
    steps = task["reference_actions"]
    i = -1
    try:
        page, nav = await tab.page()
        await page.goto(task["website"].replace("{sandbox}", base), wait_until="load",
                        timeout=STEP_MS)
        for i in range(len(steps) - 1):
            await _perform(page, nav, steps[i])
        final = steps[-1]["text"]
        body = await _body_contains(page, final)
        if final not in body:
            return f"{task['task_id']}: answer {final!r} not visible on {page.url}"
        if "definite_answer" in task and task["definite_answer"] != final:
            return f"{task['task_id']}: ANSWER {final!r} != definite_answer"
        return None
    except (AssertionError, PlaywrightTimeout) as exc:
        where = steps[i] if 0 <= i < len(steps) else "start"
        return f"{task['task_id']} step {i} {where}: {str(exc).splitlines()[0]}"


async def _replay_all(sandbox_url: str, browser: Browser, tasks: list[dict[str, Any]]) -> None:
    assert tasks, "no tasks"
    todo: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for task in tasks:
        todo.put_nowait(task)
    failures: list[str] = []

    async def tab_loop() -> None:
        tab = _Tab(browser)
        try:
            while not todo.empty():
                task = todo.get_nowait()
                try:
                    failure = await asyncio.wait_for(_replay(tab, sandbox_url, task), 120)
                except TimeoutError:
                    failure = f"{task['task_id']}: not done in 120 s"
                if failure is not None:
                    failures.append(failure)
                    await tab.close()  # the next task starts on a fresh page
        finally:
            await tab.close()

    await asyncio.gather(*(tab_loop() for _ in range(CONCURRENCY)))
    assert not failures, f"{len(failures)} of {len(tasks)} tasks failed:\n" + "\n".join(failures)


async def test_every_task_replays(sandbox_url: str, browser: Browser) -> None:
    await _replay_all(sandbox_url, browser, _tasks())


async def test_every_generated_task_replays(sandbox_url: str, browser: Browser) -> None:
    """All generated tasks (no sampling): 3-5 minutes on 2 busy cores."""
    await _replay_all(sandbox_url, browser, _tasks(GENERATED_TASKS_FILE))


async def test_index_and_healthz(sandbox_url: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{sandbox_url}/healthz") as r:
            assert r.status == 200 and await r.text() == "ok"
        async with http.get(f"{sandbox_url}/") as r:
            html = await r.text()
        for prefix in ("/shop/", "/wiki/", "/forum/", "/travel/", "/hostile/"):
            assert f'href="{prefix}"' in html


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context()
    context.set_default_timeout(STEP_MS)
    try:
        yield await context.new_page()
    finally:
        await asyncio.wait_for(context.close(), 15)


async def test_captcha_blocks(sandbox_url: str, page: Page) -> None:
    await page.goto(f"{sandbox_url}/hostile/captcha", wait_until="load")
    assert "Verify you are human" in await page.inner_text("body")
    await page.get_by_role("checkbox", name="I am not a robot", exact=True).check()
    async with page.expect_navigation(wait_until="load"):
        await page.get_by_role("button", name="Verify", exact=True).click()
    body = await page.inner_text("body")
    assert "Verification failed" in body and "Verify you are human" in body


async def test_forbidden_is_403(sandbox_url: str, page: Page) -> None:
    resp = await page.goto(f"{sandbox_url}/hostile/forbidden", wait_until="load")
    assert resp is not None and resp.status == 403
    assert "Access denied" in await page.inner_text("body")


async def test_never_loads_times_out(sandbox_url: str, page: Page) -> None:
    with pytest.raises(PlaywrightTimeout):
        await page.goto(f"{sandbox_url}/hostile/never-loads", timeout=3000)
    # The hanging response must not stall the server for everyone else.
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{sandbox_url}/healthz", timeout=aiohttp.ClientTimeout(5)) as r:
            assert r.status == 200


async def test_infinite_loop_hangs_page(sandbox_url: str, browser: Browser) -> None:
    context = await browser.new_context()
    try:
        page = await context.new_page()
        await page.goto(f"{sandbox_url}/hostile/infinite-loop", wait_until="load", timeout=STEP_MS)
        await asyncio.sleep(0.3)  # the loop starts 50 ms after load
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(page.evaluate("1"), 2)
    finally:
        # A page stuck in JS cannot run unload handlers; closing must still finish.
        await asyncio.wait_for(context.close(), 20)


async def test_popup_opens_new_page(sandbox_url: str, page: Page) -> None:
    await page.goto(f"{sandbox_url}/hostile/popup", wait_until="load")
    for role, name in (("link", "Open help in a new tab"), ("button", "Open help window")):
        async with page.context.expect_page(timeout=STEP_MS) as info:
            await page.get_by_role(role, name=name, exact=True).click()
        popup = await info.value
        await popup.wait_for_load_state("load", timeout=STEP_MS)
        assert popup.url.endswith("/hostile/popup-target")
        await popup.close()


async def test_dialogs_fire(sandbox_url: str, page: Page) -> None:
    await page.goto(f"{sandbox_url}/hostile/dialog", wait_until="load")
    seen: list[str] = []

    async def handle(dialog: Any) -> None:
        seen.append(dialog.type)
        await dialog.dismiss()

    page.on("dialog", handle)
    for name in ("Show alert", "Delete draft", "Say hello"):
        await page.get_by_role("button", name=name, exact=True).click()
    for _ in range(50):
        if len(seen) == 3:
            break
        await asyncio.sleep(0.05)
    assert seen == ["alert", "confirm", "prompt"]
    assert await page.inner_text("#out") == "Hello stranger"


async def test_download_fires(sandbox_url: str, browser: Browser) -> None:
    context = await browser.new_context(accept_downloads=True)
    try:
        page = await context.new_page()
        await page.goto(f"{sandbox_url}/hostile/download", wait_until="load", timeout=STEP_MS)
        async with page.expect_download(timeout=STEP_MS) as info:
            await page.get_by_role("link", name="Download quarterly report (CSV)",
                                   exact=True).click()
        download = await info.value
        assert download.suggested_filename == "quarterly-report.csv"
    finally:
        await asyncio.wait_for(context.close(), 15)
