"""Which URLs an episode may visit, and which addresses its page may reach.

Delivery semantics: none (no events); a decision is made before a request leaves the
browser, and a refused request is never sent (fail closed: a name that does not resolve,
or not in time, is refused).

Two lists decide, both of case-insensitive shell globs, each entry `host` or `host:port`
(`[v6]:port` for an IPv6 literal; an entry without a port matches every port):

- `url_allowlist`: the hosts an episode may visit at all. The default `["*"]` means any
  host whose every address is public.
- `private_allowlist`: the host[:port]s exempt from the address checks, allowed as they
  are (no DNS lookup). `{sandbox}` stands for the sandbox web's host:port, the default, so
  allowing the sandbox (on 127.0.0.1) does not open the rest of loopback.

Any other URL is refused when its host is a literal, or a name resolving (to ANY of its
addresses) to, a loopback, private (RFC 1918), carrier-grade NAT (100.64/10), unique-local
(fc00::/7), reserved or otherwise non-global address; an IPv4 address inside IPv6
(::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::/96 NAT64, 2002::/16 6to4) is judged as that IPv4
address. Link-local, cloud-metadata, multicast and unspecified addresses and the metadata
names are refused whatever either list says.

`check_url` is the part that needs neither DNS nor the private allowlist (scheme, host,
metadata names and addresses, url_allowlist). `UrlPolicy.check` is the whole decision;
the browser pool applies it to every request and WebSocket of a page. `UrlPolicy.addresses`
is the same decision returning the judged addresses: the browser's egress proxy
(producers/browser/egress.py) connects only to those, so a DNS server that answers
differently the second time (DNS rebinding) cannot move a connection to a private address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from urllib.parse import urlsplit

from webgym_common.config import BrowserSettings, Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata endpoints answer on these names and addresses (AWS's IPv6 one is
# unique-local, Alibaba's is CGNAT, Azure's wire server looks public).
_METADATA_HOSTS = {"metadata.google.internal", "metadata", "instance-data"}
_METADATA_ADDRESSES = {
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
}
_RFC1918 = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_COMPATIBLE = ipaddress.ip_network("::/96")
WEB_SCHEMES = ("http", "https")
SOCKET_SCHEMES = ("ws", "wss", "http", "https")  # new WebSocket("https://...") works too
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
SANDBOX = "{sandbox}"

Resolver = Callable[[str, int], Awaitable[list[str]]]


class UrlRefused(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    """Where a URL goes: its scheme, lower-cased host (no brackets), port, and the
    address when the host is a literal one."""

    scheme: str
    host: str
    port: int
    ip: IPAddress | None


def parse_target(url: str, schemes: Sequence[str] = WEB_SCHEMES) -> Target:
    """The URL's target; raises UrlRefused for another scheme, no host or a bad port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise UrlRefused(
            f"scheme {parts.scheme or '(none)'!r} is not allowed ({'/'.join(schemes)} only)"
        )
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise UrlRefused("no host in URL")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise UrlRefused(f"bad port in {url!r}") from None
    try:
        ip: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    return Target(scheme, host, port, ip)


def embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _V4_COMPATIBLE and int(ip) > 1):  # not :: and ::1
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def always_refused(ip: IPAddress) -> str | None:
    """Why no list can allow this address (None when a list may)."""
    inner = embedded_v4(ip)
    if inner is not None:
        reason = always_refused(inner)
        return f"{reason} (IPv4 {inner} inside IPv6)" if reason else None
    if ip in _METADATA_ADDRESSES or ip.is_link_local:
        return "a link-local/metadata address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified:
        return "an unspecified address"
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """Why a page may not reach this address unless its host is private-allowlisted
    (None: a public address)."""
    inner = embedded_v4(ip)
    if inner is not None:
        reason = address_refusal(inner)
        return f"{reason} (IPv4 {inner} inside IPv6)" if reason else None
    reason = always_refused(ip)
    if reason:
        return reason
    if ip.is_loopback:
        return "a loopback address"
    if ip in _CGNAT:
        return "a carrier-grade NAT (100.64.0.0/10) address"
    if isinstance(ip, ipaddress.IPv6Address) and ip in ipaddress.ip_network("fc00::/7"):
        return "a unique-local (fc00::/7) address"
    if any(ip in net for net in _RFC1918):
        return "a private address"
    if ip.is_reserved or not ip.is_global:
        return "a reserved (non-global) address"
    return None


