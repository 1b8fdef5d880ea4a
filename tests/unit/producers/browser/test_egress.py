"""The egress proxy: what a request head becomes, and, over real local sockets, that it
connects only to judged addresses and refuses the rest before connecting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from producers.browser.browser_pool import proxy_args
from producers.browser.egress import EgressProxy, ProxyRequestError, parse_head
from producers.browser.urlpolicy import UrlPolicy


def test_connect_is_judged_as_an_https_url_of_its_host_and_port() -> None:
    r = parse_head(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    assert (r.method, r.url, r.port, r.head) == ("CONNECT", "https://example.com:443/", 443, b"")
    v6 = parse_head(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n")
    assert (v6.url, v6.port) == ("https://[::1]:8443/", 8443)


def test_a_plain_http_request_goes_upstream_in_origin_form_one_request_per_connection() -> None:
    r = parse_head(b"GET http://site.test:8080/a/b?q=1 HTTP/1.1\r\nHost: site.test:8080\r\n"
                   b"Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\n"
                   b"Keep-Alive: 300\r\nAccept: */*\r\n\r\n")
    assert (r.url, r.port) == ("http://site.test:8080/a/b?q=1", 8080)
    assert r.head == (b"GET /a/b?q=1 HTTP/1.1\r\nHost: site.test:8080\r\nAccept: */*\r\n"
                      b"Connection: close\r\n\r\n")
    ws = parse_head(b"GET http://site.test/ws HTTP/1.1\r\nConnection: Upgrade\r\n"
                    b"Upgrade: websocket\r\n\r\n")
    assert ws.port == 80 and ws.head.endswith(b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")


@pytest.mark.parametrize("head", [
    b"\r\n\r\n", b"GET /relative HTTP/1.1\r\n\r\n", b"CONNECT example.com HTTP/1.1\r\n\r\n",
    b"CONNECT example.com:99999 HTTP/1.1\r\n\r\n", b"GET ftp://x/ HTTP/1.1\r\n\r\n",
    b"GET http://x/ SPDY/3\r\n\r\n", b"\x16\x03\x01garbage\r\n\r\n",
])
def test_heads_it_cannot_forward_are_refused_with_a_reason(head: bytes) -> None:
    with pytest.raises(ProxyRequestError):
        parse_head(head)


def test_chromium_sends_loopback_through_the_proxy_and_bypasses_only_the_allowed() -> None:
    assert proxy_args("http://127.0.0.1:5", ["127.0.0.1:18765"]) == [
        "--proxy-server=http://127.0.0.1:5",
        "--proxy-bypass-list=<-loopback>;127.0.0.1:18765"]


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A local HTTP server that records each request head and answers 200."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1], seen
    server.close()


async def through(proxy: EgressProxy, head: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(head)
    reply = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return reply


async def test_it_connects_to_the_address_it_judged_and_refuses_before_connecting(
        upstream: tuple[int, list[bytes]]) -> None:
    port, seen = upstream
    lookups: list[str] = []

    async def resolve(host: str, _port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]  # names the system cannot resolve: only this answer counts

    policy = UrlPolicy(["*"], [f"allowed.test:{port}"], resolver=resolve)
    proxy = EgressProxy(policy)
    await proxy.start()
    try:
        ok = await through(proxy, f"GET http://allowed.test:{port}/x HTTP/1.1\r\n"
                                  f"Host: allowed.test:{port}\r\n\r\n".encode())
        assert ok.startswith(b"HTTP/1.1 200") and ok.endswith(b"ok")
        assert seen == [f"GET /x HTTP/1.1\r\nHost: allowed.test:{port}\r\n"
                        "Connection: close\r\n\r\n".encode()]
        # A public-looking name that resolves to loopback, and a literal private address:
        # answered 403 with the reason, and nothing reached the server.
        for head in (f"CONNECT evil.test:{port} HTTP/1.1\r\n\r\n",
                     f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n"):
            refused = await through(proxy, head.encode())
            assert refused.startswith(b"HTTP/1.1 403"), refused
        assert b"evil.test resolves to 127.0.0.1, a loopback address" in (await through(
            proxy, f"CONNECT evil.test:{port} HTTP/1.1\r\n\r\n".encode()))
        assert len(seen) == 1 and proxy.refused == 3
        assert (await through(proxy, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400")
    finally:
        await proxy.stop()
