"""Readers of the compose file and the Dockerfile for the static tests: compose's own
variable substitution and port syntax, depends_on and environment in either form, and the
Dockerfile's instructions."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def as_argv(value: Any) -> list[str]:
    """A compose command/test in either form (string or list) as an argv list."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def depends_on(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """depends_on in long form; the short (list) form means service_started."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: {"condition": "service_started"} for name in deps}
    return {name: (spec or {"condition": "service_started"}) for name, spec in deps.items()}


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def port_bindings(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(host IP, host port) of each published port; ("", ...) when no IP is given (all)."""
    bindings = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            if port.get("published") is not None:
                bindings.append((str(port.get("host_ip") or ""), str(port["published"])))
            continue
        text = interpolate(str(port), {}).split("/")[0]  # defaults of ${WEBGYM_*_PORT:-n}
        if text.startswith("["):  # [v6]:host:container
            ip, _, rest = text[1:].partition("]")
            bindings.append((ip, rest.lstrip(":").split(":")[0]))
            continue
        parts = text.split(":")
        if len(parts) == 1:  # a bare container port: published on a random port of all IPs
            bindings.append(("", ""))
        elif len(parts) == 2:
            bindings.append(("", parts[0]))
        else:
            bindings.append((parts[0], parts[1]))
    return bindings


# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}, $VAR; $$ is a "$".
_VARIABLE = re.compile(r"\$(?:\$|\{(\w+)(?:(:?[-?])([^}]*))?\}|(\w+))")
# Variables that hold a secret or an identity; they may default to nothing at most.
CREDENTIAL = re.compile(r"(USER|PASSWORD|SECRET|KEY|TOKEN)$")


class MissingVariable(ValueError):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's substitution of `${...}` in `text`; MissingVariable for a required one."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        value = env.get(name)
        unset = value is None or (op is not None and op.startswith(":") and value == "")
        if op and op.endswith("?") and unset:
            raise MissingVariable(f"{name}: {arg}")
        if op and op.endswith("-") and unset:
            return arg
        return value or ""

    return _VARIABLE.sub(one, text)


def variables(text: str) -> list[tuple[str, str | None, str]]:
    """(name, operator, argument) of every `${...}` in `text`."""
    return [(m.group(1) or m.group(4), m.group(2), m.group(3) or "")
            for m in _VARIABLE.finditer(text) if m.group(0) != "$$"]


def published_ports(service: dict[str, Any]) -> set[int]:
    """Host ports a service publishes, from short or long port syntax."""
    host_ports: set[int] = set()
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            if port.get("published") is not None:
                host_ports.add(int(str(port["published"]).split("-")[0]))
            continue
        # [ip:]host:container[/proto]; a bare container port publishes nothing fixed.
        parts = interpolate(str(port), {}).split("/")[0].split(":")
        if len(parts) >= 2 and parts[-2]:
            host_ports.add(int(parts[-2].split("-")[0]))
    return host_ports


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with comments dropped and lines joined."""
    instructions: list[tuple[str, str]] = []
    current = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, args = current.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        current = ""
    return instructions


def volume_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Each mounted volume or path (source) and where it is mounted (target)."""
    mounts = {}
    for vol in service.get("volumes") or []:
        if isinstance(vol, dict):
            mounts[str(vol.get("source"))] = str(vol.get("target"))
        else:
            source, target = str(vol).split(":")[:2]
            mounts[source] = target
    return mounts
