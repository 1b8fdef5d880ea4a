"""One episode in one browser context: its page, what it has seen, and its inbox of actions."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from playwright.async_api import BrowserContext, CDPSession, Dialog, Download, Page, Response

from webgym_common.events import ActionChosen, EpisodeRequested, Mark


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
    last_status: int | None = None
    nav_requests: int = 0
    # Set when every main-frame navigation requested so far has committed.
    nav_committed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def episode_id(self) -> str:
        return self.request.episode_id

    @property
    def attached(self) -> tuple[Page, CDPSession]:
        """The page followed and its CDP session; `attach` sets them before step 0."""
        if self.page is None or self.cdp is None:
            raise RuntimeError(f"episode {self.episode_id} has no page yet")
        return self.page, self.cdp

    def abort(self, termination: str, reason: str) -> None:
        self.inbox.put_nowait(EpisodeAborted(termination, reason))

    async def attach(self, context: BrowserContext, page: Page) -> None:
        """Follow `page` (the first page, or a popup the site opened)."""
        self.context, self.page = context, page
        self.cdp = await context.new_cdp_session(page)
        page.on("crash", lambda _: self._crash("renderer crashed"))
        page.on("dialog", self._on_dialog)
        page.on("download", self._on_download)
        page.on("request", self._on_request)
        page.on("framenavigated", self._on_navigated)
        page.on("response", self._on_response)

    def _crash(self, reason: str) -> None:
        self.crashed = reason
        self.abort("crashed", reason)

    async def _on_dialog(self, dialog: Dialog) -> None:
        self.notes.append(f"a {dialog.type} dialog said {dialog.message!r} and was accepted")
        try:
            await dialog.accept()
        except Exception:  # the page may already be gone
            pass

    def _on_download(self, download: Download) -> None:
        self.notes.append(f"a download of {download.suggested_filename!r} was refused")

    def _on_request(self, request) -> None:  # noqa: ANN001
        if request.is_navigation_request() and self.page and request.frame == self.page.main_frame:
            self.nav_requests += 1
            self.nav_committed.clear()

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
