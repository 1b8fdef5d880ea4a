"""The browser's URL policy in real Chromium: every request and WebSocket of a page, and a
worker's navigations; and WebRTC, whose UDP no proxy carries, off.

No request of these tests may reach a private or public address. The refused targets are
127.0.0.2:<a port nothing listens on> and the sandbox itself under another name
(`localhost:<its port>`), which counts what arrives (environments/security_pages.py): a
count of 0 proves the request was refused before it was sent, not sent and failed.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from playwright.async_api import Error as PlaywrightError

from harness.hand_fed import HandFedEpisode
from harness.launch import BrowserWorkerProcess
from infra.procs import free_port
from producers.browser import browser_pool
from producers.browser.browser_pool import WEBRTC_ARGS, WS_POLICY_VIOLATION, BrowserPool
from producers.browser.urlpolicy import UrlPolicy
from tests.support.sandbox import serving_sandbox
from webgym_common.choices import Driver
from webgym_common.config import BrowserSettings, Settings
from webgym_common.stream.bus import EventProducer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

CLOSED_BY_POLICY = f"closed {WS_POLICY_VIOLATION}"


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def sandbox_url() -> AsyncIterator[str]:
    async with serving_sandbox() as url:
        yield url


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def pool(sandbox_url: str) -> AsyncIterator[BrowserPool]:
    cfg = BrowserSettings(navigation_timeout_s=10, action_timeout_s=5)
    p = BrowserPool(cfg, lambda reason: None, UrlPolicy.for_browser(cfg, sandbox_url))
    if not cfg.executable_path.exists():
        pytest.skip(f"no Chromium at {cfg.executable_path}")
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


async def arrived(sandbox_url: str, run: str) -> dict[str, int]:
    """What reached the sandbox under another name during `run`, by `via`."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        async with http.get(f"{sandbox_url}/security/hits", params={"run": run}) as r:
            return dict(json.loads(await r.text()))


async def test_every_request_and_websocket_of_a_page_goes_through_the_policy(
    pool: BrowserPool, sandbox_url: str
) -> None:
    run, port = uuid.uuid4().hex[:8], free_port()
    refused_before = pool.policy.refused
    context = await pool.new_context()
    try:
        page = await asyncio.wait_for(context.new_page(), 10)
        await page.goto(f"{sandbox_url}/security/probe?run={run}&port={port}", timeout=10_000)
        await page.wait_for_function("window.probesDone === true", timeout=60_000)
        probes = await page.evaluate("window.probes")
    finally:
        await asyncio.wait_for(context.close(), 10)

    # The page itself works: its own image, fetch and WebSocket (echoed both ways).
    assert probes["img_allowed"] == "ok"
    assert probes["fetch_allowed"] == "ok"
    assert probes["ws_allowed"] == "echo ping"
    # Everything aimed elsewhere failed...
    for name in ("img_refused", "script_refused", "fetch_refused", "fetch_other_name"):
        assert probes[name] == "error", (name, probes)
    # ... WebSockets closed by the policy (a failed connection would say 1006) ...
    assert probes["ws_refused"] == CLOSED_BY_POLICY
    assert probes["ws_other_name"] == CLOSED_BY_POLICY
    assert probes["ws_iframe"] == CLOSED_BY_POLICY  # a fresh iframe's WebSocket class too
    assert probes["worker"]["fetch"] == "error"  # a dedicated worker's requests are routed
    # ... a redirect's next hop and a worker's WebSocket, which the routes never see, fail
    # at the egress proxy ...
    assert probes["img_redirected"] == "error"
    assert probes["worker"]["ws"] == "closed 1006"  # (a worker's socket is not the shim's)
    # ... and nothing reached the sandbox under its other name: refused before being sent.
    assert await arrived(sandbox_url, run) == {"allowed": 1}
    refusals = dict(list(pool.policy.refusals))
    assert refusals[f"http://127.0.0.2:{port}/x"] == "127.0.0.2 is a loopback address"
    assert refusals[f"ws://127.0.0.2:{port}/"] == "127.0.0.2 is a loopback address"
    assert refusals[f"http://localhost:{sandbox_url.rsplit(':', 1)[1]}/security/hit"
                    f"?run={run}&via=img"] == "localhost resolves to 127.0.0.1, a loopback address"
    assert pool.policy.refused - refused_before >= 7


async def test_a_refused_navigation_is_aborted_before_it_is_sent(
    pool: BrowserPool, sandbox_url: str
) -> None:
    run, port = uuid.uuid4().hex[:8], free_port()
    sandbox_port = sandbox_url.rsplit(":", 1)[1]
    other_name = f"http://localhost:{sandbox_port}/security/hit?run={run}"
    context = await pool.new_context()
    try:
        page = await asyncio.wait_for(context.new_page(), 10)
        for url in (f"http://127.0.0.2:{port}/", f"{other_name}&via=visit"):
            with pytest.raises(PlaywrightError, match="ERR_BLOCKED_BY_CLIENT"):
                await page.goto(url, timeout=10_000)
        fresh = await asyncio.wait_for(context.new_page(), 10)  # (page shows an error page)
        await fresh.goto(f"{sandbox_url}/wiki/", timeout=10_000)  # the context still works
    finally:
        await asyncio.wait_for(context.close(), 10)
    assert await arrived(sandbox_url, run) == {}


