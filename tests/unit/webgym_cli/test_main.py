"""`webgym` itself: the same commands as before, and a light import."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import typer.main
from typer.testing import CliRunner

from webgym_cli.main import app
from webgym_common.processes import Process

TOP = ["down", "rollout", "run", "curve", "drive", "export", "eval", "monitor", "envserver",
       "pipeline", "cluster",
       "infra", "topics", "worker", "sandbox", "tasks", "reprocess", "demos"]
GROUPS = {
    "infra": ["up", "prepare", "status", "down", "minio-users"],
    "topics": ["create", "list"],
    "pipeline": ["up", "down", "status"],
    "cluster": ["up", "status", "down"],
    "worker": [p.value for p in Process],  # one per row of the process registry
    "sandbox": ["up"],
    "tasks": ["load"],
    "reprocess": ["rescore", "refilter", "export"],
    "demos": ["build"],
}


def listed(output: str) -> list[str]:
    """Command names in a help page's Commands panel, in order."""
    panel = output.split("Commands")[1]
    return [line.split()[1] for line in panel.splitlines() if line.startswith("│ ")]


def test_help_lists_every_command_and_group(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    assert listed(result.output) == TOP
    for group, commands in GROUPS.items():
        result = runner.invoke(app, [group, "--help"])
        assert result.exit_code == 0, result.output
        assert listed(result.output) == commands, group


def test_python_dash_m_runs_the_cli_and_imports_no_pipeline_layer() -> None:
    # Only the command that runs imports what it drives: `--help` stays light.
    code = ("import runpy, sys; sys.argv = ['webgym', '--help']\n"
            "try:\n    runpy.run_module('webgym_cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "layers = ('infra', 'producers', 'processors', 'consumers', 'faust', 'aiokafka')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in layers))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env={"COLUMNS": "200", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert "Usage: webgym" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


def commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every visible command below `group`, by its path."""
    out = []
    for name, sub in getattr(group, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            out += commands(sub, (*path, name)) if hasattr(sub, "commands") else [
                ((*path, name), sub)]
    return out


def test_every_command_has_an_example_using_only_its_own_options() -> None:
    for path, command in commands(typer.main.get_command(app)):
        help_text = command.help or ""
        assert "Example: webgym " + " ".join(path) in help_text, path
        example = help_text.split("Example: ")[1].splitlines()[0]
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        used = {word.split("=")[0] for word in example.split() if word.startswith("--")}
        assert used <= known, (path, used - known)


def test_help_is_plain_and_wrapped_on_a_narrow_terminal() -> None:
    out = subprocess.run([sys.executable, "-m", "webgym_cli", "eval", "--help"],
                         capture_output=True, text=True, env={"COLUMNS": "80", "PATH": ""},
                         timeout=60, check=True).stdout
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert "…" not in out and "WEBGYM_POLICY__EVAL_TEMPERATURE" in out
