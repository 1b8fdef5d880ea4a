"""Which Host headers the project's web servers (the monitor, the env server) answer.

Delivery: none; a refused request is answered 421 Misdirected Request and reaches no
handler, so it reads and changes nothing.

Why: a page on any web site can make the operator's browser send requests to a server on
loopback by pointing a DNS name of its own at 127.0.0.1 (DNS rebinding); the browser then
treats the answers as that site's, so the page reads the monitor's screenshots and model
output, or drives browsers through the env server. Those requests carry the attacker's
name in their Host header. So a server answers only the names it is known by: the host it
binds, localhost, 127.0.0.1 and ::1, and the names its settings allow (monitor.allowed_hosts,
envserver.allowed_hosts: e.g. the compose service name, or the machine's name or address
when it is published beyond loopback). The port is not checked: rebinding keeps the port
and changes the name.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def host_name(header: str) -> str | None:
    """The name in a Host header ("name[:port]" or "[v6][:port]"), lower case, without a
    trailing dot; None when it is not one."""
    text = header.strip().lower()
    if text.startswith("["):
        name, bracket, port = text[1:].partition("]")
        if not bracket or (port and not (port[0] == ":" and port[1:].isdigit())):
            return None
    else:
        name, colon, port = text.partition(":")
        if colon and not port.isdigit():
            return None
    return name.rstrip(".") or None


def allowed_names(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a server bound to `bound` answers to."""
    names = {bound, *extra} - {""}
    return LOCAL_NAMES | {n.strip().strip("[]").lower().rstrip(".") for n in names}


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request with this Host header (None: it had none) is answered."""
    if header is None:
        return False  # HTTP/1.1 requires one, and every browser sends it
    name = host_name(header)
    return name is not None and name in allowed


def host_check(bound: str, extra: Iterable[str] = (), setting: str = "") -> Middleware:
    """aiohttp middleware answering 421 to a request for any name but `allowed_names`;
    the answer names `setting`, where a legitimate name is added."""
    allowed = allowed_names(bound, extra)
    refused = "misdirected request: this server does not answer to that Host name" + (
        f" (a name of this server? add it to {setting})" if setting else "") + "\n"

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not host_allowed(request.headers.get(hdrs.HOST), allowed):
            return web.Response(status=421, text=refused)
        return await handler(request)

    return check
