"""How Chromium is launched: inside its own sandbox, as an unprivileged user, with a small
environment. Every launcher uses these options (the browser pool, the test and bench
browsers, the MiniWoB++ reference builder).

Chromium's sandbox (a user namespace and a seccomp-bpf filter per renderer) refuses to run
as root, so a root process (a bare machine's `make run`) starts the browser through
`chromium-as-user` beside this module: it hands the user data directory Playwright made to
`browser.sandbox_user` and drops to that user (setpriv) before it execs Chromium. Playwright
adds `--no-sandbox` unless told `chromium_sandbox`; `browser.sandbox = false`
(WEBGYM_BROWSER__SANDBOX=false) is the explicit opt-out, for a container whose seccomp
profile forbids user namespaces (docker compose's default).

The browser's environment is a few locale variables and HOME, never the worker's whole
environment: that holds the object store's and the model server's keys, which a
compromised browser process could otherwise read from its own /proc/self/environ.
"""

from __future__ import annotations

import logging
import os
import pwd
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webgym_common.config import BrowserSettings

log = logging.getLogger(__name__)

AS_USER = Path(__file__).resolve().with_name("chromium-as-user")
# What the browser needs of the environment: where programs are, the locale, the time zone.
KEPT = ("PATH", "LANG", "LANGUAGE", "TZ")
KEPT_PREFIXES = ("LC_",)


class SandboxUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class Launch:
    """Playwright's launch options for one browser."""

    executable_path: str
    chromium_sandbox: bool
    env: dict[str, str]

    def options(self) -> dict[str, Any]:
        return {"executable_path": self.executable_path,
                "chromium_sandbox": self.chromium_sandbox, "env": self.env}


def browser_env(environ: Mapping[str, str], home: str) -> dict[str, str]:
    """The browser's environment: the kept variables of `environ`, and HOME."""
    kept = {k: v for k, v in environ.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
    return {**kept, "HOME": home}


def plan(cfg: BrowserSettings, euid: int, environ: Mapping[str, str],
         home_of: Callable[[str], str] | None = None) -> Launch:
    """How to launch Chromium as a process with effective uid `euid` and `environ`.

    `home_of(user)` gives a user's home directory (the password database by default); it
    raises KeyError for a user that does not exist."""
    home_of = home_of or home_dir
    exe = str(cfg.executable_path)
    if not cfg.sandbox:
        return Launch(exe, False, browser_env(environ, environ.get("HOME", "/")))
    if euid != 0:
        return Launch(exe, True, browser_env(environ, environ.get("HOME", "/")))
    try:
        home = home_of(cfg.sandbox_user)
    except KeyError:
        raise SandboxUnavailable(
            f"running as root, Chromium's sandbox needs the unprivileged user "
            f"{cfg.sandbox_user!r}, which does not exist: run infra/bootstrap.sh (it creates "
            f"it), or set WEBGYM_BROWSER__SANDBOX_USER to another one; "
            f"WEBGYM_BROWSER__SANDBOX=false runs Chromium unsandboxed") from None
    env = {**browser_env(environ, home),
           "WEBGYM_CHROMIUM": exe, "WEBGYM_CHROMIUM_USER": cfg.sandbox_user}
    return Launch(str(AS_USER), True, env)


def launch_failure(message: str) -> str | None:
    """What to do when Chromium could not start its sandbox (its own words say so), else
    None. As an unprivileged user the sandbox needs user namespaces, which some kernels
    (Ubuntu's AppArmor default, a container's seccomp profile) refuse."""
    if "No usable sandbox" not in message:
        return None
    return ("Chromium found no usable sandbox: this machine does not let an unprivileged user "
            "make user namespaces (see sysctl kernel.unprivileged_userns_clone and, on Ubuntu, "
            "kernel.apparmor_restrict_unprivileged_userns, or the container's seccomp "
            "profile). Allow them, or set WEBGYM_BROWSER__SANDBOX=false to run Chromium "
            "without its sandbox")


def home_dir(user: str) -> str:
    return pwd.getpwnam(user).pw_dir


def launch_options(cfg: BrowserSettings) -> dict[str, Any]:
    """Playwright's launch options for this process (its uid and environment)."""
    launch = plan(cfg, os.geteuid(), os.environ)
    if not launch.chromium_sandbox:
        log.warning("Chromium runs without its sandbox (browser.sandbox = false)")
    return launch.options()
