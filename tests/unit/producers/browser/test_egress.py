"""The egress proxy: what a request head becomes, and, over real local sockets, that it
connects only to judged addresses and refuses the rest before connecting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from producers.browser.browser_pool import proxy_args
from producers.browser.egress import (
    CHUNKED,
    EgressProxy,
    ProxyRequestError,
    parse_head,
    response_head,
)
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


@pytest.fixture
async def keep_alive_upstream() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A local HTTP server that ignores `Connection: close`: it answers every request head
    it reads on a connection (each body read by its Content-Length) and keeps the
    connection open, as a server that pools connections would."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                               if h.lower().startswith(b"content-length:")), 0)
                seen.append(head + await reader.readexactly(length))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive"
                             b"\r\nKeep-Alive: timeout=300\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1], seen
    server.close()


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                  if h.lower().startswith(b"content-length:"))
    return head, await asyncio.wait_for(reader.readexactly(length), 10)


@pytest.fixture
async def allowing_proxy(keep_alive_upstream: tuple[int, list[bytes]]
                         ) -> AsyncIterator[EgressProxy]:
    port, _ = keep_alive_upstream

    async def resolve(_host: str, _port: int) -> list[str]:
        return ["127.0.0.1"]

    proxy = EgressProxy(UrlPolicy(["*"], [f"allowed.test:{port}"], resolver=resolve))
    await proxy.start()
    yield proxy
    await proxy.stop()


@pytest.mark.parametrize("second", ["http://127.0.0.1:{port}/second",  # refused outright
                                    "http://allowed.test:{port}/second"])  # allowed, but unjudged
async def test_a_second_request_on_one_connection_never_reaches_a_server_that_keeps_it_open(
        allowing_proxy: EgressProxy, keep_alive_upstream: tuple[int, list[bytes]],
        second: str) -> None:
    port, seen = keep_alive_upstream
    reader, writer = await asyncio.open_connection("127.0.0.1", allowing_proxy.port)
    try:
        writer.write(f"GET http://allowed.test:{port}/first HTTP/1.1\r\n"
                     f"Host: allowed.test:{port}\r\nProxy-Connection: keep-alive\r\n\r\n".encode())
        head, body = await read_response(reader)
        assert head.startswith(b"HTTP/1.1 200") and body == b"ok"
        # The client is told the connection ends, whatever the server said ...
        assert b"\r\nConnection: close\r\n" in head and b"keep-alive" not in head.lower()
        # ... and a client that sends a second request anyway is cut off, unforwarded.
        target = second.format(port=port)
        writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert await asyncio.wait_for(reader.read(), 10) == b""
    finally:
        writer.close()
    await asyncio.sleep(0.1)  # (anything forwarded would have arrived by now)
    assert [h.split(b"\r\n")[0] for h in seen] == [b"GET /first HTTP/1.1"]


async def test_a_request_body_goes_upstream_by_its_own_framing_and_nothing_past_it(
        allowing_proxy: EgressProxy, keep_alive_upstream: tuple[int, list[bytes]]) -> None:
    port, seen = keep_alive_upstream
    reader, writer = await asyncio.open_connection("127.0.0.1", allowing_proxy.port)
    try:  # the body, then a smuggled request in the same write
        writer.write(f"POST http://allowed.test:{port}/form HTTP/1.1\r\nContent-Length: 5\r\n"
                     f"\r\nhello"
                     f"GET http://127.0.0.1:{port}/smuggled HTTP/1.1\r\n\r\n".encode())
        head, body = await read_response(reader)
        assert head.startswith(b"HTTP/1.1 200") and body == b"ok"
        assert await asyncio.wait_for(reader.read(), 10) == b""
    finally:
        writer.close()
    await asyncio.sleep(0.1)
    assert seen == [b"POST /form HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
                    b"hello"]


def test_a_chunked_body_is_framed_by_its_chunks_and_ambiguous_framing_refused() -> None:
    chunked = parse_head(b"POST http://x/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert chunked.body_length == CHUNKED
    assert parse_head(b"POST http://x/ HTTP/1.1\r\nContent-Length: 7\r\n\r\n").body_length == 7
    assert parse_head(b"GET http://x/ HTTP/1.1\r\n\r\n").body_length == 0
    for headers in (b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
                    b"Transfer-Encoding: gzip, chunked\r\n",
                    b"Content-Length: 3\r\nContent-Length: 4\r\n", b"Content-Length: -1\r\n"):
        with pytest.raises(ProxyRequestError):
            parse_head(b"POST http://x/ HTTP/1.1\r\n" + headers + b"\r\n")


async def test_a_chunked_body_is_forwarded_whole_with_its_trailers(
        allowing_proxy: EgressProxy) -> None:
    got: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n") + await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        got.append(request + await reader.read())  # and nothing more, until the proxy closes
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = EgressProxy(UrlPolicy(["*"], [f"chunked.test:{port}"],
                                  resolver=lambda _h, _p: _loopback()))
    await proxy.start()
    try:
        body = b"5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"
        reply = await through(proxy, f"POST http://chunked.test:{port}/ HTTP/1.1\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n".encode() + body
                              + b"GET /next HTTP/1.1\r\n\r\n")
        assert reply.endswith(b"ok")
        await asyncio.sleep(0.1)
        assert got == [b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close"
                       b"\r\n\r\n" + body]
    finally:
        await proxy.stop()
        server.close()


async def _loopback() -> list[str]:
    return ["127.0.0.1"]


def test_the_response_head_says_the_connection_closes_except_on_an_upgrade() -> None:
    status, head = response_head(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n"
                                 b"Keep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n")
    assert (status, head) == (200, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                   b"Connection: close\r\n\r\n")
    upgrade = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n"
    assert response_head(upgrade) == (101, upgrade)
    with pytest.raises(ProxyRequestError):
        response_head(b"SSH-2.0-OpenSSH\r\n\r\n")
