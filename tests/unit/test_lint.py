"""The code base stays clean: ruff (the style the README promises), mypy on the shared base and
every process's story file, and import-linter's layer contract (pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

from webgym_common.config import PROJECT_ROOT

# What the type checker must pass on: the shared base and each process's story file.


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_is_clean() -> None:
    result = _run(sys.executable, "-m", "ruff", "check", "--no-cache", str(PROJECT_ROOT))
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = _run(sys.executable, "-m", "mypy")  # the files: [tool.mypy] in pyproject.toml
    assert result.returncode == 0, result.stdout + result.stderr


def test_layer_contract_holds() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = _run(str(lint_imports), "--no-cache", "--no-logo")
    assert result.returncode == 0, result.stdout + result.stderr


MAX_LINES = 400  # a module longer than this holds more than one job: split it by job


def test_no_python_module_is_longer_than_the_limit() -> None:
    tracked = _run("git", "ls-files", "*.py").stdout.split()
    assert tracked, "git ls-files found no Python files"
    long = {name: n for name in tracked
            if (path := PROJECT_ROOT / name).exists()
            and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"