async def test_a_worker_reports_a_refused_visit_and_goes_on(
    settings: Settings, producer: EventProducer, tmp_path
) -> None:
    port = free_port()
    worker = BrowserWorkerProcess(settings, 1, tmp_path / "worker.log")
    try:
        async with asyncio.timeout(60):
            while not worker.owns_partitions():  # noqa: ASYNC110 (a ready file)
                await asyncio.sleep(0.2)
        async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/wiki/",
                                  driver=Driver.EXTERNAL) as ep:
            first = await ep.start()
            for target in (f"http://127.0.0.2:{port}/", "http://169.254.169.254/latest/"):
                obs = await ep.act(f"Visit [{target}]")
                assert obs.error and ("refused" in obs.error
                                      or "ERR_BLOCKED_BY_CLIENT" in obs.error), obs.error
                assert obs.url == first.url
            obs = await ep.act(f"Visit [{settings.sandbox_url}/shop/]")
            assert obs.error is None and obs.url.endswith("/shop/")
            await ep.send_only("ANSWER [done]")
            assert (await ep.completed()).termination == "answer"
    finally:
        worker.stop()


async def test_a_policy_driven_episode_never_visits(
    settings: Settings, producer: EventProducer, tmp_path
) -> None:
    """A Visit in a policy's episode (a reply the parser would refuse, here put on the actions
    topic as it is) is refused by the worker, even to an address the URL policy allows: the
    page stays, nothing is requested, the episode goes on."""
    run = uuid.uuid4().hex[:8]
    worker = BrowserWorkerProcess(settings, 1, tmp_path / "worker.log")
    try:
        async with asyncio.timeout(60):
            while not worker.owns_partitions():  # noqa: ASYNC110 (a ready file)
                await asyncio.sleep(0.2)
        async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/wiki/") as ep:
            assert ep.request.driver == Driver.POLICY
            first = await ep.start()
            allowed = f"{settings.sandbox_url}/security/hit?run={run}&via=visit"
            obs = await ep.act(f"Visit [{allowed}]")
            assert obs.error and "refused to run Visit" in obs.error, obs.error
            assert obs.url == first.url and not obs.terminal
            assert await arrived(settings.sandbox_url, run) == {}
            await ep.send_only("ANSWER [stayed]")
            done = await ep.completed()
            assert done.termination == "answer" and done.final_url == first.url
    finally:
        worker.stop()


# -- WebRTC: UDP goes around every proxy, so none may go at all (issue 34) --------------------


class UdpListener(asyncio.DatagramProtocol):
    """A STUN server's port on loopback that only counts what arrives."""

    def __init__(self) -> None:
        self.received: list[tuple[object, bytes]] = []

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.received.append((addr, data))


@asynccontextmanager
async def udp_listener() -> AsyncIterator[tuple[int, UdpListener]]:
    transport, listener = await asyncio.get_running_loop().create_datagram_endpoint(
        UdpListener, local_addr=("127.0.0.1", 0))
    try:
        yield transport.get_extra_info("sockname")[1], listener
    finally:
        transport.close()


async def webrtc_probe(pool: BrowserPool, sandbox_url: str, port: int) -> dict[str, Any]:
    """What /security/webrtc gathered with its STUN server at 127.0.0.1:`port`."""
    context = await pool.new_context()
    try:
        page = await asyncio.wait_for(context.new_page(), 10)
        await page.goto(f"{sandbox_url}/security/webrtc?port={port}", timeout=10_000)
        await page.wait_for_function("window.webrtcDone === true", timeout=30_000)
        return dict(await page.evaluate("window.webrtc"))
    finally:
        await asyncio.wait_for(context.close(), 10)


def candidate_lines(probe: dict[str, Any]) -> list[str]:
    """Every ICE candidate the page learnt, from the events and from its SDP."""
    in_sdp = [ln for ln in probe["sdp"].splitlines() if ln.startswith("a=candidate")]
    return [*probe["candidates"], *in_sdp]


async def test_webrtc_gathers_no_candidate_and_sends_no_udp(
    pool: BrowserPool, sandbox_url: str
) -> None:
    async with udp_listener() as (port, stun):
        probe = await webrtc_probe(pool, sandbox_url, port)
        await asyncio.sleep(1)  # a late binding request would have come by now
    assert probe["error"] is None and probe["state"] == "complete", probe
    assert candidate_lines(probe) == []  # no host, srflx or relay candidate: no address
    assert stun.received == []  # no STUN request: nothing went around the proxy


async def test_without_the_webrtc_policy_the_same_page_sends_udp_around_the_proxy(
    sandbox_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the flag, not the probe, is what stops it."""
    monkeypatch.setattr(browser_pool, "CHROMIUM_ARGS",
                        [a for a in browser_pool.CHROMIUM_ARGS if a not in WEBRTC_ARGS])
    cfg = BrowserSettings(navigation_timeout_s=10, action_timeout_s=5)
    bare = BrowserPool(cfg, lambda reason: None, UrlPolicy.for_browser(cfg, sandbox_url))
    await bare.start()
    try:
        async with udp_listener() as (port, stun):
            probe = await webrtc_probe(bare, sandbox_url, port)
            await asyncio.sleep(1)
    finally:
        await bare.stop()
    assert any(" typ host " in line for line in candidate_lines(probe)), probe
    assert stun.received, probe  # binding requests reached 127.0.0.1, past the egress proxy
