"""Compose's merge of several files (`docker compose -f a -f b config`), for the keys the
project's override files use, in Python: the unit tests read the merged services without a
Docker engine or the compose plugin. tests/unit/test_compose_replicas.py compares it with
`docker compose config` where the plugin is installed.

What it follows (as compose v2 does, checked against 2.26):
- each file is read alone, and a service's `extends` (`file:` or the same file) is resolved
  there, against the named file's service read alone (its own `extends` resolved): an
  override file's changes to that service are not part of the base;
- the files are then merged in order: mappings key by key (`environment` and `depends_on` in
  either form), `volumes` by target, other lists replaced;
- `!override` replaces the value beneath it, `!reset` removes it (in a service that
  `extends`, its own `!override` / `!reset` still apply when the files are merged; a base's
  do not);
- `${...}` is substituted last (tests.support.compose_files.interpolate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.compose_files import ROOT, interpolate


@dataclass(frozen=True)
class Override:
    value: Any


@dataclass(frozen=True)
class Reset:
    value: Any


class _TagLoader(yaml.SafeLoader):
    """Keeps compose's `!override` and `!reset` as markers around the value they carry."""


def _construct(marker: type[Override] | type[Reset]) -> Any:
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Override | Reset:
        if isinstance(node, yaml.SequenceNode):
            return marker(loader.construct_sequence(node, deep=True))
        if isinstance(node, yaml.MappingNode):
            return marker(loader.construct_mapping(node, deep=True))
        return marker(loader.construct_scalar(node))  # type: ignore[arg-type]
    return construct


_TagLoader.add_constructor("!override", _construct(Override))
_TagLoader.add_constructor("!reset", _construct(Reset))

_GONE = object()


def read(path: Path) -> dict[str, Any]:
    data = yaml.load(path.read_text(), _TagLoader)  # a SafeLoader subclass
    assert isinstance(data, dict), path
    return data


def _normal(key: str, value: Any) -> Any:
    """environment, depends_on and volumes in the one form the merge works on."""
    if isinstance(value, (Override, Reset)):
        return type(value)(_normal(key, value.value))
    if key == "environment" and isinstance(value, list):
        return dict(v.split("=", 1) if "=" in v else (v, "") for v in value)
    if key == "environment" and isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if key == "depends_on" and isinstance(value, list):
        return {name: {"condition": "service_started"} for name in value}
    if key == "volumes" and isinstance(value, list):
        return {_volume(v)["target"]: _volume(v) for v in value}
    return value


# A volume's `source:target[:mode]`, its source perhaps a `${VAR:?message}` (split on the
# colons outside ${...}; the variable is substituted after the merge).
_UNQUOTED_COLON = re.compile(r":(?![^{]*\})")


def _volume(spec: Any) -> dict[str, Any]:
    if isinstance(spec, dict):
        return dict(spec)
    source, target, *mode = _UNQUOTED_COLON.split(str(spec))
    return {"source": source, "target": target, "read_only": mode == ["ro"]}


def strip(value: Any) -> Any:
    """The value with the markers resolved (a `!reset` is gone)."""
    if isinstance(value, Reset):
        return _GONE
    if isinstance(value, Override):
        return strip(value.value)
    if isinstance(value, dict):
        out = {k: strip(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _GONE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def merge(base: Any, over: Any) -> Any:
    """`over` merged onto `base`; the markers of `over` are kept (strip resolves them)."""
    base = strip(base)
    if isinstance(over, (Override, Reset)) or base is _GONE:
        return over
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = merge(base[key], value) if key in base else value
        return out
    return over


def _service(key_values: dict[str, Any]) -> dict[str, Any]:
    return {k: _normal(k, v) for k, v in key_values.items()}


def resolved_services(path: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """One file's services, read alone, with their `extends` resolved."""
    assert path not in _seen, f"extends cycle: {_seen}"
    raw = {name: _service(svc or {}) for name, svc in (read(path).get("services") or {}).items()}
    out: dict[str, Any] = {}

    def resolve(name: str) -> dict[str, Any]:
        if name in out:
            return dict(out[name])
        svc = dict(raw[name])
        extends = svc.pop("extends", None)
        if extends is not None:
            if isinstance(extends, str):
                extends = {"service": extends}
            if "file" in extends:
                target = (path.parent / extends["file"]).resolve()
                base = resolved_services(target, (*_seen, path))[extends["service"]]
            else:
                base = resolve(extends["service"])
            svc = merge(strip(base), svc)
        out[name] = svc
        return dict(svc)

    for name in raw:
        resolve(name)
    return out


def merged_services(files: list[str], env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The services `docker compose -f files[0] -f files[1] ... config` declares (in this
    module's normal form: environment and depends_on as mappings, volumes by target),
    with `${...}` substituted from `env`. Profiles are not applied: every service is there."""
    services: dict[str, Any] = {}
    for name in files:
        services = merge(services, resolved_services((ROOT / name).resolve()))
    stripped = strip(services)

    def substitute(value: Any) -> Any:
        if isinstance(value, str):
            return interpolate(value, env)
        if isinstance(value, dict):
            return {k: substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [substitute(v) for v in value]
        return value

    result: dict[str, dict[str, Any]] = substitute(stripped)
    return result
