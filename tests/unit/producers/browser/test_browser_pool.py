"""The browser pool's request and WebSocket routes apply the URL policy (browser_pool.py).

Fake routes stand in for Playwright's: nothing is sent anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from playwright.async_api import Error as PlaywrightError

from producers.browser.browser_pool import WS_POLICY_VIOLATION, BrowserPool
from producers.browser.urlpolicy import UrlPolicy
from webgym_common.chromium import SandboxUnavailable
from webgym_common.config import BrowserSettings

SANDBOX = "http://127.0.0.1:18765"


async def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"no lookup expected, asked for {host}")


def pool() -> BrowserPool:
    cfg = BrowserSettings()
    policy = UrlPolicy(cfg.url_allowlist, [SANDBOX.removeprefix("http://")], resolver=no_dns)
    return BrowserPool(cfg, lambda reason: None, policy)


@dataclass
class FakeRequest:
    url: str
    navigation: bool = False

    def is_navigation_request(self) -> bool:
        return self.navigation


@dataclass
class FakeRoute:
    request: FakeRequest
    calls: list[str] = field(default_factory=list)

    async def continue_(self) -> None:
        self.calls.append("continue")

    async def abort(self, error_code: str) -> None:
        self.calls.append(f"abort {error_code}")


@dataclass
class FakeSocketRoute:
    url: str
    calls: list[str] = field(default_factory=list)

    def connect_to_server(self) -> None:
        self.calls.append("connect")

    async def close(self, *, code: int | None = None, reason: str | None = None) -> None:
        self.calls.append(f"close {code} {reason}")


async def police(p: BrowserPool, url: str, navigation: bool = False) -> list[str]:
    route = FakeRoute(FakeRequest(url, navigation))
    await p._police(route)  # type: ignore[arg-type]
    return route.calls


async def test_requests_to_the_sandbox_and_local_schemes_continue() -> None:
    p = pool()
    assert await police(p, f"{SANDBOX}/shop/img.png") == ["continue"]
    assert await police(p, "data:image/png;base64,AAAA") == ["continue"]
    assert await police(p, "blob:http://127.0.0.1:18765/5a1e") == ["continue"]
    assert p.policy.refused == 0


async def test_refused_requests_are_aborted_before_they_are_sent() -> None:
    p = pool()
    assert await police(p, "http://127.0.0.1:18766/") == ["abort blockedbyclient"]
    assert await police(p, "http://169.254.169.254/latest/", navigation=True) == [
        "abort blockedbyclient"]
    assert await police(p, "http://[::ffff:10.0.0.1]/x.js") == ["abort blockedbyclient"]
    assert await police(p, "file:///etc/passwd") == ["abort blockedbyclient"]
    assert p.policy.refused == 4


async def test_websockets_are_policed_too() -> None:
    p = pool()
    allowed = FakeSocketRoute("ws://127.0.0.1:18765/security/echo")
    await p._police_socket(allowed)  # type: ignore[arg-type]
    assert allowed.calls == ["connect"]
    refused = FakeSocketRoute("ws://127.0.0.2:18765/")
    await p._police_socket(refused)  # type: ignore[arg-type]
    assert refused.calls == [f"close {WS_POLICY_VIOLATION} refused by the URL policy"]
    assert list(p.policy.refusals) == [("ws://127.0.0.2:18765/",
                                        "127.0.0.2 is a loopback address")]


@dataclass
class FailingChromium:
    message: str

    async def launch(self, **_: object) -> None:
        raise PlaywrightError(self.message)


@dataclass
class FakePlaywright:
    chromium: FailingChromium


async def test_a_browser_that_finds_no_sandbox_says_how_to_get_one() -> None:
    p = pool()
    p.playwright = FakePlaywright(FailingChromium(  # type: ignore[assignment]
        "Browser closed.\n[FATAL:zygote_host_impl_linux.cc] No usable sandbox! If you are "
        "running on Ubuntu 23.10+ ..."))
    with pytest.raises(SandboxUnavailable, match="WEBGYM_BROWSER__SANDBOX=false"):
        await p._launch()
    p.playwright = FakePlaywright(FailingChromium("Browser closed: other"))  # type: ignore[assignment]
    with pytest.raises(PlaywrightError, match="other"):
        await p._launch()
