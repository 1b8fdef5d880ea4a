"""What a browser worker records after each step: screenshot, marks, tree, page metadata."""

from __future__ import annotations

import asyncio
import base64
import re
import time
from dataclasses import dataclass, field

from playwright.async_api import CDPSession, Page

from webgym_common.config import BrowserSettings
from webgym_common.events import Mark

# Roles a user can act on; they get a number in set-of-marks mode.
INTERACTIVE_ROLES = frozenset({
    "button", "link", "textbox", "searchbox", "combobox", "checkbox", "radio", "option",
    "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton",
    "listbox", "treeitem", "gridcell", "columnheader",
})
_LINE = re.compile(
    # A line whose name holds ": " is YAML-quoted: - 'link "Price: low" [ref=e5]'
    r"""^\s*- '?(?P<role>[\w-]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<attrs>.*?)"""
    r"\[ref=(?P<ref>[\w-]+)\](?P<rest>.*)$"
)
_BOX = re.compile(r"\[box=(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?),(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)\]")
# Text that marks an anti-bot wall rather than the site itself.
BLOCK_PATTERNS = re.compile(
    r"verify you are (a )?human|are you a robot|captcha|unusual traffic|access denied"
    r"|403 forbidden|checking your browser",
    re.I,
)


_INLINE_TEXT = re.compile(r"\]: (?P<text>.+)$")
UNNAMED_TEXT_CHARS = 80


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def text_of(lines: list[str], i: int) -> str:
    """A name for an element the snapshot leaves unnamed (a clickable div, MiniWoB's START
    overlay): its inline text, else its first descendant's name or text."""
    if found := _INLINE_TEXT.search(lines[i]):
        return found["text"].strip().strip("'\"")[:UNNAMED_TEXT_CHARS]
    for line in lines[i + 1:]:
        if _indent(line) <= _indent(lines[i]):
            break
        child = _LINE.match(line)
        if child and child["name"]:
            return child["name"][:UNNAMED_TEXT_CHARS]
        if found := _INLINE_TEXT.search(line) or re.search(r"- text: (?P<text>.+)$", line):
            return found["text"].strip().strip("'\"")[:UNNAMED_TEXT_CHARS]
    return ""


def parse_marks(tree: str, max_marks: int) -> list[Mark]:
    """Number the interactive, visible elements of an aria snapshot (mode="ai", boxes=True)."""
    marks: list[Mark] = []
    lines = tree.splitlines()
    for i, line in enumerate(lines):
        m = _LINE.match(line)
        if not m:
            continue
        interactive = m["role"] in INTERACTIVE_ROLES or "[cursor=pointer]" in line
        box = _BOX.search(m["attrs"] + m["rest"])
        if not interactive or box is None:
            continue
        x, y, w, h = (float(v) for v in box.groups())
        if w <= 0 or h <= 0:
            continue
        name = (m["name"] or "").replace('\\"', '"') or text_of(lines, i)
        marks.append(Mark(index=len(marks) + 1, ref=m["ref"], role=m["role"], name=name,
                          x=x, y=y, width=w, height=h))
        if len(marks) >= max_marks:
            break
    return marks


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
    return Observation(
        url=page.url, title=title, tree=tree, marks=parse_marks(tree, cfg.max_marks),
        screenshot=shot, timings_ms=timings,
    )
