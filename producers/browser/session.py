"""One episode in one browser context: its page, what it has seen, and its inbox of actions.

An episode is stopped from outside (a CancelEpisode, a crashed page or browser) with
`stop()`: the first stop decides how it ends, and it interrupts whatever the episode is
doing (opening, acting, observing), not only its wait for the next action.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from playwright.async_api import BrowserContext, CDPSession, Dialog, Download, Page, Response

from webgym_common.events import ActionChosen, EpisodeRequested, Mark, StepObserved
from webgym_common.pagetext import CAPS, cut
from webgym_common.timings import Timings

# Sent with every request of an episode's context, so a site (the sandbox) can tell which
# episode made it, and whether the step is a rerun of one a previous owner already ran.
# X-WebGym-Step is an idempotency key, "<request event id>:<step>" (the request's event id,
# not the episode id: ids are deterministic and another run may reuse one): the one action a
# killed owner may have executed without publishing what followed is executed again by the
# next owner under the same key, so a site that honours it applies the effect once.
EPISODE_HEADER = "X-WebGym-Episode"
RERUN_HEADER = "X-WebGym-Rerun"
STEP_HEADER = "X-WebGym-Step"


def episode_headers(episode_id: str, rerun: bool = False,
                    step_key: str | None = None) -> dict[str, str]:
    headers = {EPISODE_HEADER: episode_id}
    if step_key is not None:
        headers[STEP_HEADER] = step_key
    if rerun:
        headers[RERUN_HEADER] = "1"
    return headers


def is_rerun(step: int, actions_at: Collection[int]) -> bool:
    """Executing the action of `step` reruns it when an action of a later step exists.

    That later action answers an observation some owner published after executing this
    step, so the step ran before (a resumed episode catching up from the log).
    """
    return any(s > step for s in actions_at)


def keep_action(item: ActionChosen | EpisodeAborted, step: int,
                pending: dict[int, ActionChosen]) -> None:
    """File an inbox item while at `step`: a stop is raised; of the actions chosen for a
    step the first is kept (the log's order: a policy may answer a re-run observation
    again); actions of steps already done are reruns, dropped."""
    if isinstance(item, EpisodeAborted):
        raise item
    if item.step >= step:
        pending.setdefault(item.step, item)


class EpisodeAborted(Exception):
    """The episode must stop now; `termination` and `reason` say how it ends."""

    def __init__(self, termination: str, reason: str) -> None:
        super().__init__(reason)
        self.termination = termination
        self.reason = reason


@dataclass
class EpisodeSession:
    request: EpisodeRequested
    partition: int
    started_at: float = field(default_factory=time.time)
    context: BrowserContext | None = None
    page: Page | None = None
    cdp: CDPSession | None = None
    step: int = 0  # the step of the last observation published
    marks: dict[int, Mark] = field(default_factory=dict)
    inbox: asyncio.Queue[ActionChosen | EpisodeAborted] = field(default_factory=asyncio.Queue)
    # Page events since the last observation, reported as the action's effect.
    notes: list[str] = field(default_factory=list)
    crashed: str | None = None
    # How the episode was stopped from outside (termination, reason); the first stop wins.
    stopped: tuple[str, str] | None = None
    # Cancels what the episode is doing; set by the runner while the episode plays.
    interrupt: Callable[[], object] | None = None
    # Work started by page events (attaching a pop-up); cancelled when the episode ends.
    background: set[asyncio.Task] = field(default_factory=set)
    labelled: tuple[int, bool] | None = None  # (step, rerun) the requests' headers carry
    last_status: int | None = None
    nav_requests: int = 0
    # Set when every main-frame navigation requested so far has committed.
    nav_committed: asyncio.Event = field(default_factory=asyncio.Event)
    # Requests of the followed page (any frame) sent and not yet finished or failed.
    requests_in_flight: int = 0
    network_idle: asyncio.Event = field(default_factory=asyncio.Event)
    # The phases of the step under way, published with its observation (StepObserved.
    # timings_ms), and when the last observation's publish started (perf_counter).
    timings: Timings = field(default_factory=Timings)
    published_at: float | None = None
    last_observation: StepObserved | None = None  # what a resend publishes again

    @property
    def episode_id(self) -> str:
        return self.request.episode_id

    @property
    def attached(self) -> tuple[Page, CDPSession]:
        """The page followed and its CDP session; `attach` sets them before step 0."""
        if self.page is None or self.cdp is None:
            raise RuntimeError(f"episode {self.episode_id} has no page yet")
        return self.page, self.cdp

    def stop(self, termination: str, reason: str) -> None:
        """End the episode as `termination`, now: interrupt it wherever it is."""
        if self.stopped is not None:
            return
        self.stopped = (termination, reason)
        self.inbox.put_nowait(EpisodeAborted(termination, reason))
        if self.interrupt is not None:
            self.interrupt()

    def in_background(self, task: asyncio.Task) -> None:
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def attach(self, context: BrowserContext, page: Page, timeout_s: float = 10.0) -> None:
        """Follow `page` (the first page, or a popup the site opened)."""
        cdp = await asyncio.wait_for(context.new_cdp_session(page), timeout_s)
        self.context, self.page, self.cdp = context, page, cdp
        page.on("crash", lambda _: self._crash("renderer crashed"))
        page.on("dialog", self._on_dialog)
        page.on("download", self._on_download)
        page.on("request", self._on_request)
        page.on("requestfinished", self._on_request_done)
        page.on("requestfailed", self._on_request_done)
        page.on("framenavigated", self._on_navigated)
        page.on("response", self._on_response)

    def _crash(self, reason: str) -> None:
        self.crashed = reason
        self.stop("crashed", reason)

    async def _on_dialog(self, dialog: Dialog) -> None:
        said = cut(dialog.message, CAPS.note)
        self.notes.append(f"a {dialog.type} dialog said {said!r} and was accepted")
        try:
            await asyncio.wait_for(dialog.accept(), 5)
        except Exception:  # the page may already be gone
            pass

    def _on_download(self, download: Download) -> None:
        name = cut(download.suggested_filename, CAPS.note)
        self.notes.append(f"a download of {name!r} was refused")

    def _on_request(self, request) -> None:  # noqa: ANN001
        self.requests_in_flight += 1
        self.network_idle.clear()
        if request.is_navigation_request() and self.page and request.frame == self.page.main_frame:
            self.nav_requests += 1
            self.nav_committed.clear()

    def _on_request_done(self, request) -> None:  # noqa: ANN001
        self.requests_in_flight = max(0, self.requests_in_flight - 1)
        if self.requests_in_flight == 0:
            self.network_idle.set()

    def _on_navigated(self, frame) -> None:  # noqa: ANN001
        if self.page and frame == self.page.main_frame:
            self.nav_committed.set()

    def _on_response(self, response: Response) -> None:
        req = response.request
        if req.is_navigation_request() and self.page and req.frame == self.page.main_frame:
            self.last_status = response.status

    def take_notes(self) -> str | None:
        notes, self.notes = self.notes, []
        return "; ".join(notes) or None
