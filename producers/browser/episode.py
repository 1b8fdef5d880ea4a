"""The story of one episode in a browser worker.

Delivery: an episode this worker keeps ends with exactly one EpisodeCompleted, published
with retries until Kafka has it. An episode taken away (its partition revoked, the worker
stopping) is cancelled wherever it is and publishes nothing more: its next owner resumes
it from the log.

Open a context, visit the start page, publish step 0; then for each action of the
current step: execute it, observe, publish the next step; end with EpisodeCompleted.
A page that scores itself (MiniWoB++, page_env.py) is started with the task's seed before
step 0, whose observation carries the page's instruction; the page saying done ends the
episode, and its reward is read into the EpisodeCompleted however the episode ended.
Whatever stops it (a cancel, a crashed or hung page, Kafka or MinIO failing past their
retries, a bug) decides the termination and reason (endings.py); a hung page is closed,
then its context, then (if need be) the browser is replaced.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from playwright.async_api import BrowserContext, Page

from producers.browser.browser_pool import BrowserPool, close_quietly
from producers.browser.endings import Ending, completion_event, ending_for
from producers.browser.execute import ActionFailed, execute, settle
from producers.browser.observe import Observation, looks_blocked, observe
from producers.browser.page_env import (
    done_reason,
    page_env,
    page_state_of,
    start_episode,
    with_page_reward,
)
from producers.browser.retries import UploadFailed, deliver, retry_until
from producers.browser.session import (
    EpisodeAborted,
    EpisodeSession,
    episode_headers,
    is_rerun,
    keep_action,
)
from producers.browser.urlpolicy import check_url
from webgym_common.choices import Driver, ScreenshotFormat
from webgym_common.config import Settings
from webgym_common.events import ActionChosen, StepObserved, Viewport
from webgym_common.objectstore import ObjectStore
from webgym_common.pagetext import CAPS, cut_or_none
from webgym_common.stream.bus import EventProducer
from webgym_common.timings import Timings
from webgym_common.topics import Topic

log = logging.getLogger(__name__)


def resend_after_s(configured_s: float, session: EpisodeSession) -> float:
    """How long an observation waits for its action before it is published again (inf:
    never). Only the policy is asked again: an outside driver (webgym drive, the env
    server's client) may take its time."""
    if configured_s <= 0 or session.request.driver != Driver.POLICY:
        return math.inf
    return configured_s


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
        self.closing: set[asyncio.Task] = set()  # contexts of cancelled episodes

    async def run(self, session: EpisodeSession) -> str:
        """Play the episode to its end and publish its EpisodeCompleted; returns the termination.

        Cancelled (taken away): raises CancelledError, having published nothing more.
        """
        try:
            if session.stopped is not None:  # cancelled before it began: nothing to open
                ending = Ending(*session.stopped)
            else:
                ending = await self._play_until_stopped(session)
                ending = await with_page_reward(session, ending, self.cfg.action_timeout_s)
                await self._close(session, ending)
            await self._complete(session, ending)
        except asyncio.CancelledError:
            # Closing a context can take seconds; whoever cancelled us does not wait for it.
            task = asyncio.ensure_future(self._close(session, Ending("crashed")))
            self.closing.add(task)
            task.add_done_callback(self.closing.discard)
            raise
        return ending.termination

    async def _play_until_stopped(self, session: EpisodeSession) -> Ending:
        play = asyncio.create_task(self._open_and_play(session))
        session.interrupt = play.cancel  # session.stop() interrupts whatever it is doing
        try:
            return await play
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if session.stopped is None or (me is not None and me.cancelling()):
                raise  # taken away, not stopped
            return Ending(*session.stopped, page_suspect=session.crashed is not None)
        except Exception as err:  # every failure ends the episode, with its reason
            if not isinstance(err, EpisodeAborted):
                log.warning("episode %s stopped by %r", session.episode_id, err)
            return ending_for(err, session.crashed)
        finally:
            session.interrupt = None

    async def _open_and_play(self, session: EpisodeSession) -> Ending:
        blocked = await self._open(session)
        return Ending("blocked", blocked) if blocked else await self._play(session)

    async def _open(self, session: EpisodeSession) -> str | None:
        """Visit the start page and publish step 0; returns why it is blocked, if it is."""
        url = self.settings.resolve_url(session.request.task.website)
        check_url(url, self.cfg.url_allowlist)
        context = await self.pool.new_context()
        session.context = context
        await asyncio.wait_for(context.set_extra_http_headers(
            episode_headers(session.episode_id)), self.cfg.action_timeout_s)
        page = await asyncio.wait_for(context.new_page(), 10)
        await session.attach(context, page, self.cfg.action_timeout_s)
        context.on("page", lambda popup: session.in_background(asyncio.ensure_future(
            self._follow_popup(session, context, popup))))
        navs = session.nav_requests
        await page.goto(url, wait_until="commit", timeout=self.cfg.navigation_timeout_s * 1000)
        loading = await settle(session, page, self.cfg, navs)
        instruction = None
        if (env := page_env(session)) is not None:
            instruction = await start_episode(page, env, session.request.deadline.timestamp(),
                                              self.cfg.navigation_timeout_s)
        return await self._observe_and_publish(
            session, effect=loading or f"opened {url}", error=None, instruction=instruction
        )

    async def _follow_popup(
        self, session: EpisodeSession, context: BrowserContext, page: Page
    ) -> None:
        try:
            await session.attach(context, page, self.cfg.action_timeout_s)
        except Exception as err:  # the episode goes on in the page it had
            log.warning("episode %s: could not follow a new tab: %r", session.episode_id, err)
            return
        session.notes.append("the page opened a new tab; the episode continues there")

    async def _play(self, session: EpisodeSession) -> Ending:
        req = session.request
        if session.step >= req.max_steps:
            return Ending("max_steps")
        pending: dict[int, ActionChosen] = {}
        while True:
            action = await self._next_action(session, pending)
            if session.published_at is not None:
                session.timings.add("action_wait",
                                    (time.perf_counter() - session.published_at) * 1000)
            if action.action.kind == "ANSWER":
                return Ending("answer", answer=action.action.text)
            await self._label_requests(session, is_rerun(session.step, pending))
            error = effect = None
            try:
                effect = await execute(session, action.action, self.cfg, self.pool.policy)
            except ActionFailed as err:
                error = str(err)
            if session.crashed:
                raise EpisodeAborted("crashed", session.crashed)
            session.step += 1
            state = await page_state_of(session, self.cfg.action_timeout_s)
            done = state is not None and state.done
            blocked = await self._observe_and_publish(session, effect, error, page_done=done)
            if blocked:
                return Ending("blocked", blocked)
            if state is not None and state.done:
                # No step is left once the page has ended its episode; "max_steps" (not
                # "answer": there is no answer, and no action follows this observation).
                return Ending("max_steps", done_reason(state))
            if session.step >= req.max_steps:
                return Ending("max_steps")

    async def _next_action(
        self, session: EpisodeSession, pending: dict[int, ActionChosen]
    ) -> ActionChosen:
        """The action for the current step (the first one chosen); earlier ones are reruns.

        An observation the policy leaves unanswered for `action_resend_s` is published again
        (`_ask_again`), so one lost on the way (seen: faust 0.15.3 committing past a record
        it never handed to the agent, around a restart) costs a resend, not the episode.
        """
        deadline = session.request.deadline.timestamp()
        resend_s = resend_after_s(self.cfg.action_resend_s, session)
        while True:
            while not session.inbox.empty():  # all that came, so reruns are known as such
                keep_action(session.inbox.get_nowait(), session.step, pending)
            if session.step in pending:
                return pending.pop(session.step)
            remaining = deadline - time.time()
            if remaining <= 0:
                raise EpisodeAborted("timeout", "the episode's deadline passed")
            try:
                item = await asyncio.wait_for(session.inbox.get(), min(remaining, resend_s))
            except TimeoutError:
                if resend_s < remaining:
                    await self._ask_again(session, resend_s)
                    continue
                raise EpisodeAborted("timeout", "the episode's deadline passed") from None
            keep_action(item, session.step, pending)

    async def _ask_again(self, session: EpisodeSession, waited_s: float) -> None:
        """Publish the current step's observation again, event id and all: the policy decides
        a step once and answers a copy by publishing that decision unless it is out already."""
        obs = session.last_observation
        if obs is None or obs.step != session.step:
            return
        log.warning("episode %s step %d: no action after %g s; its observation is published "
                    "again", session.episode_id, session.step, waited_s)
        await deliver(self.producer, Topic.OBSERVATIONS, session.episode_id, obs,
                      self._publish_until(session))

    def _publish_until(self, session: EpisodeSession) -> float:
        """Until when (epoch s) an observation's upload and publish are tried again."""
        return min(session.request.deadline.timestamp(),
                   time.time() + self.cfg.dependency_retry_s)

    async def _label_requests(self, session: EpisodeSession, rerun: bool) -> None:
        """The action's requests carry its step (an idempotency key) and the rerun flag."""
        label = (session.step, rerun)
        if label != session.labelled and session.context is not None:
            await asyncio.wait_for(session.context.set_extra_http_headers(
                episode_headers(session.episode_id, rerun,
                                f"{session.request.event_id}:{session.step}")),
                self.cfg.action_timeout_s)
            session.labelled = label

    async def _observe_and_publish(
        self, session: EpisodeSession, effect: str | None, error: str | None,
        instruction: str | None = None, page_done: bool = False,
    ) -> str | None:
        """Publish the current step's observation; returns why the page is blocked, if it is."""
        started = time.perf_counter()
        obs = await observe(*session.attached, self.cfg)
        # A self-scoring page is a local benchmark page, never an anti-bot wall.
        blocked = None if page_env(session) else looks_blocked(obs.tree, session.last_status)
        terminal = bool(blocked) or page_done or session.step >= session.request.max_steps
        await self._publish_observation(session, obs, effect, error, terminal, started,
                                        instruction)
        return blocked

    async def _publish_observation(
        self, session: EpisodeSession, obs: Observation, effect: str | None,
        error: str | None, terminal: bool, started: float, instruction: str | None,
    ) -> None:
        fmt = self.cfg.screenshot_format
        until = self._publish_until(session)
        with session.timings.phase("upload"):
            blob = await retry_until(
                lambda: self.store.put_blob(obs.screenshot, ScreenshotFormat(fmt).mime), until,
                f"uploading the screenshot of step {session.step}", UploadFailed)
        session.timings.ms.update(obs.timings_ms)
        session.timings.add("total", (time.perf_counter() - started) * 1000)
        notes = session.take_notes()
        session.marks = {m.index: m for m in obs.marks}
        event = StepObserved(
            episode_id=session.episode_id, task_id=session.request.task.task_id,
            step=session.step, url=obs.url, title=obs.title,
            viewport=Viewport(width=self.cfg.viewport_width, height=self.cfg.viewport_height),
            screenshot_uri=blob.uri, screenshot_sha256=blob.sha256, screenshot_format=fmt,
            accessibility_tree=obs.tree, marks=obs.marks, timings_ms=session.timings.ms,
            action_effect=cut_or_none("; ".join(x for x in (effect, notes) if x) or None,
                                      CAPS.effect),
            error=cut_or_none(error, CAPS.error), terminal=terminal, worker_id=self.worker_id,
            instruction=cut_or_none(instruction, CAPS.instruction),
        )
        publishing = time.perf_counter()
        await deliver(self.producer, Topic.OBSERVATIONS, session.episode_id, event, until)
        # The next step's timings start here; its observation reports this publish.
        session.timings, session.published_at = Timings(), publishing
        session.last_observation = event
        session.timings.add("publish", (time.perf_counter() - publishing) * 1000)

    async def _close(self, session: EpisodeSession, ending: Ending) -> None:
        """Close the episode's page (if it may be hung) and context; replace a stuck browser."""
        for task in list(session.background):
            task.cancel()
        if ending.page_suspect and session.page is not None:
            log.warning("episode %s: %s; closing its page", session.episode_id, ending.reason)
            try:
                await asyncio.wait_for(session.page.close(run_before_unload=False), 5)
            except Exception:  # the context is closed next in any case
                pass
        if not await close_quietly(session.context):
            try:
                await self.pool.restart(f"context of {session.episode_id} would not close")
            except Exception:  # the next episode's new_context launches one again
                log.exception("replacing the browser failed")

    async def _complete(self, session: EpisodeSession, ending: Ending) -> None:
        """Publish the EpisodeCompleted, retrying until Kafka has it: without it the episode
        would never end (its offsets stay held, so a next owner would resume it instead)."""
        event = completion_event(session, ending, self.worker_id)
        await deliver(self.producer, Topic.EPISODES_COMPLETED, session.episode_id, event, None)
        log.info("episode %s ended: %s %s", session.episode_id, ending.termination,
                 ending.reason or "")