def split_pattern(pattern: str) -> tuple[str, str]:
    """`host[:port]` (`[v6]:port`, a bare IPv6 glob has no port) as (host, port glob)."""
    p = pattern.strip().lower()
    if p.startswith("["):
        host, _, rest = p[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else "*"
    if p.count(":") == 1:
        host, port = p.split(":")
        return host.rstrip("."), port or "*"
    return p.rstrip("."), "*"


def host_matches(host: str, port: int, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        want_host, want_port = split_pattern(pattern)
        if fnmatch(host, want_host) and fnmatch(str(port), want_port):
            return True
    return False


def expand(patterns: Iterable[str], sandbox_url: str) -> list[str]:
    """The patterns with `{sandbox}` replaced by the sandbox's host:port."""
    t = parse_target(sandbox_url)
    here = f"[{t.host}]:{t.port}" if ":" in t.host else f"{t.host}:{t.port}"
    return [p.replace(SANDBOX, here) for p in patterns]


def never_allowed(t: Target) -> None:
    """Raise UrlRefused for a metadata name or an address no list can allow."""
    if t.host in _METADATA_HOSTS:
        raise UrlRefused(f"{t.host} is a cloud metadata address")
    reason = always_refused(t.ip) if t.ip is not None else None
    if reason:
        raise UrlRefused(f"{t.host} is {reason}")


def check_url(url: str, allowlist: Sequence[str]) -> None:
    """Raise UrlRefused for what can be refused without DNS or the private allowlist
    (`UrlPolicy.check` is the whole decision)."""
    t = parse_target(url)
    never_allowed(t)
    if not host_matches(t.host, t.port, allowlist):
        raise UrlRefused(f"{t.host} is not in the URL allowlist")


def url_allowed(url: str, allowlist: Sequence[str]) -> bool:
    try:
        check_url(url, allowlist)
    except UrlRefused:
        return False
    return True


def judge_addresses(host: str, addresses: Sequence[str]) -> None:
    """Raise UrlRefused unless every address `host` resolved to is public."""
    if not addresses:
        raise UrlRefused(f"{host} resolves to no address")
    for a in addresses:
        ip = ipaddress.ip_address(a)
        reason = address_refusal(ip)
        if reason:
            raise UrlRefused(f"{host} resolves to {ip}, {reason}")


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (getaddrinfo in a thread)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]).split("%")[0] for info in infos})


