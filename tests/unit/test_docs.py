"""README.md and docs/ name only what exists: links, paths, commands, variables
(devtools.docs_check), and the checks themselves catch what they are for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devtools import cli_lines, docs_check
from webgym_common.config import PROJECT_ROOT


def test_code_fences_are_closed() -> None:
    assert docs_check.fence_problems() == []


def test_relative_links_point_at_files() -> None:
    assert docs_check.link_problems() == []


def test_named_paths_and_modules_exist() -> None:
    assert docs_check.path_problems() == []


def test_webgym_command_lines_parse_against_the_cli() -> None:
    assert docs_check.command_problems() == []


def test_webgym_variables_are_settings_or_read_by_the_code() -> None:
    assert docs_check.variable_problems() == []


def test_the_other_variables_are_read_by_the_code() -> None:
    folders, _ = docs_check.top_level(PROJECT_ROOT)
    sources = [PROJECT_ROOT / "Makefile", *(
        path for folder in folders - {"docs"} for pattern in ("*.py", "*.sh")
        for path in (PROJECT_ROOT / folder).rglob(pattern))]
    read = {name for path in sources for name in re.findall(r"WEBGYM_[A-Z_]*", path.read_text())}
    assert set(docs_check.OTHER_VARIABLES) <= read, set(docs_check.OTHER_VARIABLES) - read
    # none of them is a setting's name
    assert not set(docs_check.OTHER_VARIABLES) & docs_check.setting_variables()


@pytest.mark.parametrize(("line", "problem"), [
    ("webgym run … --eval-limit 10", "No such option: --eval-limit"),
    ("WEBGYM_X=1 .venv/bin/webgym export --iteration 0 extra  # why", "unexpected arguments"),
    ("webgym infra dwn", "webgym infra dwn: no such command"),
    ("cd /tmp && webgym eval --limit", "'--limit' requires an argument"),
    ("webgym --bad run", "webgym: no option --bad"),
    ("webgym", "no command"),
])
def test_a_bad_command_line_is_reported(line: str, problem: str) -> None:
    [args] = cli_lines.webgym_invocations(line)
    problems = cli_lines.parse_command(args, line).problems
    assert len(problems) == 1 and problem in problems[0], problems


@pytest.mark.parametrize("line", [
    "webgym worker <process>",
    ".venv/bin/webgym -v run --iterations 2 --eval-per-group 1 \\\n  --demos 16",
    "WEBGYM_INFRA__DATA_DIR=/tmp/x webgym reprocess refilter --to-topic t --any-reward > o",
    "webgym drive --tasks environments/tasks/sandbox_tasks.jsonl shop-001 shop-002",
    "webgym tasks load FILE --split SPLIT",
    "webgym curve --out=/tmp/c",
    "webgym reprocess --help",
])
def test_a_good_command_line_parses(line: str) -> None:
    [(_, joined)] = cli_lines.shell_lines(line)
    [args] = cli_lines.webgym_invocations(joined)
    assert cli_lines.parse_command(args, joined).problems == []


def test_each_check_finds_what_it_is_for(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "webgym_common").mkdir()
    (tmp_path / "webgym_common" / "__init__.py").write_text("")
    (tmp_path / "webgym_common" / "leaks.py").write_text("def guard():\n    pass\n")
    (tmp_path / "docs" / "page.md").write_text(
        "[ok](../README.md) [gone](other.md) [web](https://example.com/x.md)\n"
        "`webgym_common/leaks.py` `webgym_common/gone.py` `<data_dir>/metrics/` /tmp/x/y\n"
        "`webgym_common.leaks.guard` `webgym_common.leaks.nothing` `leaks.py` `gone.py`\n"
        "`webgym_common/leaks.guard` `webgym_common/leaks.nope`\n"
        "WEBGYM_POLICY__MODEL WEBGYM_POLICY__NOPE WEBGYM_HOME WEBGYM_TRAINER__*\n"
        "`replay rescore --judge rules` `webgym infra up / status / down`\n"
        "```bash\nwebgym run --eval-limit 10\n```\n"
        "```diff\n+ webgym_common/new.py\n```\n"
        "- a list item:\n\n  ```bash\n  webgym infra dwn\n  ```\n"
        "```\nunclosed\n``` text\n")
    (tmp_path / "README.md").write_text("[docs](docs/page.md)\n")
    found = "\n".join(docs_check.all_problems(tmp_path))
    expected = [
        "docs/page.md:20: text after a closing fence",
        "docs/page.md:16: webgym infra dwn: no such command",
        "docs/page.md:1: link to other.md: no such file",
        "docs/page.md:2: webgym_common/gone.py: no such path",
        "docs/page.md:3: gone.py: no file of that name",
        "docs/page.md:3: webgym_common.leaks.nothing: no such module or name",
        "docs/page.md:4: webgym_common/leaks.nope: no such path",
        "docs/page.md:6: webgym replay: no such command",
        "docs/page.md:8: webgym run: No such option: --eval-limit",
        "docs/page.md:5: WEBGYM_POLICY__NOPE: no such setting or variable",
    ]
    for line in expected:
        assert line in found, found
    assert len(found.splitlines()) == len(expected), found
    assert not re.search(r"new\.py|leaks\.guard|metrics|/tmp|example", found), found
