"""The browser pool's Chromium runs its renderers sandboxed (webgym_common/chromium.py): each
renderer is in a seccomp-bpf filter and a user namespace of its own, and, when the pool
runs as root, under an unprivileged uid. Read from /proc of the processes the pool started,
beside a browser launched with the opt-out (browser.sandbox = false), whose renderers have
none of it: what the test reads would see a missing sandbox.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from producers.browser.browser_pool import BrowserPool
from producers.browser.urlpolicy import UrlPolicy
from webgym_common.config import BrowserSettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

PAGE = "data:text/html,<title>sandboxed</title><p>hello</p>"


@dataclass(frozen=True)
class Proc:
    pid: int
    kind: str  # Chromium's --type= ("" for the browser process itself)
    uids: tuple[int, ...]
    seccomp: int
    user_ns: str


def read_proc(pid: int) -> Proc | None:
    try:
        # Chromium rewrites its children's titles: the arguments may be one string.
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        status = dict(line.split(":", 1) for line in
                      Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        user_ns = os.readlink(f"/proc/{pid}/ns/user")
    except OSError:  # gone meanwhile
        return None
    kind = m.group(1) if (m := re.search(r"--type=(\S+)", cmdline)) else ""
    return Proc(pid, kind, tuple(int(u) for u in status["Uid"].split()),
                int(status["Seccomp"].strip()), user_ns)


def descendants(root: int) -> list[Proc]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if (proc := read_proc(pid)) is not None:
            out.append(proc)
    return out


def chromium_of(pool: BrowserPool, procs: list[Proc]) -> tuple[Proc, list[Proc]]:
    """The pool's browser process and its renderers, among this process's descendants."""
    exe = str(pool.cfg.executable_path)
    ours = [p for p in procs if Path(f"/proc/{p.pid}/exe").resolve().as_posix() == exe]
    browsers = [p for p in ours if p.kind == ""]
    assert len(browsers) == 1, f"one browser process expected: {browsers}"
    return browsers[0], [p for p in ours if p.kind == "renderer"]


@pytest_asyncio.fixture(loop_scope="session")
async def launched(request: pytest.FixtureRequest) -> AsyncIterator[tuple[BrowserPool, Proc,
                                                                             list[Proc]]]:
    cfg = BrowserSettings(sandbox=request.param, navigation_timeout_s=15)
    if not cfg.executable_path.exists():
        pytest.skip(f"no Chromium at {cfg.executable_path}")
    pool = BrowserPool(cfg, lambda reason: None, UrlPolicy.for_browser(cfg, "http://127.0.0.1:9"))
    await pool.start()
    try:
        context = await pool.new_context()
        page = await context.new_page()
        await page.goto(PAGE)
        assert await page.title() == "sandboxed"  # the sandboxed renderer renders
        assert (await page.screenshot())[:4] == b"\x89PNG"
        browser, renderers = chromium_of(pool, descendants(os.getpid()))
        assert renderers, "the page has a renderer process"
        yield pool, browser, renderers
        await context.close()
    finally:
        await pool.stop()


@pytest.mark.parametrize("launched", [True], indirect=True)
async def test_renderers_run_in_chromiums_sandbox(
    launched: tuple[BrowserPool, Proc, list[Proc]],
) -> None:
    _, browser, renderers = launched
    for r in renderers:
        assert r.seccomp == 2, f"renderer {r.pid} has no seccomp-bpf filter"
        assert r.user_ns != browser.user_ns, f"renderer {r.pid} shares the browser's userns"
        assert 0 not in r.uids, f"renderer {r.pid} runs as root: {r.uids}"
    if os.geteuid() == 0:  # the pool is root: the whole browser runs as the sandbox user
        assert 0 not in browser.uids, f"the browser runs as root: {browser.uids}"


@pytest.mark.parametrize("launched", [False], indirect=True)
async def test_the_opt_out_shows_what_a_missing_sandbox_looks_like(
    launched: tuple[BrowserPool, Proc, list[Proc]],
) -> None:
    _, browser, renderers = launched
    for r in renderers:
        assert r.seccomp == 0
        assert r.user_ns == browser.user_ns
        assert r.uids == browser.uids == (os.geteuid(),) * 4
