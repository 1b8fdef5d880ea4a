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
tunnels), and absolute-form requests for plain http. A plain-http client connection carries
exactly one request, so that each request's host is judged: the request goes upstream with
`Connection: close` and its body framed by its own Content-Length or chunked encoding, the
response comes back with `Connection: close` whatever the upstream said (a server that
ignores the header would otherwise keep the connection, and Chromium would send its next
request, to any host, down the same pipe), and nothing the client sends after its request
ever reaches the upstream: more bytes end the connection. A `101 Switching Protocols`
(a WebSocket over plain http) turns the connection into a tunnel to the judged host.
Bounded: at most `max_connections` at once, the request head within `head_timeout_s` and
16 KiB (a response head 64 KiB), connecting within `connect_timeout_s`, a connection idle
for `idle_timeout_s` is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from producers.browser.urlpolicy import UrlPolicy, UrlRefused

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
MAX_RESPONSE_HEAD_BYTES = 64 * 1024  # servers send long Set-Cookie and CSP headers
CHUNKED = -1  # ProxyRequest.body_length of a chunked request body
_HOP_BY_HOP = ("proxy-connection:", "proxy-authorization:", "connection:", "keep-alive:")
_RESPONSE_HOP_BY_HOP = ("proxy-connection:", "connection:", "keep-alive:")


class ProxyRequestError(ValueError):
    """A request head the proxy cannot forward (answered 400)."""


@dataclass(frozen=True)
class ProxyRequest:
    method: str
    url: str  # what the policy judges
    port: int
    head: bytes  # plain http: the head to send upstream; CONNECT: nothing
    body_length: int = 0  # plain http: the body's bytes after the head, or CHUNKED


def header_values(lines: Iterable[str], name: str) -> list[str]:
    """The value of every `name` header among a head's lines (`name` in lower case)."""
    prefix = name + ":"
    return [h.split(":", 1)[1].strip() for h in lines if h.lower().startswith(prefix)]


def body_length(headers: list[str]) -> int:
    """How a request's body is framed: its Content-Length, or CHUNKED. Anything a server
    could read differently (both, several lengths, another coding) is refused: the proxy
    must know where the one request it forwards ends."""
    lengths = set(header_values(headers, "content-length"))
    codings = [c.lower() for c in header_values(headers, "transfer-encoding")]
    if codings:
        if codings != ["chunked"] or lengths:
            raise ProxyRequestError(f"an ambiguous request body: Transfer-Encoding {codings}"
                                    f"{' with a Content-Length' if lengths else ''}")
        return CHUNKED
    if not lengths:
        return 0
    if len(lengths) > 1 or not next(iter(lengths)).isdigit():
        raise ProxyRequestError(f"a bad Content-Length: {sorted(lengths)}")
    return int(next(iter(lengths)))


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
    return ProxyRequest(method, target, port, head.encode("latin-1"), body_length(headers))


