"""infra/bootstrap.sh installs the project's venv from the hash-pinned locks only: every pip
install requires the hashes, except the editable install of the project itself, which takes
no dependency and builds without fetching anything."""

from __future__ import annotations

import re

from infra import pinned

BOOTSTRAP = pinned.ROOT / "infra" / "bootstrap.sh"


def commands() -> list[str]:
    """The script's commands, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", BOOTSTRAP.read_text())
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_every_pip_install_requires_hashes_or_installs_only_the_project() -> None:
    lines = commands()
    hashed = 'pip=(.venv/bin/python -m pip install --require-hashes --only-binary :all:)'
    assert hashed in lines
    installs = [line for line in lines if not line.startswith("step ")
                and ("pip install" in line or '"${pip[@]}"' in line)]
    for line in installs:
        if line == hashed or line.startswith('"${pip[@]}"'):
            continue
        assert line == ".venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .", (
            f"an install without hashes: {line}")
    uses = " ".join(line for line in installs if line.startswith('"${pip[@]}"'))
    assert "-r infra/locks/pip.lock" in uses  # pip itself, pinned, first
    assert "-r requirements.lock -r requirements-dev.lock" in uses
    assert uses.index("pip.lock") < uses.index("requirements.lock")


def test_a_changed_lock_reinstalls() -> None:
    text = BOOTSTRAP.read_text()
    assert "LOCKS=(infra/locks/pip.lock requirements.lock requirements-dev.lock)" in text
    assert 'cat pyproject.toml "${LOCKS[@]}" | sha256sum' in text
    for lock in (pinned.PIP_LOCK, pinned.PROJECT_LOCK, pinned.DEV_LOCK):
        assert str(lock.relative_to(pinned.ROOT)) in text
