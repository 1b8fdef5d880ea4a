"""The code base stays ruff clean (the style the README promises)."""

import subprocess
import sys

from webgym_common.config import PROJECT_ROOT


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(PROJECT_ROOT)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