def response_head(raw: bytes) -> tuple[int, bytes]:
    """An upstream's response head as its status and the head to send the client: the
    connection closes after it (`Connection: close`), whatever the upstream said, except
    on 101, which hands the connection over to the new protocol as it is."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProxyRequestError(f"not an HTTP/1 response: {lines[0][:100]!r}")
    status = int(parts[1])
    if status == 101 or 100 <= status < 200:  # interim: forwarded as it is
        return status, raw
    headers = [h for h in lines[1:] if h and not h.lower().startswith(_RESPONSE_HOP_BY_HOP)]
    return status, ("\r\n".join([lines[0], *headers, "Connection: close"])
                    + "\r\n\r\n").encode("latin-1")


def status_reply(code: int, reason: str, why: str) -> bytes:
    body = f"{code} {reason}: {why}\n".encode()
    safe = why.encode("ascii", "replace").decode().replace("\r", " ").replace("\n", " ")
    return (f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nX-WebGym-Refused: {safe[:300]}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


def response_length(method: str, status: int, head: bytes) -> int | None:
    """How a response's body is framed: a length, CHUNKED, or None (until the server
    closes). Transfer-Encoding wins over Content-Length (RFC 9112 6.3)."""
    if method == "HEAD" or status in (204, 304) or status < 200:
        return 0
    lines = head.decode("latin-1").split("\r\n")
    if any(c.lower().endswith("chunked") for c in header_values(lines, "transfer-encoding")):
        return CHUNKED
    lengths = set(header_values(lines, "content-length"))
    if len(lengths) == 1 and next(iter(lengths)).isdigit():
        return int(next(iter(lengths)))
    return None


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
                await self._tunnel(reader, writer, up_reader, up_writer)
            else:
                await self._one_request(request, reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _one_request(self, request: ProxyRequest, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter, up_reader: asyncio.StreamReader,
                           up_writer: asyncio.StreamWriter) -> None:
        """The client's one plain-http request and the upstream's one response, each by its
        own framing; then the connection ends (or, on 101, becomes a tunnel to the same
        judged host). Nothing the client sends past its request is read."""
        up_writer.write(request.head)
        body = asyncio.create_task(self._request_body(request, reader, up_writer))
        try:
            while True:  # interim responses (100 Continue) first
                raw = await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"),
                                             self.idle_timeout_s)
                status, head = response_head(raw)
                if status == 101:
                    if await body:
                        writer.write(head)  # what follows, both ways, is the new protocol
                        await self._tunnel(reader, writer, up_reader, up_writer)
                    return
                writer.write(head)
                if status >= 200:
                    break
            length = response_length(request.method, status, head)
            if length == CHUNKED:
                await self._copy_chunked(up_reader, writer)
            elif length is None:
                await self._pipe(up_reader, writer)
            else:
                await self._copy_exactly(up_reader, writer, length)
            await asyncio.wait_for(writer.drain(), self.idle_timeout_s)
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError, OSError,
                ValueError) as err:  # ProxyRequestError is a ValueError
            log.debug("egress: no usable response to %s: %r", request.url[:200], err)
        finally:
            body.cancel()

    async def _request_body(self, request: ProxyRequest, reader: asyncio.StreamReader,
                            up_writer: asyncio.StreamWriter) -> bool:
        """Forward the request's body and nothing past it; whether all of it went."""
        try:
            if request.body_length == CHUNKED:
                await self._copy_chunked(reader, up_writer)
            else:
                await self._copy_exactly(reader, up_writer, request.body_length)
            return True
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError) as err:
            log.debug("egress: the body of %s: %r", request.url[:200], err)
            return False

    async def _copy_exactly(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                            n: int) -> None:
        while n > 0:
            data = await asyncio.wait_for(src.read(min(n, 65536)), self.idle_timeout_s)
            if not data:
                raise asyncio.IncompleteReadError(b"", n)
            dst.write(data)
            await asyncio.wait_for(dst.drain(), self.idle_timeout_s)
            n -= len(data)

    async def _copy_chunked(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """A chunked body, its last chunk and trailers included, and nothing past it."""
        while True:
            line = await asyncio.wait_for(src.readuntil(b"\r\n"), self.idle_timeout_s)
            dst.write(line)
            size = int(line.split(b";", 1)[0].strip(), 16)  # ValueError: not a chunk
            if size == 0:
                break
            await self._copy_exactly(src, dst, size + 2)  # the chunk and its CRLF
        while (line := await asyncio.wait_for(src.readuntil(b"\r\n"),
                                              self.idle_timeout_s)) != b"\r\n":
            dst.write(line)  # a trailer
        dst.write(line)
        await asyncio.wait_for(dst.drain(), self.idle_timeout_s)

    async def _connect(self, addresses: list[str], port: int
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in addresses:  # only judged addresses, never a new lookup
            with contextlib.suppress(OSError, TimeoutError):
                return await asyncio.wait_for(
                    asyncio.open_connection(address, port, limit=MAX_RESPONSE_HEAD_BYTES),
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
