"""`webgym` itself: the same commands as before, and a light import."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from webgym_cli.main import app

TOP = ["rollout", "run", "curve", "drive", "export", "eval", "monitor", "envserver", "pipeline",
       "infra", "topics", "worker", "sandbox", "tasks", "reprocess", "demos"]
GROUPS = {
    "infra": ["up", "prepare", "status", "down"],
    "topics": ["create", "list"],
    "pipeline": ["up", "down", "status"],
    "worker": ["browser", "policy", "evaluator", "history", "metrics", "replay", "trainer",
               "model-loader"],
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
