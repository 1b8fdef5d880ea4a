"""Hosts on this machine: a network namespace each, joined by a bridge, for tests of several hosts.

Each host is a network namespace with its loopback and one interface (eth0) holding an
address from 198.18.0.0/15 (the benchmarking range, RFC 2544: never routed to anything
real). The bridge lives in a namespace of its own, so the machine's own interfaces, routes
and addresses are never touched, and no host has a route beyond the bridge: whatever runs
in a host can reach the other hosts and nothing else. Cutting a host's link sets its port
on the bridge down (its own interface stays up, as a pulled cable leaves it); restoring it
sets the port up again. `close` deletes the namespaces, which takes their interfaces with
them. Needs root (CAP_NET_ADMIN) and iproute2's `ip`.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

NETWORK = ipaddress.ip_network("198.18.0.0/24")  # a slice of 198.18.0.0/15


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

    def close(self) -> None:
        """Every namespace this made, gone (processes still inside keep theirs until they end)."""
        for host in [*self.hosts.values()]:
            subprocess.run(["ip", "netns", "delete", host.name], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "delete", self.switch], capture_output=True, timeout=30)
        self.hosts.clear()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
