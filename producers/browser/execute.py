"""Carry out one ParsedAction on an episode's page, then wait for the page to settle.

An action that cannot be carried out (no such element, a point off the page, a
refused URL) raises ActionFailed; the worker reports it in the next observation
and the episode goes on.
"""

from __future__ import annotations

import asyncio
import time

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page

from producers.browser.session import EpisodeSession
from webgym_common.config import BrowserSettings
from webgym_common.events import ParsedAction
from webgym_common.urlpolicy import UrlRefused, check_url


class ActionFailed(Exception):
    pass


def _element(session: EpisodeSession, page: Page, index: int | None) -> Locator:
    mark = session.marks.get(index) if index is not None else None
    if mark is None:
        raise ActionFailed(f"there is no element [{index}] on this page")
    return page.locator(f"aria-ref={mark.ref}")


def _point(cfg: BrowserSettings, action: ParsedAction) -> tuple[float, float]:
    x, y = action.x, action.y
    if x is None or y is None or not (0 <= x < cfg.viewport_width and 0 <= y < cfg.viewport_height):
        raise ActionFailed(
            f"point [{x}, {y}] is outside the {cfg.viewport_width}x{cfg.viewport_height} viewport"
        )
    return x, y


async def _wheel(page: Page, cfg: BrowserSettings, direction: str | None) -> None:
    dy = cfg.viewport_height * 0.8 * (-1 if direction == "up" else 1)
    await page.mouse.wheel(0, dy)


async def _act(session: EpisodeSession, page: Page, a: ParsedAction, cfg: BrowserSettings) -> str:
    t = cfg.action_timeout_s * 1000
    by_mark = a.mode == "set_of_marks"
    kind = a.kind
    if kind == "Invalid":
        raise ActionFailed(f"invalid action: {a.error}")
    if kind in ("Click", "Hover"):
        if by_mark:
            loc = _element(session, page, a.element)
            await (loc.click(timeout=t) if kind == "Click" else loc.hover(timeout=t))
        else:
            x, y = _point(cfg, a)
            await (page.mouse.click(x, y) if kind == "Click" else page.mouse.move(x, y))
        return f"{kind.lower()}ed"
    if kind == "Type":
        if by_mark:
            loc = _element(session, page, a.element)
            await loc.fill(a.text or "", timeout=t)
            await loc.press("Enter", timeout=t)
        else:
            x, y = _point(cfg, a)
            await page.mouse.click(x, y)
            await page.keyboard.press("ControlOrMeta+A")
            await page.keyboard.press("Backspace")
            await page.keyboard.type(a.text or "")
            await page.keyboard.press("Enter")
        return f"typed {a.text!r} and pressed Enter"
    if kind in ("Scroll", "HoverAndScroll"):
        if a.element is not None:
            await _element(session, page, a.element).hover(timeout=t)
        elif a.x is not None:
            await page.mouse.move(*_point(cfg, a))
        else:  # WINDOW
            await page.mouse.move(cfg.viewport_width / 2, cfg.viewport_height / 2)
        await _wheel(page, cfg, a.direction)
        return f"scrolled {a.direction}"
    if kind == "Wait":
        await asyncio.sleep(cfg.wait_action_s)
        return f"waited {cfg.wait_action_s:g} s"
    if kind == "GoBack":
        # The response cannot tell: it is None for in-page steps too, and a new page's
        # history starts with about:blank, which is not the site.
        history = await session.cdp.send("Page.getNavigationHistory")
        i = history["currentIndex"]
        if i == 0 or history["entries"][i - 1]["url"] == "about:blank":
            return "there was no page to go back to"
        await page.go_back(timeout=cfg.navigation_timeout_s * 1000, wait_until="commit")
        return "went back"
    if kind == "TabAndEnter":
        await page.keyboard.press("Tab")
        await page.keyboard.press("Enter")
        return "pressed Tab and Enter"
    if kind == "Visit":
        try:
            check_url(a.url or "", cfg.url_allowlist)
        except UrlRefused as err:
            raise ActionFailed(f"refused to visit {a.url}: {err}") from None
        await page.goto(a.url, timeout=cfg.navigation_timeout_s * 1000, wait_until="commit")
        return f"visited {a.url}"
    if kind == "ANSWER":
        return "answered"
    raise ActionFailed(f"unknown action kind {kind}")


async def settle(
    session: EpisodeSession, page: Page, cfg: BrowserSettings, navs_before: int
) -> str:
    """Wait out what the action started: a navigation to commit and load (bounded)."""
    await asyncio.sleep(cfg.settle_s)
    if session.nav_requests == navs_before:
        return ""
    deadline = time.monotonic() + cfg.navigation_timeout_s
    try:
        await asyncio.wait_for(session.nav_committed.wait(), cfg.navigation_timeout_s)
    except TimeoutError:
        return "the page is still loading"
    try:
        remaining = max(0.1, deadline - time.monotonic())
        await page.wait_for_load_state("load", timeout=remaining * 1000)
    except PlaywrightError:
        return "the page is still loading"
    return ""


async def execute(session: EpisodeSession, action: ParsedAction, cfg: BrowserSettings) -> str:
    """Run the action; return its effect in words. Raises ActionFailed or TimeoutError."""
    page = session.page
    assert page is not None
    navs_before = session.nav_requests
    try:
        effect = await asyncio.wait_for(
            _act(session, page, action, cfg), cfg.action_timeout_s + cfg.wait_action_s + 5
        )
    except PlaywrightError as err:
        if session.crashed:
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ActionFailed(f"{action.kind} failed: {first}") from None
    loading = await settle(session, page, cfg, navs_before)
    return f"{effect}; {loading}" if loading else effect
