"""How an episode ends, decided from what stopped it (pure decisions).

Every episode that is not taken away from this worker ends with exactly one
EpisodeCompleted; whatever went wrong is in its termination and reason. The reason
names the part that failed, so a Kafka or MinIO outage is never read as a bad page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from playwright.async_api import Error as PlaywrightError

from producers.browser.retries import EventTooLarge, PublishFailed, UploadFailed, describe
from producers.browser.session import EpisodeAborted, EpisodeSession
from producers.browser.urlpolicy import UrlRefused
from webgym_common.events import EpisodeCompleted
from webgym_common.pagetext import CAPS, cut, cut_or_none


@dataclass(frozen=True)
class Ending:
    termination: str
    reason: str | None = None
    answer: str | None = None
    # The page may be hung: close it first, so that closing its context does not hang too.
    page_suspect: bool = False
    # A self-scoring page's raw reward, read as the episode ended (page_env.py).
    page_reward: float | None = None


def ending_for(err: Exception, page_crash: str | None = None) -> Ending:
    """The ending of an episode stopped by `err`; `page_crash` is what the page reported."""
    if isinstance(err, EpisodeAborted):
        return Ending(err.termination, err.reason)
    if isinstance(err, UrlRefused):
        return Ending("crashed", f"start URL refused: {err}")
    if isinstance(err, EventTooLarge):
        return Ending("crashed", f"event too large for Kafka: {err}")
    if isinstance(err, PublishFailed):
        return Ending("crashed", f"Kafka publish failed: {err}")
    if isinstance(err, UploadFailed):
        return Ending("crashed", f"screenshot upload failed: {err}")
    if isinstance(err, TimeoutError | PlaywrightError):
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return Ending("crashed", page_crash or f"page did not answer: {first}", page_suspect=True)
    return Ending("crashed", f"worker error: {describe(err)}")



def completion_event(session: EpisodeSession, ending: Ending, worker_id: str) -> EpisodeCompleted:
    req = session.request
    return EpisodeCompleted(
        episode_id=session.episode_id, task_id=req.task.task_id, iteration=req.iteration,
        split=req.split, steps=session.step, termination=ending.termination,
        answer=cut_or_none(ending.answer, CAPS.answer),
        reason=cut_or_none(ending.reason, CAPS.reason),
        final_url=cut(session.page.url, CAPS.url) if session.page else None,
        started_at=datetime.fromtimestamp(session.started_at, UTC), worker_id=worker_id,
        page_reward=ending.page_reward,
    )
