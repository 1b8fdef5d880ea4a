"""Pages that score themselves (MiniWoB++): start the page's episode, read its verdict.

The protocol (its JS is in webgym_common.miniwob, shared with the reference builder) is
MiniWoB's own (the `miniwob` package's Selenium instance does the same): seed the page's
random generator (`Math.seedrandom`), set the data mode, call `core.startEpisodeReal()`
(it draws the problem, hides the START overlay `#sync-task-cover` and starts the page's
episode timer) and wait for `WOB_TASK_READY`; `core.getUtterance()` is the instruction the
page wrote. After each action
`WOB_DONE_GLOBAL` says whether the page has ended its episode and `WOB_RAW_REWARD_GLOBAL`
is its reward without the time penalty (-1..1, > 0 solved; 0 while not done). Every call
has a timeout; a page that does not answer is the caller's crashed page.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from playwright.async_api import Page

from producers.browser.endings import Ending
from producers.browser.session import EpisodeSession
from webgym_common.events import PageEnvironment
from webgym_common.miniwob import (
    DATA_MODE,
    MINIWOB,
    READY_JS,
    START_JS,
    STATE_JS,
    TASK_READY_JS,
    UTTERANCE_JS,
)

log = logging.getLogger(__name__)

# The page's own episode timer (core.EPISODE_MAX_TIME, 10 s by default) would end an
# episode long before a CPU policy acts (~8 s an action): it is set to the episode's
# remaining time, at least this much.
MIN_PAGE_TIME_S = 60.0


@dataclass(frozen=True)
class PageState:
    done: bool
    raw_reward: float
    reason: str | None = None


def is_page_env(env: PageEnvironment | None) -> bool:
    """Whether this worker plays the task by a page's protocol (MiniWoB++ is the one)."""
    return env is not None and env.kind == MINIWOB


def page_env(session: EpisodeSession) -> PageEnvironment | None:
    """The environment this episode plays by its page's protocol, if any."""
    env = session.request.task.environment
    return env if is_page_env(env) else None


def page_time_ms(deadline_s: float, now_s: float) -> int:
    """The page's episode time limit: what is left of the episode's, at least the minimum."""
    return int(max(deadline_s - now_s, MIN_PAGE_TIME_S) * 1000)


def page_state(raw: Any) -> PageState:
    """The page's globals as read by STATE_JS (a missing or odd value is not done, reward 0)."""
    raw = raw if isinstance(raw, dict) else {}
    reward = raw.get("raw")
    return PageState(done=raw.get("done") is True,
                     raw_reward=float(reward) if isinstance(reward, int | float) else 0.0,
                     reason=raw.get("reason"))


def done_reason(state: PageState) -> str:
    """The EpisodeCompleted reason of an episode the page ended."""
    why = f": {state.reason}" if state.reason else ""
    return f"the page ended its episode (raw reward {state.raw_reward:g}{why})"


async def start_episode(page: Page, env: PageEnvironment, deadline_s: float,
                        timeout_s: float) -> str:
    """Start the page's episode with the task's seed; returns the page's instruction."""
    # The page's onload draws the START overlay (core.startEpisode); starting before it ran
    # would fail, and it would cover the episode if it ran after.
    await page.wait_for_function(READY_JS, timeout=timeout_s * 1000)
    max_ms = page_time_ms(deadline_s, time.time())
    await asyncio.wait_for(page.evaluate(START_JS, [env.seed, DATA_MODE, max_ms]), timeout_s)
    await page.wait_for_function(TASK_READY_JS, timeout=timeout_s * 1000)
    return str(await asyncio.wait_for(page.evaluate(UTTERANCE_JS), timeout_s)).strip()


async def read_state(page: Page, timeout_s: float) -> PageState:
    """Whether the page has ended its episode, and its raw reward."""
    return page_state(await asyncio.wait_for(page.evaluate(STATE_JS), timeout_s))


async def page_state_of(session: EpisodeSession, timeout_s: float) -> PageState | None:
    """A self-scoring page's done flag and reward after an action (None: any other page)."""
    if page_env(session) is None:
        return None
    return await read_state(session.attached[0], timeout_s)


async def with_page_reward(session: EpisodeSession, ending: Ending, timeout_s: float) -> Ending:
    """The ending with the page's raw reward, read before the context closes, however the
    episode ended. None when it cannot be read: not a self-scoring page, a page that never
    opened, or one that may be hung (`page_suspect`: it would hang this call too)."""
    if page_env(session) is None or session.page is None or ending.page_suspect:
        return ending
    try:
        state = await read_state(session.page, min(5.0, timeout_s))
    except Exception as err:  # the score then says the reward is missing
        log.warning("episode %s: the page's reward could not be read: %r",
                    session.episode_id, err)
        return ending
    return replace(ending, page_reward=state.raw_reward)
