"""The Host check of the web servers (webgym_common/hosts.py): the names a server is known by
are answered, a rebound DNS name gets 421 (the servers themselves: tests/integration/
test_host_header.py)."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from webgym_common.hosts import allowed_names, host_allowed, host_check, host_name


@pytest.mark.parametrize(("header", "name"), [
    ("localhost:18780", "localhost"), ("LocalHost", "localhost"), ("127.0.0.1", "127.0.0.1"),
    ("[::1]:18780", "::1"), ("envserver:18790", "envserver"), ("example.com.:80", "example.com"),
    ("", None), (":18780", None), ("evil.com:x", None), ("[::1", None), ("[::1]x", None),
])
def test_host_name_reads_name_and_port(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_a_loopback_server_answers_its_local_names_only() -> None:
    allowed = allowed_names("127.0.0.1")
    for header in ("127.0.0.1:18780", "localhost:18780", "[::1]:18780", "LOCALHOST"):
        assert host_allowed(header, allowed), header
    # DNS rebinding: the attacker's name resolves to 127.0.0.1, the Host header keeps it.
    for header in ("evil.example:18780", "127.0.0.1.evil.example", "localhost.evil", None):
        assert not host_allowed(header, allowed), header


def test_configured_names_and_the_bound_address_are_answered() -> None:
    allowed = allowed_names("0.0.0.0", ["envserver", " Stack-Host. "])
    assert host_allowed("envserver:18790", allowed) and host_allowed("stack-host", allowed)
    # An address is no name a rebinding page can own (it would be another origin).
    assert host_allowed("0.0.0.0:18790", allowed)
    assert not host_allowed("evil.example:18790", allowed)
    assert host_allowed("10.0.0.5:18790", allowed_names("10.0.0.5"))
    assert not host_allowed("10.0.0.6:18790", allowed_names("10.0.0.5"))


async def test_the_middleware_refuses_an_unknown_host_before_any_handler() -> None:
    reached = []

    async def handler(request: web.Request) -> web.Response:
        reached.append(request.host)
        return web.Response(text="ok")

    app = web.Application(middlewares=[host_check("127.0.0.1", ["monitor"], "SETTING")])
    app.router.add_get("/", handler)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        forged = await client.get("/", headers={"Host": "rebound.example:18780"})
        assert forged.status == 421 and reached == []
        assert "add it to SETTING" in await forged.text()
        for host in ("localhost:18780", "monitor"):
            ok = await client.get("/", headers={"Host": host})
            assert ok.status == 200 and await ok.text() == "ok"
        assert (await client.get("/")).status == 200  # the test client's own 127.0.0.1:port