class UrlPolicy:
    """The whole decision, with resolved names cached for `cache_ttl_s` (bounded size)
    and a count and short log of what it refused."""

    def __init__(
        self, allowlist: Sequence[str], private_allowlist: Sequence[str] = (), *,
        resolver: Resolver = system_resolve, resolve_timeout_s: float = 5.0,
        cache_ttl_s: float = 60.0, cache_size: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.allowlist = list(allowlist)
        self.private_allowlist = list(private_allowlist)
        self.resolver = resolver
        self.resolve_timeout_s = resolve_timeout_s
        self.cache_ttl_s = cache_ttl_s
        self.cache_size = cache_size
        self.clock = clock
        # host -> (expiry, why it is refused or None, the addresses it resolved to)
        self._cache: dict[str, tuple[float, str | None, list[str]]] = {}
        self._resolving: dict[str, asyncio.Future[tuple[str | None, list[str]]]] = {}
        self.refused = 0
        self.refusals: deque[tuple[str, str]] = deque(maxlen=100)
        self.lookups = 0  # resolver calls (cache misses)

    @classmethod
    def for_browser(cls, cfg: BrowserSettings, sandbox_url: str) -> UrlPolicy:
        """The browser settings' policy, `{sandbox}` meaning `sandbox_url`'s host:port."""
        return cls(cfg.url_allowlist, expand(cfg.private_allowlist, sandbox_url),
                   resolve_timeout_s=cfg.url_resolve_timeout_s, cache_ttl_s=cfg.url_cache_ttl_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> UrlPolicy:
        return cls.for_browser(settings.browser, settings.sandbox_url)

    async def check(self, url: str, schemes: Sequence[str] = WEB_SCHEMES) -> None:
        """Raise UrlRefused with the reason when a page may not request `url`."""
        try:
            await self._check(url, schemes)
        except UrlRefused as err:
            self._record(url, str(err))
            raise
        except Exception as err:  # fail closed: a request the policy cannot judge is not sent
            self._record(url, f"the URL policy failed: {err!r}")
            raise UrlRefused(f"the URL policy failed: {err!r}") from err

    def _record(self, url: str, reason: str) -> None:
        self.refused += 1
        self.refusals.append((url, reason))

    async def refusal(self, url: str, schemes: Sequence[str] = WEB_SCHEMES) -> str | None:
        try:
            await self.check(url, schemes)
        except UrlRefused as err:
            return str(err)
        return None

    async def addresses(self, url: str, schemes: Sequence[str] = WEB_SCHEMES) -> list[str]:
        """The addresses a connection for `url` may go to: every one was judged, so a name
        that resolves elsewhere when it is looked up again (DNS rebinding) changes nothing.
        A privately allowed name is resolved too (the resolving proxy connects by address).
        Raises UrlRefused as `check` does."""
        try:
            t, private = self._allowed_target(url, schemes)
            if t.ip is not None:
                return [str(t.ip)]
            reason, found = await self._judge_name(t, judged=not private)
            if reason:
                raise UrlRefused(reason)
            return found
        except UrlRefused as err:
            self._record(url, str(err))
            raise
        except Exception as err:  # fail closed
            self._record(url, f"the URL policy failed: {err!r}")
            raise UrlRefused(f"the URL policy failed: {err!r}") from err

    def _allowed_target(self, url: str, schemes: Sequence[str]) -> tuple[Target, bool]:
        """The target and whether it is privately allowed; UrlRefused for what needs no DNS."""
        t = parse_target(url, schemes)
        never_allowed(t)
        if host_matches(t.host, t.port, self.private_allowlist):
            return t, True
        if not host_matches(t.host, t.port, self.allowlist):
            raise UrlRefused(f"{t.host} is not in the URL allowlist")
        if t.ip is not None and (reason := address_refusal(t.ip)):
            raise UrlRefused(f"{t.host} is {reason}")
        return t, False

    async def _check(self, url: str, schemes: Sequence[str]) -> None:
        t, private = self._allowed_target(url, schemes)
        if t.ip is None and not private:
            reason, _ = await self._judge_name(t)
            if reason:
                raise UrlRefused(reason)

    async def _judge_name(self, t: Target, judged: bool = True) -> tuple[str | None, list[str]]:
        """Why `t.host` may not be reached (None: every address is public) and its addresses,
        from the cache while it is fresh; one lookup per host however many requests wait for
        it. `judged=False` (a privately allowed name): only the addresses no list allows."""
        key = t.host if judged else f"{t.host} (private)"
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self.clock():
            return hit[1], hit[2]
        pending = self._resolving.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._lookup(t, judged))
            self._resolving[key] = pending
            pending.add_done_callback(lambda _: self._resolving.pop(key, None))
        reason, found = await asyncio.shield(pending)
        self._cache.pop(key, None)
        if len(self._cache) >= self.cache_size:
            self._cache.pop(next(iter(self._cache)))  # the oldest entry
        self._cache[key] = (self.clock() + self.cache_ttl_s, reason, found)
        return reason, found

    async def _lookup(self, t: Target, judged: bool) -> tuple[str | None, list[str]]:
        self.lookups += 1
        try:
            addresses = await asyncio.wait_for(
                self.resolver(t.host, t.port), self.resolve_timeout_s)
        except TimeoutError:
            return f"{t.host} did not resolve within {self.resolve_timeout_s:g} s", []
        except OSError as err:
            return f"{t.host} does not resolve: {err}", []
        try:
            if judged:
                judge_addresses(t.host, addresses)
            else:
                for a in addresses:
                    if reason := always_refused(ipaddress.ip_address(a)):
                        raise UrlRefused(f"{t.host} resolves to {a}, {reason}")
        except UrlRefused as err:
            return str(err), []
        return None, list(addresses)
