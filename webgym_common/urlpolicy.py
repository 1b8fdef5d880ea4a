"""Which URLs an episode may visit: http(s) only, never link-local or cloud metadata."""

from __future__ import annotations

import ipaddress
from fnmatch import fnmatch
from urllib.parse import urlsplit

# Cloud metadata endpoints answer on link-local addresses or these names.
_METADATA_HOSTS = {"metadata.google.internal", "metadata", "instance-data"}


class UrlRefused(ValueError):
    pass


def check_url(url: str, allowlist: list[str]) -> None:
    """Raise UrlRefused with the reason when `url` may not be visited."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UrlRefused(f"scheme {parts.scheme or '(none)'!r} is not allowed (http/https only)")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise UrlRefused("no host in URL")
    if host in _METADATA_HOSTS:
        raise UrlRefused(f"{host} is a cloud metadata address")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and (ip.is_link_local or ip.is_multicast or ip.is_unspecified):
        raise UrlRefused(f"{host} is a link-local/metadata address")
    if not any(fnmatch(host, pattern.lower()) for pattern in allowlist):
        raise UrlRefused(f"{host} is not in the URL allowlist")


def url_allowed(url: str, allowlist: list[str]) -> bool:
    try:
        check_url(url, allowlist)
    except UrlRefused:
        return False
    return True
