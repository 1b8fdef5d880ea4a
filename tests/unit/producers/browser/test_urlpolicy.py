"""Which URLs an episode may visit (urlpolicy.py).

No test here sends a packet: names resolve through a fake resolver, and the one test of
the system resolver uses numeric host forms that getaddrinfo answers without any lookup.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import pytest

from producers.browser.urlpolicy import (
    SOCKET_SCHEMES,
    UrlPolicy,
    UrlRefused,
    address_refusal,
    check_url,
    expand,
    host_matches,
    split_pattern,
    url_allowed,
)
from webgym_common.config import BrowserSettings, load_settings

ANY = ["*"]  # the default allowlist (BrowserSettings.url_allowlist)
SANDBOX_URL = "http://127.0.0.1:18765"
SANDBOX = expand(["{sandbox}"], SANDBOX_URL)  # the default private allowlist, expanded

# A fake DNS: name -> addresses; anything else does not resolve.
DNS = {
    "example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "metadata.evil.test": ["169.254.169.254"],
    "split.evil.test": ["93.184.215.14", "10.0.0.7"],  # one public, one private
    "v6private.evil.test": ["2606:2800::1", "fd00::5"],
    "localhost": ["127.0.0.1", "::1"],
    "corp.internal": ["10.1.2.3"],
    "garbage.test": ["not an address"],
}


class FakeResolver:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        await asyncio.sleep(0)
        if host not in DNS:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return DNS[host]


def policy(
    allowlist: list[str] = ANY, private: list[str] = SANDBOX, **kw: object
) -> tuple[UrlPolicy, FakeResolver]:
    resolver = FakeResolver()
    return UrlPolicy(allowlist, private, resolver=resolver, **kw), resolver  # type: ignore[arg-type]


async def refusal(url: str, **kw: object) -> str | None:
    p, _ = policy(**kw)  # type: ignore[arg-type]
    return await p.refusal(url)


# -- the static part: scheme, host, metadata, allowlist ---------------------------------------


@pytest.mark.parametrize("url", [
    "http://example.com/",
    "https://example.com:8443/path?q=1#frag",
    "HTTPS://EXAMPLE.COM/",
    "http://example.com./",  # a fully qualified name with its trailing dot
    "http://127.0.0.1:8765/shop/",  # addresses are judged by UrlPolicy (it knows the sandbox)
])
def test_static_check_allows_http_and_https_to_allowlisted_hosts(url: str) -> None:
    check_url(url, ANY)
    assert url_allowed(url, ANY)


@pytest.mark.parametrize(("url", "scheme"), [
    ("file:///etc/passwd", "'file'"),
    ("javascript:alert(1)", "'javascript'"),
    ("data:text/html,<h1>hi</h1>", "'data'"),
    ("ftp://example.com/x", "'ftp'"),
    ("chrome://settings", "'chrome'"),
    ("about:blank", "'about'"),
    ("ws://example.com/", "'ws'"),  # a WebSocket is not a page to visit
    ("example.com/no-scheme", "'(none)'"),
    ("", "'(none)'"),
])
async def test_other_schemes_are_refused(url: str, scheme: str) -> None:
    with pytest.raises(UrlRefused) as refused:
        check_url(url, ANY)
    assert str(refused.value) == f"scheme {scheme} is not allowed (http/https only)"
    assert not url_allowed(url, ANY)
    assert await refusal(url) == str(refused.value)


async def test_a_url_without_a_host_or_with_a_bad_port_is_refused() -> None:
    with pytest.raises(UrlRefused, match="no host in URL"):
        check_url("http:///path", ANY)
    assert await refusal("http://example.com:99999/") == "bad port in 'http://example.com:99999/'"


@pytest.mark.parametrize("url", [
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.Google.Internal./computeMetadata/v1/",
    "http://metadata/",
    "https://instance-data/latest/meta-data/",
])
async def test_cloud_metadata_names_are_refused_even_when_allowlisted(url: str) -> None:
    with pytest.raises(UrlRefused, match="is a cloud metadata address"):
        check_url(url, ANY)
    assert not url_allowed(url, ["metadata*", "instance-data"])
    assert "cloud metadata" in str(await refusal(url, private=["*"]))


@pytest.mark.parametrize(("url", "what"), [
    ("http://169.254.169.254/latest/meta-data/", "link-local/metadata"),  # AWS/GCP/Azure
    ("http://169.254.0.1:8080/", "link-local/metadata"),
    ("http://[fe80::1]/", "link-local/metadata"),
    ("http://[fd00:ec2::254]/", "link-local/metadata"),  # AWS's IPv6 metadata (a ULA)
    ("http://100.100.100.200/", "link-local/metadata"),  # Alibaba's (in CGNAT space)
    ("http://[::ffff:169.254.169.254]/", "link-local/metadata"),  # IPv4-mapped
    ("http://224.0.0.1/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://0.0.0.0:8000/", "unspecified"),  # Linux connects it to the local host
    ("http://[::]/", "unspecified"),
])
async def test_metadata_link_local_multicast_and_unspecified_are_refused_whatever_the_lists(
    url: str, what: str
) -> None:
    with pytest.raises(UrlRefused, match=f"is an? {what} address"):
        check_url(url, ANY)
    assert not url_allowed(url, ["*", "169.254.*"])
    assert f"{what} address" in str(await refusal(url, private=["*"]))


def test_allowlist_patterns_are_shell_globs_on_the_host_and_optionally_the_port() -> None:
    shop_only = ["*.shop.test", "127.0.0.1", "api.test:8443"]
    assert url_allowed("http://www.shop.test/cart", shop_only)
    assert url_allowed("https://a.b.shop.test/", shop_only)
    assert url_allowed("http://127.0.0.1:8765/shop/", shop_only)  # no port: every port
    assert url_allowed("https://api.test:8443/v1", shop_only)
    assert not url_allowed("https://api.test/v1", shop_only)  # port 443 is not 8443
    assert not url_allowed("http://shop.test/", shop_only)  # "*." needs a subdomain
    assert not url_allowed("http://evilshop.test/", shop_only)
    assert not url_allowed("http://www.shop.test.evil.net/", shop_only)
    assert not url_allowed("http://127.0.0.2/", shop_only)
    with pytest.raises(UrlRefused, match="evil.net is not in the URL allowlist"):
        check_url("http://www.shop.test@evil.net/", shop_only)  # user info is not the host


def test_allowlist_matching_ignores_case() -> None:
    assert url_allowed("http://WWW.Shop.Test/", ["*.SHOP.test"])


def test_an_empty_allowlist_refuses_everything() -> None:
    assert not url_allowed("http://example.com/", [])


@pytest.mark.parametrize(("pattern", "split"), [
    ("127.0.0.1:18765", ("127.0.0.1", "18765")),
    ("Shop.Test.", ("shop.test", "*")),
    ("*.shop.test:*", ("*.shop.test", "*")),
    ("[::1]:8000", ("::1", "8000")),
    ("[::1]", ("::1", "*")),
    ("::1", ("::1", "*")),  # a bare IPv6 address has no port
])
def test_patterns_name_a_host_and_maybe_a_port(pattern: str, split: tuple[str, str]) -> None:
    assert split_pattern(pattern) == split


def test_sandbox_stands_for_the_sandbox_host_and_port() -> None:
    assert expand(["{sandbox}", "*.test"], "http://127.0.0.1:18765") == [
        "127.0.0.1:18765", "*.test"]
    assert expand(["{sandbox}"], "http://[::1]:9000") == ["[::1]:9000"]
    assert host_matches("::1", 9000, ["[::1]:9000"])
    assert not host_matches("::1", 9001, ["[::1]:9000"])


# -- addresses ------------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "what"), [
    ("127.0.0.1", "loopback"),
    ("127.0.0.2", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("::ffff:10.0.0.1", "private"),  # IPv4-mapped: judged by the IPv4 address it carries
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:100.64.0.1", "carrier-grade NAT"),
    ("::10.0.0.1", "private"),  # IPv4-compatible (deprecated)
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
    ("169.254.169.254", "link-local/metadata"),
    ("0.0.0.0", "unspecified"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.1", "reserved"),  # documentation range: not global
    ("198.18.0.1", "reserved"),  # benchmarking range: not global
    ("255.255.255.255", "reserved"),
])
def test_non_global_addresses_are_refused(address: str, what: str) -> None:
    reason = address_refusal(ipaddress.ip_address(address))
    assert reason is not None and f"{what} " in reason


@pytest.mark.parametrize("address", [
    "93.184.215.14", "8.8.8.8", "172.32.0.1", "172.15.255.255", "100.128.0.1", "100.63.255.255",
    "2606:4700::1", "::ffff:8.8.8.8", "64:ff9b::808:808",
])
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(("url", "reason"), [
    ("http://127.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://[::1]:8000/", "::1 is a loopback address"),
    ("http://10.1.2.3/", "10.1.2.3 is a private address"),
    ("http://172.16.5.4/", "172.16.5.4 is a private address"),
    ("http://192.168.0.1/admin", "192.168.0.1 is a private address"),
    ("http://100.64.1.1/", "100.64.1.1 is a carrier-grade NAT (100.64.0.0/10) address"),
    ("http://[fc00::1]/", "fc00::1 is a unique-local (fc00::/7) address"),
    ("http://[::ffff:10.0.0.1]/",
     "::ffff:10.0.0.1 is a private address (IPv4 10.0.0.1 inside IPv6)"),
])
async def test_the_policy_refuses_private_literals(url: str, reason: str) -> None:
    p, resolver = policy()
    assert await p.refusal(url) == reason
    assert resolver.asked == []  # a literal needs no lookup


async def test_every_address_a_name_resolves_to_is_checked() -> None:
    assert await refusal("http://metadata.evil.test/latest/") == (
        "metadata.evil.test resolves to 169.254.169.254, a link-local/metadata address")
    assert await refusal("https://split.evil.test/") == (
        "split.evil.test resolves to 10.0.0.7, a private address")
    assert await refusal("https://v6private.evil.test/") == (
        "v6private.evil.test resolves to fd00::5, a unique-local (fc00::/7) address")
    assert await refusal("http://localhost:18765/") == (
        "localhost resolves to 127.0.0.1, a loopback address")
    assert await refusal("https://example.com/") is None
    assert await refusal("http://93.184.215.14/") is None


async def test_names_that_do_not_resolve_or_not_in_time_are_refused() -> None:
    assert "nowhere.test does not resolve" in str(await refusal("http://nowhere.test/"))

    async def hangs(host: str, port: int) -> list[str]:
        await asyncio.Event().wait()
        return []

    slow = UrlPolicy(ANY, resolver=hangs, resolve_timeout_s=0.01)
    assert await slow.refusal("http://slow.test/") == "slow.test did not resolve within 0.01 s"


async def test_the_policy_fails_closed_on_what_it_cannot_judge() -> None:
    reason = await refusal("http://garbage.test/")
    assert reason is not None and reason.startswith("the URL policy failed")


async def test_the_sandbox_host_and_port_are_allowed_but_not_the_rest_of_loopback() -> None:
    p, resolver = policy()
    assert await p.refusal("http://127.0.0.1:18765/shop/") is None
    assert await p.refusal("ws://127.0.0.1:18765/security/echo", SOCKET_SCHEMES) is None
    assert await p.refusal("http://127.0.0.1:18766/") == "127.0.0.1 is a loopback address"
    assert await p.refusal("http://127.0.0.1/") == "127.0.0.1 is a loopback address"
    assert await p.refusal("http://127.0.0.2:18765/") == "127.0.0.2 is a loopback address"
    assert await p.refusal("ws://127.0.0.2:9/", SOCKET_SCHEMES) == "127.0.0.2 is a loopback address"
    assert resolver.asked == []


async def test_private_allowlisted_names_skip_the_lookup_and_narrow_allowlists_apply() -> None:
    p, resolver = policy(allowlist=["*.shop.test"], private=[*SANDBOX, "corp.internal"])
    assert await p.refusal("http://corp.internal/wiki") is None
    assert await p.refusal("http://127.0.0.1:18765/") is None  # the sandbox, whatever the list
    assert await p.refusal("http://example.com/") == "example.com is not in the URL allowlist"
    assert resolver.asked == []  # refused or exempt before any lookup


async def test_refusals_are_counted_and_logged() -> None:
    p, _ = policy()
    await p.refusal("http://10.0.0.1/a")
    await p.refusal("http://127.0.0.1:18765/")
    assert p.refused == 1
    assert list(p.refusals) == [("http://10.0.0.1/a", "10.0.0.1 is a private address")]
    with pytest.raises(UrlRefused, match="10.0.0.2 is a private address"):
        await p.check("http://10.0.0.2/")
    assert p.refused == 2


async def test_lookups_are_cached_per_host_for_a_bounded_time() -> None:
    now = [0.0]
    p, resolver = policy(cache_ttl_s=60.0, clock=lambda: now[0])
    await asyncio.gather(*(p.refusal(f"https://example.com/img{i}.png") for i in range(20)))
    assert await p.refusal("http://example.com:8080/") is None
    assert await p.refusal("http://split.evil.test/") is not None
    assert await p.refusal("http://split.evil.test/again") is not None
    assert resolver.asked == ["example.com", "split.evil.test"]
    now[0] = 61.0
    await p.refusal("https://example.com/")
    assert resolver.asked == ["example.com", "split.evil.test", "example.com"]


async def test_the_cache_is_bounded() -> None:
    p, resolver = policy(cache_size=2)
    for host in ("example.com", "localhost", "corp.internal", "example.com"):
        await p.refusal(f"http://{host}/")
    assert resolver.asked == ["example.com", "localhost", "corp.internal", "example.com"]


async def test_the_system_resolver_sees_through_numeric_host_forms() -> None:
    # getaddrinfo reads these as IPv4 without asking any server: 2130706433 is 127.0.0.1.
    p = UrlPolicy(ANY, SANDBOX)
    assert await p.refusal("http://2130706433/") == (
        "2130706433 resolves to 127.0.0.1, a loopback address")
    assert await p.refusal("http://0x7f.1/") == "0x7f.1 resolves to 127.0.0.1, a loopback address"


def test_the_default_settings_allow_the_sandbox_and_refuse_private_addresses() -> None:
    settings = load_settings(infra={"sandbox_port": 28765})
    p = UrlPolicy.from_settings(settings)
    assert p.allowlist == ["*"]
    assert p.private_allowlist == ["127.0.0.1:28765"]
    cfg = BrowserSettings(private_allowlist=["{sandbox}", "*.corp"], url_cache_ttl_s=5)
    q = UrlPolicy.for_browser(cfg, "http://10.0.0.9:8000")
    assert q.private_allowlist == ["10.0.0.9:8000", "*.corp"] and q.cache_ttl_s == 5


async def test_addresses_are_the_judged_ones_for_the_proxy_to_connect_to() -> None:
    p, resolver = policy(private=[*SANDBOX, "corp.internal"])
    assert await p.addresses("https://example.com/") == DNS["example.com"]
    assert await p.addresses("https://example.com/other") == DNS["example.com"]  # cached
    assert await p.addresses("http://93.184.215.14/") == ["93.184.215.14"]  # no lookup
    assert await p.addresses("http://127.0.0.1:18765/") == ["127.0.0.1"]  # the sandbox
    # A privately allowed name is resolved (the proxy connects by address), not judged...
    assert await p.addresses("http://corp.internal/") == ["10.1.2.3"]
    assert resolver.asked == ["example.com", "corp.internal"]
    # ... and everything else is refused as `check` refuses it, and counted.
    for url, reason in (("http://split.evil.test/", "split.evil.test resolves to 10.0.0.7"),
                        ("http://127.0.0.2/", "127.0.0.2 is a loopback address"),
                        ("http://nowhere.test/", "nowhere.test does not resolve")):
        with pytest.raises(UrlRefused, match=reason):
            await p.addresses(url)
    assert p.refused == 3


async def test_a_privately_allowed_name_still_never_reaches_metadata_addresses() -> None:
    p, _ = policy(private=["metadata.evil.test"])
    with pytest.raises(UrlRefused, match="169.254.169.254"):
        await p.addresses("http://metadata.evil.test/")
