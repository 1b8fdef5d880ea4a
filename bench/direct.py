"""A page opened and observed with the worker's own code, without Kafka (benchmark baselines)."""

from __future__ import annotations

from playwright.async_api import BrowserContext

from harness.hand_fed import hand_request
from producers.browser.browser_pool import BrowserPool
from producers.browser.execute import settle
from producers.browser.observe import Observation, observe
from producers.browser.session import EpisodeSession
from webgym_common.config import BrowserSettings


async def open_observed_page(
    pool: BrowserPool, cfg: BrowserSettings, url: str
) -> tuple[EpisodeSession, BrowserContext, Observation]:
    """A fresh context on `url`, settled and observed, as a worker's step 0 would be."""
    # A real request: the executor reads its driver (which actions it may take).
    session = EpisodeSession(request=hand_request(url, max_steps=64, timeout_s=3600),
                             partition=0)
    context = await pool.new_context()
    await session.attach(context, await context.new_page())
    navs = session.nav_requests
    page, cdp = session.attached
    await page.goto(url, wait_until="commit")
    await settle(session, page, cfg, navs)
    return session, context, await observe(page, cdp, cfg)
