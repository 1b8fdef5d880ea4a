"""Carry out one ParsedAction on an episode's page, then wait for the page to settle.

`HANDLERS` maps each kind of the action spec (webgym_common.agent.actions) to the
function that carries it out.

An action that cannot be carried out (no such element, a point off the page, a
refused URL) raises ActionFailed; the worker reports it in the next observation
and the episode goes on. So does an action the episode's driver may not issue
(`refusal`): one the model is never offered (Visit) runs only in an episode whose
actions come from outside (webgym drive, the env server), never in a policy's, whatever
parsed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page

from producers.browser.session import EpisodeSession
from producers.browser.urlpolicy import UrlPolicy, UrlRefused, check_url
from webgym_common.agent.actions import ACTIONS, ActionKind, kind_of
from webgym_common.choices import Driver, InteractionMode, SettleMode
from webgym_common.config import BrowserSettings
from webgym_common.events import ParsedAction


class ActionFailed(Exception):
    pass


# A marked element still covered after this long is reported as covered (Playwright's own
# retries would wait the whole action timeout, 10 s by default).
COVER_CHECK_S = 2.0


@dataclass(frozen=True)
class _Env:
    """What a handler acts on."""

    session: EpisodeSession
    page: Page
    cfg: BrowserSettings
    url_policy: UrlPolicy | None = None  # the worker's (DNS + private allowlist)

    @property
    def timeout_ms(self) -> float:
        return self.cfg.action_timeout_s * 1000


def _element(env: _Env, index: int | None) -> Locator:
    mark = env.session.marks.get(index) if index is not None else None
    if mark is None:
        raise ActionFailed(f"there is no element [{index}] on this page")
    return env.page.locator(f"aria-ref={mark.ref}")


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


def _by_mark(a: ParsedAction) -> bool:
    return a.mode == InteractionMode.SET_OF_MARKS


def intercepting(playwright_error: str) -> str | None:
    """The element that takes a target's pointer events, from Playwright's call log
    ("<div id="cover">…</div> intercepts pointer events"); None if none did."""
    found = None
    for line in playwright_error.splitlines():
        line = line.strip().removeprefix("- ").strip()
        if line.endswith("intercepts pointer events"):
            found = line.removesuffix("intercepts pointer events").strip()
    return found[:200] if found else None


async def _pointer(env: _Env, a: ParsedAction, act: Callable[[Locator, float], Awaitable[None]]
                   ) -> None:
    """Click or hover a marked element. A covered one (a cookie banner, a modal, a start
    overlay) fails after COVER_CHECK_S, naming what covers it, instead of Playwright's
    retries for the whole action timeout; nothing is clicked until the target is hit."""
    loc = _element(env, a.element)
    first = min(COVER_CHECK_S * 1000, env.timeout_ms)
    try:
        await act(loc, first)
        return
    except PlaywrightError as err:
        if (cover := intercepting(str(err))) is not None:
            raise ActionFailed(f"[{a.element}] is covered by {cover}, which takes its "
                               "clicks: act on that element first") from None
        if env.timeout_ms <= first:
            raise
    await act(loc, env.timeout_ms - first)  # not covered, only not ready yet


async def _click(env: _Env, a: ParsedAction) -> str:
    if _by_mark(a):
        await _pointer(env, a, lambda loc, ms: loc.click(timeout=ms))
    else:
        await env.page.mouse.click(*_point(env.cfg, a))
    return "clicked"


async def _hover(env: _Env, a: ParsedAction) -> str:
    if _by_mark(a):
        await _pointer(env, a, lambda loc, ms: loc.hover(timeout=ms))
    else:
        await env.page.mouse.move(*_point(env.cfg, a))
    return "hovered"


async def _type(env: _Env, a: ParsedAction) -> str:
    page = env.page
    if _by_mark(a):
        loc = _element(env, a.element)
        await loc.fill(a.text or "", timeout=env.timeout_ms)
        await loc.press("Enter", timeout=env.timeout_ms)
    else:
        await page.mouse.click(*_point(env.cfg, a))
        await page.keyboard.press("ControlOrMeta+A")
        await page.keyboard.press("Backspace")
        await page.keyboard.type(a.text or "")
        await page.keyboard.press("Enter")
    return f"typed {a.text!r} and pressed Enter"


async def _scroll(env: _Env, a: ParsedAction) -> str:
    """Scroll and HoverAndScroll: put the mouse over the target, then turn the wheel."""
    cfg = env.cfg
    if a.element is not None:
        await _element(env, a.element).hover(timeout=env.timeout_ms)
    elif a.x is not None:
        await env.page.mouse.move(*_point(cfg, a))
    else:  # WINDOW
        await env.page.mouse.move(cfg.viewport_width / 2, cfg.viewport_height / 2)
    await _wheel(env.page, cfg, a.direction)
    return f"scrolled {a.direction}"


async def _wait(env: _Env, a: ParsedAction) -> str:
    await asyncio.sleep(env.cfg.wait_action_s)
    return f"waited {env.cfg.wait_action_s:g} s"


async def _go_back(env: _Env, a: ParsedAction) -> str:
    # The response cannot tell: it is None for in-page steps too, and a new page's
    # history starts with about:blank, which is not the site.
    cdp = env.session.cdp
    assert cdp is not None  # attached with the page
    history = await cdp.send("Page.getNavigationHistory")
    i = history["currentIndex"]
    if i == 0 or history["entries"][i - 1]["url"] == "about:blank":
        return "there was no page to go back to"
    await env.page.go_back(timeout=env.cfg.navigation_timeout_s * 1000, wait_until="commit")
    return "went back"


async def _tab_and_enter(env: _Env, a: ParsedAction) -> str:
    await env.page.keyboard.press("Tab")
    await env.page.keyboard.press("Enter")
    return "pressed Tab and Enter"


async def _visit(env: _Env, a: ParsedAction) -> str:
    url = a.url or ""
    try:
        # Refused here, the episode goes on with an error in its observation; refused only by
        # the route, the navigation would land on chrome-error:// and crash the page.
        check_url(url, env.cfg.url_allowlist)
        if env.url_policy is not None:
            await env.url_policy.check(url)
    except UrlRefused as err:
        raise ActionFailed(f"refused to visit {a.url}: {err}") from None
    await env.page.goto(url, timeout=env.cfg.navigation_timeout_s * 1000, wait_until="commit")
    return f"visited {url}"


async def _answer(env: _Env, a: ParsedAction) -> str:
    return "answered"  # the episode ends; the worker publishes the completion


Handler = Callable[[_Env, ParsedAction], Awaitable[str]]

# One handler per action of the spec (webgym_common.agent.actions.ACTIONS); a unit test checks.
HANDLERS: dict[ActionKind, Handler] = {
    ActionKind.CLICK: _click,
    ActionKind.HOVER: _hover,
    ActionKind.TYPE: _type,
    ActionKind.SCROLL: _scroll,
    ActionKind.HOVER_AND_SCROLL: _scroll,
    ActionKind.WAIT: _wait,
    ActionKind.GO_BACK: _go_back,
    ActionKind.TAB_AND_ENTER: _tab_and_enter,
    ActionKind.VISIT: _visit,
    ActionKind.ANSWER: _answer,
}


def refusal(kind: ActionKind, driver: str) -> str | None:
    """Why an episode driven by `driver` may not run an action of `kind` (None: it may).

    An action the model is never offered is the pipeline's own: only an external driver
    issues it. In a policy's episode it can only come from a reply the model was talked into
    (a page's prompt injection) that a decoder without the grammar and a lenient parser let
    through, so it is refused here as well as by the parser."""
    if ACTIONS[kind].offered or driver == Driver.EXTERNAL:
        return None
    return (f"refused to run {kind}: it is not an action the model is offered, and only an "
            f"external driver may issue it (this episode's driver: {driver})")


async def _act(session: EpisodeSession, page: Page, a: ParsedAction, cfg: BrowserSettings,
               url_policy: UrlPolicy | None = None) -> str:
    kind = kind_of(a.kind)
    if kind is ActionKind.INVALID:
        raise ActionFailed(f"invalid action: {a.error}")
    handler = HANDLERS.get(kind) if kind is not None else None
    if kind is None or handler is None:
        raise ActionFailed(f"unknown action kind {a.kind}")
    if (why := refusal(kind, session.request.driver)) is not None:
        raise ActionFailed(why)
    return await handler(_Env(session, page, cfg, url_policy), a)


async def settle(
    session: EpisodeSession, page: Page, cfg: BrowserSettings, navs_before: int
) -> str:
    """Wait out what the action started: a navigation to commit and load (bounded)."""
    with session.timings.phase("settle"):
        return await _settle(session, page, cfg, navs_before)


async def _settle(session: EpisodeSession, page: Page, cfg: BrowserSettings,
                  navs_before: int) -> str:
    if cfg.settle is SettleMode.FIXED:
        await asyncio.sleep(cfg.settle_s)
        return await _navigated(session, page, cfg, navs_before)
    if session.nav_requests == navs_before:  # nothing navigating yet: the page may change,
        await quiet(session, page, cfg.settle_quiet_s, cfg.settle_max_s)  # or navigate late
    loading = await _navigated(session, page, cfg, navs_before)
    if session.nav_requests != navs_before and not loading:  # the new page's own scripts
        await quiet(session, page, cfg.settle_quiet_s, cfg.settle_max_s)
    return loading


# Resolves once the DOM has not changed for `quiet` ms, or after `cap` ms. It runs in the
# page's own world, so a hostile page can keep it waiting: the cap and the caller's timeout
# bound that.
DOM_QUIET_JS = """([quiet, cap]) => new Promise((resolve) => {
  const start = performance.now();
  let last = start;
  const seen = new MutationObserver(() => { last = performance.now(); });
  seen.observe(document, {subtree: true, childList: true, attributes: true,
                          characterData: true});
  const check = () => {
    const now = performance.now();
    if (now - last >= quiet || now - start >= cap) { seen.disconnect(); resolve(now - start); }
    else setTimeout(check, Math.max(10, quiet - (now - last)));
  };
  setTimeout(check, quiet);
})"""


async def quiet(session: EpisodeSession, page: Page, quiet_s: float, max_s: float) -> None:
    """Wait until no request is in flight and the DOM has been still for `quiet_s` (both at
    once), at most `max_s`. A page that navigates away ends the wait (the caller waits for
    the navigation); one that never quiets down is observed as it is at the cap."""
    deadline = time.monotonic() + max_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            await asyncio.wait_for(page.evaluate(DOM_QUIET_JS, [quiet_s * 1000, left * 1000]),
                                   left + 1)
        except (PlaywrightError, TimeoutError):
            return
        if session.requests_in_flight == 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(session.network_idle.wait(),
                                   max(0.0, deadline - time.monotonic()))


async def _navigated(session: EpisodeSession, page: Page, cfg: BrowserSettings,
                     navs_before: int) -> str:
    """Wait for a navigation the action started to commit and load (bounded)."""
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


async def execute(session: EpisodeSession, action: ParsedAction, cfg: BrowserSettings,
                  url_policy: UrlPolicy | None = None) -> str:
    """Run the action; return its effect in words. Raises ActionFailed or TimeoutError."""
    page = session.page
    assert page is not None
    navs_before = session.nav_requests
    try:
        with session.timings.phase("execute"):
            effect = await asyncio.wait_for(_act(session, page, action, cfg, url_policy),
                                            cfg.action_timeout_s + cfg.wait_action_s + 5)
    except PlaywrightError as err:
        if session.crashed:
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ActionFailed(f"{action.kind} failed: {first}") from None
    loading = await settle(session, page, cfg, navs_before)
    return f"{effect}; {loading}" if loading else effect
