"""Which URLs an episode may visit (urlpolicy.py), as the policy behaves today."""

from __future__ import annotations

import pytest

from webgym_common.urlpolicy import UrlRefused, check_url, url_allowed

ANY = ["*"]  # the default allowlist (BrowserSettings.url_allowlist)


@pytest.mark.parametrize("url", [
    "http://example.com/",
    "https://example.com:8443/path?q=1#frag",
    "HTTPS://EXAMPLE.COM/",
    "http://example.com./",  # a fully qualified name with its trailing dot
    "http://127.0.0.1:8765/shop/",  # the sandbox web (loopback is not refused)
    "http://10.1.2.3/",
    "http://[::1]:8000/",
])
def test_http_and_https_to_ordinary_hosts_are_allowed(url: str) -> None:
    check_url(url, ANY)
    assert url_allowed(url, ANY)


@pytest.mark.parametrize(("url", "scheme"), [
    ("file:///etc/passwd", "'file'"),
    ("javascript:alert(1)", "'javascript'"),
    ("data:text/html,<h1>hi</h1>", "'data'"),
    ("ftp://example.com/x", "'ftp'"),
    ("chrome://settings", "'chrome'"),
    ("about:blank", "'about'"),
    ("example.com/no-scheme", "'(none)'"),
    ("", "'(none)'"),
])
def test_other_schemes_are_refused(url: str, scheme: str) -> None:
    with pytest.raises(UrlRefused) as refused:
        check_url(url, ANY)
    assert str(refused.value) == f"scheme {scheme} is not allowed (http/https only)"
    assert not url_allowed(url, ANY)


def test_a_url_without_a_host_is_refused() -> None:
    with pytest.raises(UrlRefused, match="no host in URL"):
        check_url("http:///path", ANY)


@pytest.mark.parametrize("url", [
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.Google.Internal./computeMetadata/v1/",
    "http://metadata/",
    "https://instance-data/latest/meta-data/",
])
def test_cloud_metadata_names_are_refused_even_when_allowlisted(url: str) -> None:
    with pytest.raises(UrlRefused, match="is a cloud metadata address"):
        check_url(url, ANY)
    assert not url_allowed(url, ["metadata*", "instance-data"])


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",  # AWS/GCP/Azure metadata
    "http://169.254.0.1:8080/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",  # multicast
    "http://[ff02::1]/",
    "http://0.0.0.0:8000/",  # unspecified
    "http://[::]/",
])
def test_link_local_multicast_and_unspecified_addresses_are_refused(url: str) -> None:
    with pytest.raises(UrlRefused, match="is a link-local/metadata address"):
        check_url(url, ANY)
    assert not url_allowed(url, ["*", "169.254.*"])


def test_allowlist_patterns_are_shell_globs_on_the_host() -> None:
    shop_only = ["*.shop.test", "127.0.0.1"]
    assert url_allowed("http://www.shop.test/cart", shop_only)
    assert url_allowed("https://a.b.shop.test/", shop_only)
    assert url_allowed("http://127.0.0.1:8765/shop/", shop_only)  # the port is not matched
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
