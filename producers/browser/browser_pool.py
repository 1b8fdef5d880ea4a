"""One Chromium per worker process, many contexts; a dead browser is replaced.

The browser is Debian's chromium-headless-shell, never one Playwright downloads. Every
request and WebSocket of every context goes through the URL policy
(producers/browser/urlpolicy.py) and a refused one is aborted before it is sent; and every
connection the browser opens goes through the pool's egress proxy (egress.py), which
applies the same policy to what the routes cannot see (a redirect's next hop, a worker's
WebSocket) and connects only to the addresses it judged. WebRTC's UDP, which no proxy
carries, is turned off (`WEBRTC_ARGS`): no ICE candidate is gathered, no STUN packet sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from playwright.async_api import (
    Browser,
    BrowserContext,
    Playwright,
    Route,
    WebSocketRoute,
    async_playwright,
)
from playwright.async_api import (
    Error as PlaywrightError,
)

from producers.browser.egress import EgressProxy
from producers.browser.urlpolicy import SOCKET_SCHEMES, UrlPolicy
from webgym_common.chromium import SandboxUnavailable, launch_failure, launch_options
from webgym_common.config import BrowserSettings, get_settings

log = logging.getLogger(__name__)

# `--proxy-server` covers TCP only: a page's RTCPeerConnection would send UDP (STUN to any
# address it names, and its host candidates) around the egress proxy and the URL policy.
# With this policy Chromium gathers no UDP candidate at all unless a proxy carries UDP
# (ours does not). The `--force-` switch is the one chromium-headless-shell honours; the
# preference's `--webrtc-ip-handling-policy` is ignored there (tested: STUN still sent).
WEBRTC_ARGS = ["--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]
# No `--no-sandbox`: Chromium runs in its own sandbox unless browser.sandbox says otherwise
# (webgym_common/chromium.py decides, and how).
CHROMIUM_ARGS = [
    "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", *WEBRTC_ARGS,
]


# Requests that carry their content with them and never reach the network.
_LOCAL_SCHEMES = ("data:", "blob:", "about:")
# The close code a page sees on a refused WebSocket (RFC 6455: policy violation).
WS_POLICY_VIOLATION = 1008


def proxy_args(proxy_url: str, private_allowlist: list[str]) -> list[str]:
    """Chromium's flags for the egress proxy: everything through it, loopback too (Chromium
    bypasses loopback by default), except the hosts allowed as they are (the sandbox)."""
    bypass = ";".join(["<-loopback>", *private_allowlist])
    return [f"--proxy-server={proxy_url}", f"--proxy-bypass-list={bypass}"]


class BrowserPool:
    def __init__(
        self, cfg: BrowserSettings, on_browser_lost: Callable[[str], None],
        policy: UrlPolicy | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_browser_lost = on_browser_lost
        # Without one, the policy of these browser settings with the process's sandbox.
        self.policy = policy or UrlPolicy.for_browser(cfg, get_settings().sandbox_url)
        self.egress = EgressProxy(self.policy, connect_timeout_s=cfg.navigation_timeout_s)
        self.playwright: Playwright | None = None
        self.browser: Browser | None = None
        self.version = ""
        self._launch_lock = asyncio.Lock()
        self._orphans: set[asyncio.Task] = set()  # contexts made for a cancelled episode
        self._stopping = False

    async def start(self) -> None:
        if not self.cfg.executable_path.exists():
            raise FileNotFoundError(
                f"no browser at {self.cfg.executable_path}: apt-get install chromium-headless-shell"
            )
        await self.egress.start()  # one port for the pool's life: every relaunch uses it
        self.playwright = await async_playwright().start()
        await self._launch()

    async def _launch(self) -> None:
        assert self.playwright is not None
        try:
            browser = await asyncio.wait_for(
                self.playwright.chromium.launch(
                    **launch_options(self.cfg),
                    args=[*CHROMIUM_ARGS,
                          *proxy_args(self.egress.url, self.policy.private_allowlist)],
                    timeout=self.cfg.navigation_timeout_s * 1000,
                ),
                self.cfg.navigation_timeout_s * 2,
            )
        except PlaywrightError as err:
            if (hint := launch_failure(str(err))) is not None:
                raise SandboxUnavailable(hint) from err
            raise
        browser.on("disconnected", lambda b: self._lost(b))
        self.browser, self.version = browser, browser.version
        log.info("chromium %s launched", self.version)

    def _lost(self, browser: Browser) -> None:
        if self._stopping or browser is not self.browser:
            return
        self.browser = None
        self.on_browser_lost("the browser process died")

    async def restart(self, reason: str) -> None:
        """Replace the browser; every context on it is gone (their episodes crash)."""
        if self._stopping:
            return
        async with self._launch_lock:
            old, self.browser = self.browser, None
            if old is not None:
                self.on_browser_lost(f"browser restarted: {reason}")
                try:
                    await asyncio.wait_for(old.close(), 10)
                except Exception:
                    pass
            await self._launch()

    async def new_context(self) -> BrowserContext:
        async with self._launch_lock:
            if self.browser is None or not self.browser.is_connected():
                await self._launch()
            browser = self.browser
        assert browser is not None
        # Shielded: an episode cancelled while Chromium makes its context (a CancelEpisode
        # during the start) would otherwise leave a context nobody holds, open for good.
        making = asyncio.ensure_future(self._make_context(browser))
        try:
            return await asyncio.shield(making)
        except asyncio.CancelledError:
            making.add_done_callback(self._close_orphan)
            raise

    def _close_orphan(self, making: asyncio.Future[BrowserContext]) -> None:
        if making.cancelled() or making.exception() is not None:
            return
        closing = asyncio.ensure_future(close_quietly(making.result()))
        self._orphans.add(closing)
        closing.add_done_callback(self._orphans.discard)

    async def _make_context(self, browser: Browser) -> BrowserContext:
        context = await asyncio.wait_for(
            browser.new_context(
                viewport={"width": self.cfg.viewport_width, "height": self.cfg.viewport_height},
                accept_downloads=False,
                service_workers="block",
            ),
            self.cfg.navigation_timeout_s,
        )
        try:
            context.set_default_timeout(self.cfg.action_timeout_s * 1000)
            context.set_default_navigation_timeout(self.cfg.navigation_timeout_s * 1000)
            # Every request, not only navigations: an <img>, a fetch() or a WebSocket can
            # reach a metadata or private address too. WebSockets go through a shim
            # Playwright puts in each page (CDP's request interception never sees their
            # handshake).
            await context.route("**/*", self._police)
            await context.route_web_socket(lambda url: True, self._police_socket)
        except BaseException:
            await close_quietly(context)
            raise
        return context

    async def _police(self, route: Route) -> None:
        request = route.request
        reason = None
        if not request.url.startswith(_LOCAL_SCHEMES):
            reason = await self.policy.refusal(request.url)
        if reason is None:
            await route.continue_()
            return
        # A refused navigation is also reported by the action that made it (its error).
        log.log(logging.INFO if request.is_navigation_request() else logging.DEBUG,
                "refused %s: %s", request.url, reason)
        await route.abort("blockedbyclient")

    async def _police_socket(self, ws: WebSocketRoute) -> None:
        reason = await self.policy.refusal(ws.url, SOCKET_SCHEMES)
        if reason is None:
            ws.connect_to_server()  # messages then flow both ways untouched
            return
        log.debug("refused WebSocket %s: %s", ws.url, reason)
        await ws.close(code=WS_POLICY_VIOLATION, reason="refused by the URL policy")

    async def open_contexts(self) -> int | None:
        """Chromium's own count of open browser contexts (CDP Target.getBrowserContexts, the
        default context not counted); None without a browser or when it does not answer."""
        browser = self.browser
        if browser is None or not browser.is_connected():
            return None
        try:
            cdp = await asyncio.wait_for(browser.new_browser_cdp_session(), 5)
            try:
                found = await asyncio.wait_for(cdp.send("Target.getBrowserContexts"), 5)
            finally:
                await asyncio.wait_for(cdp.detach(), 5)
        except Exception:
            return None
        return len(found.get("browserContextIds", []))

    def stopping(self) -> None:
        """From now on a lost or stuck browser is not replaced: the worker is shutting down."""
        self._stopping = True

    async def stop(self) -> None:
        self._stopping = True
        if self.browser is not None:
            try:
                await asyncio.wait_for(self.browser.close(), 10)
            except Exception:
                pass
        if self.playwright is not None:
            await self.playwright.stop()
        await self.egress.stop()


async def close_quietly(context: BrowserContext | None, timeout_s: float = 5.0) -> bool:
    """Close a context; False when it would not close in time (then the browser must go)."""
    if context is None:
        return True
    try:
        await asyncio.wait_for(context.close(), timeout_s)
        return True
    except Exception:
        return False
