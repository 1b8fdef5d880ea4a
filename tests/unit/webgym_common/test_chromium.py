"""How Chromium is launched (webgym_common/chromium.py): sandboxed unless told otherwise, as
the unprivileged user when the process is root, with a small environment. The renderers'
sandbox in a real browser: tests/integration/test_chromium_sandbox.py."""

from __future__ import annotations

import os
import stat

import pytest

from webgym_common.chromium import (
    AS_USER,
    SandboxUnavailable,
    browser_env,
    launch_failure,
    plan,
)
from webgym_common.config import BrowserSettings

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
       "HOME": "/root", "WEBGYM_S3__SECRET_KEY": "s3cret", "VLLM_API_KEY": "k",
       "WEBGYM_POLICY__API_KEY": "k2", "AWS_SECRET_ACCESS_KEY": "a"}


def homes(user: str) -> str:
    if user == "webgym-browser":
        return "/var/lib/webgym-browser"
    raise KeyError(user)


def test_root_launches_through_the_wrapper_as_the_sandbox_user() -> None:
    launch = plan(BrowserSettings(), 0, ENV, homes)
    assert launch.chromium_sandbox  # Playwright then adds no --no-sandbox
    assert launch.executable_path == str(AS_USER)
    assert launch.env["WEBGYM_CHROMIUM"] == "/usr/lib/chromium/chromium-headless-shell"
    assert launch.env["WEBGYM_CHROMIUM_USER"] == "webgym-browser"
    assert launch.env["HOME"] == "/var/lib/webgym-browser"


def test_an_unprivileged_process_launches_chromium_itself_sandboxed() -> None:
    launch = plan(BrowserSettings(), 1000, ENV, homes)
    assert launch.chromium_sandbox
    assert launch.executable_path == "/usr/lib/chromium/chromium-headless-shell"
    assert "WEBGYM_CHROMIUM_USER" not in launch.env


@pytest.mark.parametrize("euid", [0, 1000])
def test_no_sandbox_only_when_the_setting_says_so(euid: int) -> None:
    launch = plan(BrowserSettings(sandbox=False), euid, ENV, homes)
    assert not launch.chromium_sandbox
    assert launch.executable_path == "/usr/lib/chromium/chromium-headless-shell"


def test_root_without_the_sandbox_user_is_refused_with_the_way_out() -> None:
    with pytest.raises(SandboxUnavailable, match="bootstrap.sh.*WEBGYM_BROWSER__SANDBOX=false"):
        plan(BrowserSettings(sandbox_user="nobody-here"), 0, ENV, homes)


@pytest.mark.parametrize("euid", [0, 1000])
@pytest.mark.parametrize("sandbox", [True, False])
def test_the_browser_never_gets_the_workers_secrets(euid: int, sandbox: bool) -> None:
    env = plan(BrowserSettings(sandbox=sandbox), euid, ENV, homes).env
    assert not {"WEBGYM_S3__SECRET_KEY", "VLLM_API_KEY", "WEBGYM_POLICY__API_KEY",
                "AWS_SECRET_ACCESS_KEY"} & env.keys()
    assert {"PATH", "LANG", "LC_ALL", "TZ", "HOME"} <= env.keys()


def test_browser_env_keeps_locale_and_path_only() -> None:
    assert browser_env({"PATH": "/bin", "LC_CTYPE": "C", "X": "y"}, "/h") == {
        "PATH": "/bin", "LC_CTYPE": "C", "HOME": "/h"}


def test_the_wrapper_is_executable_and_drops_privileges() -> None:
    assert AS_USER.stat().st_mode & stat.S_IXUSR
    text = AS_USER.read_text()
    assert "setpriv --reuid=" in text and "--no-new-privs" in text
    assert "--bounding-set=-all" in text
    assert os.access(AS_USER, os.X_OK)


def test_a_missing_sandbox_is_explained_other_failures_are_not() -> None:
    hint = launch_failure("[FATAL:zygote_host_impl_linux.cc(128)] No usable sandbox! If you "
                          "are running on Ubuntu 23.10+ ...")
    assert hint is not None
    assert "apparmor_restrict_unprivileged_userns" in hint
    assert "WEBGYM_BROWSER__SANDBOX=false" in hint
    assert launch_failure("Browser closed: some other reason") is None
