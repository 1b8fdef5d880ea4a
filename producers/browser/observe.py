"""What a browser worker records after each step: screenshot, marks, tree, page metadata.

The page's own text (URL, title, tree, element names) is cut to the caps of
webgym_common.pagetext before anything else reads it: the marks are numbered in the tree as
kept, so every mark's element is in the tree that is published.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from dataclasses import dataclass, field

from playwright.async_api import CDPSession, Page

from webgym_common.agent.marks import parse_marks
from webgym_common.config import BrowserSettings
from webgym_common.events import Mark
from webgym_common.pagetext import CAPS, TREE_SEP, cut

# Text that marks an anti-bot wall rather than the site itself.
BLOCK_PATTERNS = re.compile(
    r"verify you are (a )?human|are you a robot|captcha|unusual traffic|access denied"
    r"|403 forbidden|checking your browser",
    re.I,
)


def looks_blocked(tree: str, status: int | None) -> str | None:
    """Why this page looks like an anti-bot wall, or None."""
    if status in (403, 429):
        return f"HTTP {status}"
    hit = BLOCK_PATTERNS.search(tree)
    return f"page says {hit.group(0)!r}" if hit else None


@dataclass
class Observation:
    url: str
    title: str
    tree: str
    marks: list[Mark]
    screenshot: bytes
    timings_ms: dict[str, float] = field(default_factory=dict)


async def screenshot(cdp: CDPSession, cfg: BrowserSettings) -> bytes:
    # CDP's captureScreenshot is the fastest path and the only one that also writes WebP.
    params: dict[str, object] = {"format": cfg.screenshot_format}
    if cfg.screenshot_format != "png":
        params["quality"] = cfg.screenshot_quality
    result = await cdp.send("Page.captureScreenshot", params)
    return base64.b64decode(result["data"])


async def observe(page: Page, cdp: CDPSession, cfg: BrowserSettings) -> Observation:
    """Capture the page; raises TimeoutError when the page does not answer in time."""
    timings: dict[str, float] = {}
    timeout_ms = cfg.observe_timeout_s * 1000

    async def timed(name: str, coro):  # noqa: ANN001, ANN202
        started = time.perf_counter()
        try:
            return await asyncio.wait_for(coro, cfg.observe_timeout_s)
        finally:
            timings[name] = (time.perf_counter() - started) * 1000

    shot = await timed("screenshot", screenshot(cdp, cfg))
    tree = await timed("tree", page.aria_snapshot(mode="ai", boxes=True, timeout=timeout_ms))
    title = await timed("title", page.title())
    return capped(page.url, title, tree, shot, timings, cfg.max_marks)


def capped(url: str, title: str, tree: str, shot: bytes, timings_ms: dict[str, float],
           max_marks: int) -> Observation:
    """The observation of what the page gave, its text cut to the caps, its marks read from
    the tree as kept."""
    tree = cut(tree, CAPS.tree, sep=TREE_SEP)
    marks = [m if len(m.name) <= CAPS.mark_name
             else m.model_copy(update={"name": cut(m.name, CAPS.mark_name)})
             for m in parse_marks(tree, max_marks)]
    return Observation(url=cut(url, CAPS.url), title=cut(title, CAPS.title), tree=tree,
                       marks=marks, screenshot=shot, timings_ms=timings_ms)
