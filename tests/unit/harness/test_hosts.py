"""Hosts as network namespaces (harness/hosts.py), made and removed for real: they reach each
other over the bridge, a cut link isolates one until it is restored, and nothing outside
the hosts is reachable from them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from harness.hosts import Host, Hosts, run_inside, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

PORT = 7070
SERVE = f"""
import socket
s = socket.create_server((__import__("sys").argv[1], {PORT}))
while True:
    c, _ = s.accept(); c.sendall(b"hello"); c.close()
"""
CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.5) as c:
        print(c.recv(5).decode())
except OSError as err:
    print(type(err).__name__)
"""


def reach(host: Host, address: str, port: int = PORT) -> str:
    """What a connection from `host` to address:port gives: "hello" or the error's name."""
    done = subprocess.run(host.command([sys.executable, "-c", CONNECT, address, str(port)]),
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or done.stderr.strip()


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    with Hosts(f"wgt{os.getpid() % 100000}") as made:
        yield made


def test_hosts_reach_each_other_a_cut_one_is_isolated_until_restored(hosts: Hosts) -> None:
    a, b, c = hosts.add("a"), hosts.add("b"), hosts.add("c")
    assert [h.address for h in (a, b, c)] == ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
    server = subprocess.Popen(a.command([sys.executable, "-c", SERVE, a.address]))
    try:
        deadline = time.monotonic() + 10
        while reach(b, a.address) != "hello":
            assert time.monotonic() < deadline, reach(b, a.address)
            time.sleep(0.2)
        assert reach(c, a.address) == "hello"

        hosts.cut("b")
        assert reach(b, a.address) in {"TimeoutError", "timeout"}
        assert reach(c, a.address) == "hello"  # the others are not affected

        hosts.restore("b")
        assert reach(b, a.address) == "hello"
    finally:
        server.kill()
        server.wait()


def test_nothing_outside_the_hosts_is_reachable_and_close_removes_them(hosts: Hosts) -> None:
    b = hosts.add("b")
    # No route beyond the bridge: an address outside 198.18.0.0/24 (the machine's own
    # resolver's, or any other) fails at once.
    assert reach(b, "10.255.255.1", 53) == "OSError"  # ENETUNREACH, not a timeout
    names = {hosts.switch, b.name}
    hosts.close()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not names & {line.split()[0] for line in listed.splitlines() if line}


def hello(address: str) -> str:
    """What a connection from the calling thread to address:PORT gives."""
    try:
        with socket.create_connection((address, PORT), timeout=1.5) as c:
            return c.recv(5).decode()
    except OSError as err:
        return type(err).__name__


def test_a_thread_run_inside_a_host_reaches_the_others_and_kill_ends_what_runs_in_one(
        hosts: Hosts) -> None:
    a, b = hosts.add("a"), hosts.add("b")
    server = subprocess.Popen(a.command([sys.executable, "-c", SERVE, a.address]))
    try:
        deadline = time.monotonic() + 10
        while run_inside(b, lambda: hello(a.address)) != "hello":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        # The caller's thread stays outside: no route to the hosts from here.
        assert hello(a.address) != "hello"
        with pytest.raises(ZeroDivisionError):  # the function's error, raised to the caller
            run_inside(b, lambda: 1 // 0)

        assert server.pid in hosts.kill("a")
        assert server.wait(10) == -9 and a.pids() == []
        assert run_inside(b, lambda: hello(a.address)) == "ConnectionRefusedError"
    finally:
        server.kill()
        server.wait()
