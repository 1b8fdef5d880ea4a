"""Headless Chromium for tests that drive pages themselves (not through a browser worker)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

from producers.browser.browser_pool import WEBRTC_ARGS
from webgym_common.chromium import launch_options
from webgym_common.config import get_settings

# The worker's browser settings (executable, sandbox), from the same environment variables.
BROWSER = get_settings().browser
EXECUTABLE = str(BROWSER.executable_path)
LAUNCH_ARGS = [
    "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    *WEBRTC_ARGS,  # the worker's: no UDP around the network's controls
]
HAVE_BROWSER = Path(EXECUTABLE).exists()


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A launched browser (the test is skipped on a machine without Chromium)."""
    if not HAVE_BROWSER:
        pytest.skip(f"no Chromium at {EXECUTABLE}")
    async with async_playwright() as pw:
        b = await pw.chromium.launch(**launch_options(BROWSER), args=LAUNCH_ARGS,
                                     timeout=60_000)
        try:
            yield b
        finally:
            await asyncio.wait_for(b.close(), 30)
