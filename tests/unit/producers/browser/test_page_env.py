"""MiniWoB's page protocol as the worker reads it: the pure decisions, and the reward read
as an episode ends (a stand-in page; real pages run in tests/integration/test_miniwob.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from producers.browser.endings import Ending, completion_event
from producers.browser.page_env import (
    MIN_PAGE_TIME_S,
    PageState,
    done_reason,
    is_page_env,
    page_env,
    page_state,
    page_time_ms,
    with_page_reward,
)
from producers.browser.session import EpisodeSession
from tests.unit.producers.browser.fakes import request
from webgym_common.events import PageEnvironment

ENV = PageEnvironment(kind="miniwob", name="click-button", seed=3)


def miniwob_session(episode_id: str = "ep-mw") -> EpisodeSession:
    req = request(episode_id)
    task = req.task.model_copy(update={"environment": ENV})
    return EpisodeSession(req.model_copy(update={"task": task}), partition=0)


class Page:
    """Answers `evaluate` with a value, or raises it, or never answers."""

    def __init__(self, value: Any = None, hang: bool = False) -> None:
        self.value, self.hang, self.calls = value, hang, 0

    async def evaluate(self, script: str, *args: Any) -> Any:
        self.calls += 1
        if self.hang:
            await asyncio.sleep(3600)
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_only_miniwob_environments_are_played_by_the_page_protocol() -> None:
    assert is_page_env(ENV) and not is_page_env(None)
    assert not is_page_env(ENV.model_copy(update={"kind": "other"}))
    assert page_env(miniwob_session()) == ENV
    assert page_env(EpisodeSession(request("ep-web"), partition=0)) is None


def test_the_page_time_limit_is_the_episode_s_remaining_time_at_least_the_minimum() -> None:
    assert page_time_ms(1000.0, 700.0) == 300_000  # far above MiniWoB's 10 s default
    assert page_time_ms(1000.0, 990.0) == int(MIN_PAGE_TIME_S * 1000)
    assert page_time_ms(1000.0, 2000.0) == int(MIN_PAGE_TIME_S * 1000)  # past: still valid


def test_the_page_s_globals_read_safely() -> None:
    assert page_state({"done": True, "raw": 1, "reason": None}) == PageState(True, 1.0)
    assert page_state({"done": True, "raw": -1.0, "reason": "timed out"}).reason == "timed out"
    assert page_state({"done": False, "raw": 0}) == PageState(False, 0.0)
    assert page_state(None) == PageState(False, 0.0)  # an odd answer is not done
    assert page_state({"done": "yes", "raw": "NaN?"}) == PageState(False, 0.0)
    assert done_reason(PageState(True, 1.0)) == "the page ended its episode (raw reward 1)"
    assert "timed out" in done_reason(PageState(True, -1.0, "timed out"))


async def test_the_reward_is_read_however_the_episode_ended() -> None:
    session = miniwob_session()
    session.page = Page({"done": True, "raw": 1.0, "reason": None})  # type: ignore[assignment]
    ended = await with_page_reward(session, Ending("max_steps", "done"), 5)
    assert ended.page_reward == 1.0 and ended.termination == "max_steps"
    session.page = Page({"done": False, "raw": 0})  # type: ignore[assignment]
    assert (await with_page_reward(session, Ending("timeout"), 5)).page_reward == 0.0
    assert (await with_page_reward(session, Ending("cancelled"), 5)).page_reward == 0.0


async def test_no_reward_when_the_page_cannot_be_read() -> None:
    session = miniwob_session()
    assert (await with_page_reward(session, Ending("cancelled"), 5)).page_reward is None  # no page
    hung = Page(hang=True)
    session.page = hung  # type: ignore[assignment]
    suspect = Ending("crashed", "page did not answer", page_suspect=True)
    assert (await with_page_reward(session, suspect, 5)).page_reward is None
    assert hung.calls == 0  # a page that may be hung is not asked: the call would hang too
    async with asyncio.timeout(5):
        assert (await with_page_reward(session, Ending("timeout"), 0.2)).page_reward is None
    session.page = Page(RuntimeError("Target closed"))  # type: ignore[assignment]
    assert (await with_page_reward(session, Ending("timeout"), 5)).page_reward is None


async def test_other_pages_are_never_asked() -> None:
    session = EpisodeSession(request("ep-web"), partition=0)
    page = Page({"done": True, "raw": 1})
    session.page = page  # type: ignore[assignment]
    assert (await with_page_reward(session, Ending("answer", answer="x"), 5)).page_reward is None
    assert page.calls == 0


def test_the_completion_carries_the_page_reward() -> None:
    session = miniwob_session()
    done = completion_event(session, Ending("max_steps", "the page ended", page_reward=-1.0), "w")
    assert done.page_reward == -1.0 and done.termination == "max_steps"
    assert completion_event(session, Ending("crashed", "x"), "w").page_reward is None
