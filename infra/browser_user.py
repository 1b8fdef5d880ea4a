"""The unprivileged user a root pipeline runs Chromium as (browser.sandbox_user): Chromium's
sandbox refuses root (webgym_common/chromium.py). `webgym infra prepare` (so
infra/bootstrap.sh) creates it once: a system user with its own group and home, no login
shell, no password.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from webgym_common.config import BrowserSettings

HOMES = Path("/var/lib")


def exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def needed(cfg: BrowserSettings, euid: int, present: bool) -> bool:
    """Whether to create it: only root launches through it, and only with the sandbox on."""
    return cfg.sandbox and euid == 0 and not present


def useradd_command(user: str) -> list[str]:
    return ["useradd", "--system", "--user-group", "--create-home",
            "--home-dir", str(HOMES / user), "--shell", "/usr/sbin/nologin", user]


def ensure(cfg: BrowserSettings) -> str:
    """Create the user where it is needed; what was done, in words."""
    user = cfg.sandbox_user
    if not needed(cfg, os.geteuid(), exists(user)):
        return f"{user}: nothing to do"
    subprocess.run(useradd_command(user), check=True, capture_output=True, timeout=60)
    return f"{user}: created"
