"""A page opened and observed with the worker's own code, without Kafka (benchmark baselines)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from playwright.async_api import BrowserContext

from producers.browser.browser_pool import BrowserPool
from producers.browser.execute import settle
from producers.browser.observe import Observation, observe
from producers.browser.session import EpisodeSession
from webgym_common.choices import Driver, Split
from webgym_common.config import BrowserSettings
from webgym_common.events import EpisodeRequested, Task, utc_now


def bench_request(url: str, max_steps: int = 64) -> EpisodeRequested:
    """The request a worker would hold for a policy-driven episode on `url` (the executor
    reads it: which actions the driver may take)."""
    eid = f"bench-{uuid.uuid4().hex[:10]}"
    task = Task(task_id=f"task-{eid}", task_name="benchmark", domain="bench", website=url,
                difficulty=1)
    return EpisodeRequested(episode_id=eid, task=task, iteration=0, split=Split.TEST,
                            max_steps=max_steps, deadline=utc_now() + timedelta(hours=1),
                            policy_version="bench", driver=Driver.POLICY)


async def open_observed_page(
    pool: BrowserPool, cfg: BrowserSettings, url: str
) -> tuple[EpisodeSession, BrowserContext, Observation]:
    """A fresh context on `url`, settled and observed, as a worker's step 0 would be."""
    session = EpisodeSession(request=bench_request(url), partition=0)
    context = await pool.new_context()
    await session.attach(context, await context.new_page())
    navs = session.nav_requests
    page, cdp = session.attached
    await page.goto(url, wait_until="commit")
    await settle(session, page, cfg, navs)
    return session, context, await observe(page, cdp, cfg)
