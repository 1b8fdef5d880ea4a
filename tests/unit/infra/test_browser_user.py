"""The user a root pipeline runs Chromium as (infra/browser_user.py)."""

from __future__ import annotations

from infra.browser_user import needed, useradd_command
from webgym_common.config import BrowserSettings


def test_made_only_for_root_with_the_sandbox_on_when_missing() -> None:
    on, off = BrowserSettings(), BrowserSettings(sandbox=False)
    assert needed(on, 0, present=False)
    assert not needed(on, 0, present=True)
    assert not needed(on, 1000, present=False)  # an unprivileged process is its own sandbox user
    assert not needed(off, 0, present=False)


def test_a_system_user_without_login() -> None:
    cmd = useradd_command("webgym-browser")
    assert cmd[0] == "useradd" and cmd[-1] == "webgym-browser"
    assert {"--system", "--user-group", "--create-home"} <= set(cmd)
    assert cmd[cmd.index("--shell") + 1] == "/usr/sbin/nologin"
    assert cmd[cmd.index("--home-dir") + 1] == "/var/lib/webgym-browser"
