"""The browser's egress proxy: Chromium connects to nothing but through it, and it connects
only to addresses the URL policy judged.

Delivery semantics: none (no events); a refused connection is never opened.

Why a proxy as well as the page routes of browser_pool: Playwright's routes never see a
redirect's next hop, a dedicated worker's WebSocket bypasses `route_web_socket`, and
Chromium resolves a name again when it connects, so a DNS server that answers differently
the second time (DNS rebinding) could reach a private address. The proxy sees every
connection the browser makes (the sandbox, allowed as it is, excepted: Chromium's bypass
list), resolves the name itself, judges every address (producers.browser.urlpolicy) and
connects to one of those addresses, never to what another lookup would say. A refused
connection is answered `403` with the reason, so Chromium fails the request
(ERR_TUNNEL_CONNECTION_FAILED for https and WebSockets, a 403 for plain http).

HTTP/1.1 forward proxying only: CONNECT host:port (https, and WebSockets, which Chromium
tunnels), and absolute-form requests for plain http, forwarded with `Connection: close` so
that one client connection carries one request and its host is judged each time. Bounded:
at most `max_connections` at once, the request head within `head_timeout_s` and 16 KiB,
connecting within `connect_timeout_s`, a connection idle for `idle_timeout_s` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from producers.browser.urlpolicy import UrlPolicy, UrlRefused

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
_HOP_BY_HOP = ("proxy-connection:", "proxy-authorization:", "connection:", "keep-alive:")


class ProxyRequestError(ValueError):
    """A request head the proxy cannot forward (answered 400)."""


@dataclass(frozen=True)
class ProxyRequest:
    method: str
    url: str  # what the policy judges
    port: int
    head: bytes  # plain http: the head to send upstream; CONNECT: nothing


def parse_head(raw: bytes) -> ProxyRequest:
    """A client's request head (up to and including the blank line) as what to judge and send."""
    lines = [line for line in raw.decode("latin-1").split("\r\n") if line]
    if not lines:
        raise ProxyRequestError("an empty request")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ProxyRequestError(f"not an HTTP/1 request line: {lines[0][:100]!r}")
    method, target, version = parts
    if method == "CONNECT":
        # host:port, [v6]:port; no scheme or path
        split = urlsplit(f"//{target}")
        try:
            port = split.port
        except ValueError:
            port = None
        if not split.hostname or port is None or "/" in target:
            raise ProxyRequestError(f"CONNECT needs host:port, not {target[:100]!r}")
        return ProxyRequest(method, f"https://{target}/", port, b"")
    split = urlsplit(target)
    if split.scheme != "http" or not split.hostname:
        raise ProxyRequestError(f"not an absolute http URL: {target[:100]!r}")
    try:
        port = split.port or 80
    except ValueError as err:
        raise ProxyRequestError(f"a bad port in {target[:100]!r}") from err
    path = (split.path or "/") + (f"?{split.query}" if split.query else "")
    headers = [h for h in lines[1:] if not h.lower().startswith(_HOP_BY_HOP)]
    upgrade = any(h.lower().startswith("upgrade:") for h in headers)
    headers.append("Connection: Upgrade" if upgrade else "Connection: close")
    head = "\r\n".join([f"{method} {path} {version}", *headers]) + "\r\n\r\n"
    return ProxyRequest(method, target, port, head.encode("latin-1"))


def status_reply(code: int, reason: str, why: str) -> bytes:
    body = f"{code} {reason}: {why}\n".encode()
    safe = why.encode("ascii", "replace").decode().replace("\r", " ").replace("\n", " ")
    return (f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nX-WebGym-Refused: {safe[:300]}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


class EgressProxy:
    def __init__(self, policy: UrlPolicy, host: str = "127.0.0.1", *,
                 max_connections: int = 256, head_timeout_s: float = 10.0,
                 connect_timeout_s: float = 10.0, idle_timeout_s: float = 300.0) -> None:
        self.policy, self.host = policy, host
        self.slots = asyncio.Semaphore(max_connections)
        self.head_timeout_s, self.connect_timeout_s = head_timeout_s, connect_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.server: asyncio.Server | None = None
        self.port = 0
        self.refused = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, 0, limit=MAX_HEAD_BYTES)
        self.port = self.server.sockets[0].getsockname()[1]
        log.info("egress proxy on %s", self.url)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with self.slots:
                await self._handle(reader, writer)
        except Exception as err:  # one connection's trouble never reaches the others
            log.debug("egress connection failed: %r", err)
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.head_timeout_s)
            request = parse_head(raw)
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError,
                ProxyRequestError) as err:
            writer.write(status_reply(400, "Bad Request", f"{type(err).__name__}: {err}"))
            return
        try:
            addresses = await self.policy.addresses(request.url)
        except UrlRefused as err:
            self.refused += 1
            log.info("egress refused %s %s: %s", request.method, request.url[:200], err)
            writer.write(status_reply(403, "Forbidden", str(err)))
            return
        upstream = await self._connect(addresses, request.port)
        if upstream is None:
            writer.write(status_reply(502, "Bad Gateway", f"cannot connect to {addresses}"))
            return
        up_reader, up_writer = upstream
        try:
            if request.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                up_writer.write(request.head)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _connect(self, addresses: list[str], port: int
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in addresses:  # only judged addresses, never a new lookup
            with contextlib.suppress(OSError, TimeoutError):
                return await asyncio.wait_for(asyncio.open_connection(address, port),
                                              self.connect_timeout_s)
        return None

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, TimeoutError):
            while data := await asyncio.wait_for(src.read(65536), self.idle_timeout_s):
                dst.write(data)
                await asyncio.wait_for(dst.drain(), self.idle_timeout_s)
        with contextlib.suppress(OSError):
            if dst.can_write_eof():
                dst.write_eof()  # the other side learns this one is done
