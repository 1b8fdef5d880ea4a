"""The process registry: its rows name real entry points, real groups and real topics, and
the supervisor, the worker commands and the docs are derived from it."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import typer.main

from infra import pipeline
from webgym_cli.worker import app as worker_app
from webgym_common.config import Settings
from webgym_common.processes import PROCESSES, Process, process_table
from webgym_common.topics import VALUE_TYPES, Group, StateTable, Topic, faust_apps, table_owners

ROOT = Path(__file__).resolve().parents[3]


def test_every_entry_point_is_a_function_of_the_settings_run_as_declared() -> None:
    for spec in PROCESSES.values():
        entry = getattr(importlib.import_module(spec.module), spec.function)
        assert list(inspect.signature(entry).parameters)[0] == "settings", spec.name
        assert inspect.iscoroutinefunction(entry) is spec.asynchronous, spec.name


def test_each_option_overrides_a_setting_or_is_a_keyword_of_the_entry() -> None:
    defaults = Settings()
    for spec in PROCESSES.values():
        keywords = inspect.signature(getattr(importlib.import_module(spec.module),
                                             spec.function)).parameters
        for option in spec.options:
            if option.setting is None:
                assert option.name in keywords, (spec.name, option.name)
            else:
                section, field = option.setting.split(".")
                assert field in type(getattr(defaults, section)).model_fields, option.setting
        if spec.prepare:
            module, function = spec.prepare.split(":")
            assert callable(getattr(importlib.import_module(module), function)), spec.name


def test_groups_are_the_processes_and_faust_apps_are_the_faust_processes() -> None:
    assert {s.group for s in PROCESSES.values() if s.group is not None} == set(Group)
    assert {s.group for s in PROCESSES.values() if s.faust} == set(faust_apps())
    for spec in PROCESSES.values():
        assert set(spec.writes) <= set(VALUE_TYPES), spec.name
        assert not spec.tables or spec.faust and spec.group, spec.name


def test_the_state_tables_belong_to_the_rows_that_declare_them() -> None:
    declared = [(table, (s.group, source)) for s in PROCESSES.values()
                for table, source in s.tables]
    assert dict(declared) == table_owners() and len(declared) == len(StateTable)
    assert table_owners()[StateTable.POLICY_CONTEXTS] == (Group.POLICY, Topic.EPISODES)


def test_the_supervisor_and_the_worker_commands_run_the_registrys_processes() -> None:
    assert list(pipeline.PROCESSES) == [p.value for p in Process]
    assert pipeline.TRAINING == {p.value for p, s in PROCESSES.items() if s.training}
    assert pipeline.OPTIONAL == {p.value: s.opt_in for p, s in PROCESSES.items() if s.optional}
    assert pipeline.OPTIONAL == {"envserver": "envserver.supervised"}
    for name, (module, args) in pipeline.PROCESSES.items():
        assert module == PROCESSES[Process(name)].module and args == ["worker", name]
    commands = typer.main.get_command(worker_app).commands  # type: ignore[attr-defined]
    assert set(commands) == {p.value for p in Process}
    for process, spec in PROCESSES.items():  # each with its row's options
        flags = {o for p in commands[process.value].params for o in p.opts}
        assert flags == {o.flags for o in spec.options}, process


def test_the_architecture_page_shows_the_registrys_process_table() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert process_table() in page, "docs/architecture.md: paste `webgym_common.processes." \
        "process_table()` (python -c 'from webgym_common.processes import process_table; " \
        "print(process_table())')"


def test_an_optional_process_names_a_bool_setting_that_is_off_by_default() -> None:
    optional = [s for s in PROCESSES.values() if s.optional]
    assert optional, "no optional process: the check would be vacuous"
    defaults = Settings()
    for spec in optional:
        assert spec.opt_in is not None and not spec.training, spec.name
        section, field = spec.opt_in.split(".")
        assert getattr(getattr(defaults, section), field) is False, spec.name


def test_the_env_server_is_in_the_registry_with_what_it_reads_and_writes() -> None:
    spec = PROCESSES[Process.ENVSERVER]
    assert spec.entry == "producers.envserver.app:run_envserver" and spec.group is None
    assert {t.value for t in spec.reads} == {
        "tasks", "observations", "episodes.completed", "episodes.scored"}
    assert {t.value for t in spec.writes} == {"episodes", "actions", "control"}
    assert not spec.scalable  # one port: a second one could not bind it
    row = next(ln for ln in process_table().splitlines() if ln.startswith("| `envserver`"))
    assert row.endswith("| opt-in |")
