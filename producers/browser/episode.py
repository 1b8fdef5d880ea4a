"""The story of one episode in a browser worker.

Open a context, visit the start page, publish step 0; then for each action of the
current step: execute it, observe, publish the next step; end with
EpisodeCompleted. A hung or crashed page ends the episode as `crashed` with the
reason, after the page, then the context, then (if need be) the browser is replaced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from producers.browser.browser_pool import BrowserPool, close_quietly
from producers.browser.execute import ActionFailed, execute, settle
from producers.browser.observe import Observation, looks_blocked, observe
from producers.browser.session import EpisodeAborted, EpisodeSession
from webgym_common.bus import EventProducer
from webgym_common.config import ScreenshotFormat, Settings
from webgym_common.events import ActionChosen, EpisodeCompleted, StepObserved, Viewport
from webgym_common.objectstore import ObjectStore
from webgym_common.topics import Topic
from webgym_common.urlpolicy import UrlRefused, check_url

log = logging.getLogger(__name__)

HANDOVER = "handover"  # not a termination: the partition moved and its next owner resumes


class EpisodeRunner:
    def __init__(
        self, settings: Settings, pool: BrowserPool, producer: EventProducer,
        store: ObjectStore, worker_id: str,
    ) -> None:
        self.settings = settings
        self.cfg = settings.browser
        self.pool = pool
        self.producer = producer
        self.store = store
        self.worker_id = worker_id

    async def run(self, session: EpisodeSession) -> str:
        """Play the episode to its end; returns the termination (or HANDOVER)."""
        termination, answer, reason = "crashed", None, None
        try:
            blocked = await self._open(session)
            if blocked:
                termination, reason = "blocked", blocked
            else:
                termination, answer, reason = await self._play(session)
        except EpisodeAborted as stop:
            termination, reason = stop.termination, stop.reason
        except UrlRefused as err:
            termination, reason = "crashed", f"start URL refused: {err}"
        except (TimeoutError, PlaywrightError) as err:
            termination = "crashed"
            reason = session.crashed or f"page did not answer: {_first_line(err)}"
            await self._replace_page(session, reason)
        finally:
            if not await close_quietly(session.context):
                await self.pool.restart(f"context of {session.episode_id} would not close")
        if termination != HANDOVER:
            await self._complete(session, termination, answer, reason)
        return termination

    async def _open(self, session: EpisodeSession) -> str | None:
        """Visit the start page and publish step 0; returns why it is blocked, if it is."""
        url = self.settings.resolve_url(session.request.task.website)
        check_url(url, self.cfg.url_allowlist)
        context = await self.pool.new_context()
        session.context = context
        page = await asyncio.wait_for(context.new_page(), 10)
        await session.attach(context, page)
        context.on("page", lambda popup: asyncio.ensure_future(
            self._follow_popup(session, context, popup)))
        navs = session.nav_requests
        await page.goto(url, wait_until="commit", timeout=self.cfg.navigation_timeout_s * 1000)
        loading = await settle(session, page, self.cfg, navs)
        return await self._observe_and_publish(
            session, effect=loading or f"opened {url}", error=None
        )

    async def _follow_popup(
        self, session: EpisodeSession, context: BrowserContext, page: Page
    ) -> None:
        await session.attach(context, page)
        session.notes.append("the page opened a new tab; the episode continues there")

    async def _play(self, session: EpisodeSession) -> tuple[str, str | None, str | None]:
        req = session.request
        if session.step >= req.max_steps:
            return "max_steps", None, None
        pending: dict[int, ActionChosen] = {}
        while True:
            action = await self._next_action(session, pending)
            if action.action.kind == "ANSWER":
                return "answer", action.action.text, None
            error = effect = None
            try:
                effect = await execute(session, action.action, self.cfg)
            except ActionFailed as err:
                error = str(err)
            if session.crashed:
                raise EpisodeAborted("crashed", session.crashed)
            session.step += 1
            blocked = await self._observe_and_publish(session, effect, error)
            if blocked:
                return "blocked", None, blocked
            if session.step >= req.max_steps:
                return "max_steps", None, None

    async def _next_action(
        self, session: EpisodeSession, pending: dict[int, ActionChosen]
    ) -> ActionChosen:
        """The action for the current step; earlier ones (replays) are skipped."""
        deadline = session.request.deadline.timestamp()
        while session.step not in pending:
            remaining = deadline - time.time()
            if remaining <= 0:
                raise EpisodeAborted("timeout", "the episode's deadline passed")
            try:
                item = await asyncio.wait_for(session.inbox.get(), remaining)
            except TimeoutError:
                raise EpisodeAborted("timeout", "the episode's deadline passed") from None
            if isinstance(item, EpisodeAborted):
                raise item
            if item.step >= session.step:
                pending[item.step] = item
        return pending.pop(session.step)

    async def _observe_and_publish(
        self, session: EpisodeSession, effect: str | None, error: str | None
    ) -> str | None:
        """Publish the current step's observation; returns why the page is blocked, if it is."""
        started = time.perf_counter()
        obs = await observe(*session.attached, self.cfg)
        blocked = looks_blocked(obs.tree, session.last_status)
        terminal = bool(blocked) or session.step >= session.request.max_steps
        await self._publish_observation(session, obs, effect, error, terminal, started)
        return blocked

    async def _publish_observation(
        self, session: EpisodeSession, obs: Observation, effect: str | None,
        error: str | None, terminal: bool, started: float,
    ) -> None:
        fmt = self.cfg.screenshot_format
        upload_started = time.perf_counter()
        blob = await self.store.put_blob(obs.screenshot, ScreenshotFormat(fmt).mime)
        obs.timings_ms["upload"] = (time.perf_counter() - upload_started) * 1000
        obs.timings_ms["total"] = (time.perf_counter() - started) * 1000
        notes = session.take_notes()
        session.marks = {m.index: m for m in obs.marks}
        event = StepObserved(
            episode_id=session.episode_id, task_id=session.request.task.task_id,
            step=session.step, url=obs.url, title=obs.title,
            viewport=Viewport(width=self.cfg.viewport_width, height=self.cfg.viewport_height),
            screenshot_uri=blob.uri, screenshot_sha256=blob.sha256, screenshot_format=fmt,
            accessibility_tree=obs.tree, marks=obs.marks, timings_ms=obs.timings_ms,
            action_effect="; ".join(x for x in (effect, notes) if x) or None,
            error=error, terminal=terminal, worker_id=self.worker_id,
        )
        await self.producer.publish(Topic.OBSERVATIONS, session.episode_id, event)

    async def _replace_page(self, session: EpisodeSession, reason: str) -> None:
        log.warning("episode %s: %s; replacing its page", session.episode_id, reason)
        if session.page is not None:
            try:
                await asyncio.wait_for(session.page.close(run_before_unload=False), 5)
            except Exception:
                pass

    async def _complete(
        self, session: EpisodeSession, termination: str, answer: str | None, reason: str | None
    ) -> None:
        req = session.request
        event = EpisodeCompleted(
            episode_id=session.episode_id, task_id=req.task.task_id, iteration=req.iteration,
            split=req.split, steps=session.step, termination=termination, answer=answer,
            reason=reason, final_url=session.page.url if session.page else None,
            started_at=datetime.fromtimestamp(session.started_at, UTC), worker_id=self.worker_id,
        )
        await self.producer.publish(Topic.EPISODES_COMPLETED, session.episode_id, event)
        log.info("episode %s ended: %s %s", session.episode_id, termination, reason or "")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
