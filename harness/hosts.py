"""Hosts on this machine: a network namespace each, joined by a bridge, for tests of several hosts.

Each host is a network namespace with its loopback and one interface (eth0) holding an
address from 198.18.0.0/15 (the benchmarking range, RFC 2544: never routed to anything
real). The bridge lives in a namespace of its own, so the machine's own interfaces, routes
and addresses are never touched, and no host has a route beyond the bridge: whatever runs
in a host can reach the other hosts and nothing else. Cutting a host's link sets its port
on the bridge down (its own interface stays up, as a pulled cable leaves it); restoring it
sets the port up again. `kill` ends every process inside a host at once, as a host that
loses its power would (the processes' ids come from `ip netns pids`: only what was started
inside the host). `close` kills what is left in the hosts and deletes the namespaces, which
takes their interfaces with them. Needs root (CAP_NET_ADMIN) and iproute2's `ip`.

A test's own clients (its Kafka producer, its reads of the topics) reach the hosts only from
inside one: `run_inside` calls a function on a thread of the test's process that has entered
the host's namespace. A network namespace belongs to a thread, not to the process: the
caller's thread and the rest of the process stay where they were, and threads the function
starts (asyncio's executor) are born inside with it.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

NETWORK = ipaddress.ip_network("198.18.0.0/24")  # a slice of 198.18.0.0/15
CLONE_NEWNET = 0x40000000  # setns(2)'s namespace type: a network namespace
T = TypeVar("T")


class HostsUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, or no iproute2)."""


def unavailable() -> str | None:
    """Why hosts cannot be made on this machine, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    return None


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise HostsUnavailable(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Host:
    name: str  # its namespace
    address: str  # eth0's, in NETWORK
    port: str  # its veth end on the bridge

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this host's network namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def pids(self) -> list[int]:
        """The processes inside this host now."""
        return [int(p) for p in ip("netns", "pids", self.name).split()]


def enter(host: Host) -> None:
    """Move the calling thread into the host's network namespace (setns(2))."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/run/netns/{host.name}") as ns:
        if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
            raise HostsUnavailable(f"setns into {host.name}: {os.strerror(ctypes.get_errno())}")


def run_inside(host: Host, fn: Callable[[], T]) -> T:
    """fn() on a new thread inside the host's network namespace; its result, or its
    exception raised here. The calling thread never leaves its own namespace."""
    out: dict[str, T] = {}
    failed: list[BaseException] = []

    def body() -> None:
        try:
            enter(host)
            out["result"] = fn()
        except BaseException as e:  # handed to the caller's thread
            failed.append(e)

    thread = threading.Thread(target=body, name=f"in-{host.name}")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out["result"]


class Hosts:
    """Namespaces named `<prefix>-<name>` on one bridge; made by `add`, removed by `close`."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.switch = f"{prefix}-sw"
        self.hosts: dict[str, Host] = {}
        why = unavailable()
        if why is not None:
            raise HostsUnavailable(why)
        ip("netns", "add", self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")

    def add(self, name: str) -> Host:
        """A new host with the next free address, its link up."""
        index = len(self.hosts) + 1
        host = Host(f"{self.prefix}-{name}", str(NETWORK[index]), f"p{index}")
        ip("netns", "add", host.name)
        ip("-n", host.name, "link", "set", "lo", "up")
        # Made in the host's namespace, one end moved to the switch's: the root namespace
        # never holds either end.
        ip("-n", host.name, "link", "add", "eth0", "type", "veth", "peer", "name", host.port)
        ip("-n", host.name, "link", "set", host.port, "netns", self.switch)
        ip("-n", host.name, "addr", "add", f"{host.address}/{NETWORK.prefixlen}", "dev", "eth0")
        ip("-n", host.name, "link", "set", "eth0", "up")
        ip("-n", self.switch, "link", "set", host.port, "master", "br0")
        ip("-n", self.switch, "link", "set", host.port, "up")
        self.hosts[name] = host
        return host

    def cut(self, name: str) -> None:
        """Pull the host's cable: nothing goes in or out until `restore`."""
        ip("-n", self.switch, "link", "set", self.hosts[name].port, "down")

    def restore(self, name: str) -> None:
        ip("-n", self.switch, "link", "set", self.hosts[name].port, "up")

    def kill(self, name: str) -> list[int]:
        """SIGKILL every process inside the host, as a power cut would; their pids."""
        pids = self.hosts[name].pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def close(self) -> None:
        """Every process inside the hosts killed, every namespace this made gone."""
        for name in [*self.hosts]:
            try:
                self.kill(name)
            except HostsUnavailable:
                pass
        for host in [*self.hosts.values()]:
            subprocess.run(["ip", "netns", "delete", host.name], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "delete", self.switch], capture_output=True, timeout=30)
        self.hosts.clear()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
