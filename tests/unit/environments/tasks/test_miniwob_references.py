"""The MiniWoB++ references' pure parts: reading utterances, computing answers, the role/name
form of a step, and merging the verified sequences into the task lines (the sequences are
replayed in Chromium and through the pipeline in tests/integration/test_miniwob_references.py).
"""

from __future__ import annotations

import json

import pytest

from environments.tasks import miniwob_parse as parse
from environments.tasks.miniwob_parse import Unsolvable
from environments.tasks.miniwob_references import coverage, dump, reference
from environments.tasks.miniwob_solvers import SOLVERS, Step
from environments.tasks.miniwob_tasks import (
    OOD,
    SUPPORTED,
    all_tasks,
    load_references,
    task,
    with_references,
)
from webgym_common.agent.teacher import resolve_reference_action
from webgym_common.events import Mark, ReferenceAction


def test_quoted_ordinal_and_between() -> None:
    assert parse.quoted('Click on the "okay" button.') == "okay"
    u = 'Enter the username "karrie" and the password "AU" into the text fields'
    assert parse.quoted(u, 1) == "AU"
    assert parse.ordinal("Focus into the 3rd input textbox.") == 2
    assert parse.ordinal("click the 7th search result.") == 6
    assert parse.after("Click button ONE.", "Click button ", ".") == "ONE"
    with pytest.raises(Unsolvable):
        parse.quoted("no quotes here")


def test_buttons_checkboxes_and_case() -> None:
    assert parse.button_sequence("Click button ONE, then click button TWO.") == ["ONE", "TWO"]
    u = "Select nb, 8qiSp3m, pKybC69 and click Submit."
    assert parse.checkbox_labels(u) == ["nb", "8qiSp3m", "pKybC69"]
    assert parse.checkbox_labels("Select HF2 and click Submit.") == ["HF2"]
    assert parse.checkbox_labels("Select nothing and click Submit.") == []
    assert parse.cased('Type "agustina" in all upper case letters', "agustina") == "AGUSTINA"
    assert parse.cased('Type "AbC" in all lower case letters', "AbC") == "abc"


def test_answers_computed_from_the_page() -> None:
    assert parse.arithmetic("3 x 4 = ") == "12"
    assert parse.arithmetic("2 - 9 = ") == "-7"
    assert parse.arithmetic("5 + 0 = ") == "5"
    assert parse.nth_word("Lorem ipsum, dolor. Sit amet ", 1) == "ipsum"
    assert parse.nth_word("Lorem ipsum, dolor. Sit amet ", 3) == "Sit"
    assert parse.is_odd("-3") and not parse.is_odd("-4") and parse.is_odd("7")
    assert parse.results_page(0) == 1 and parse.results_page(6) == 3


def test_movie_search_fields() -> None:
    u = "Search for action movies directed by Bowen from year 1998."
    assert parse.movie_fields(u) == {"genre": "action", "director": "Bowen", "year": "1998"}
    assert [parse.field_of(x) for x in ("Genre:", "Director Name", "Released Date", "Year",
                                        "Movie Genre", "Title")] == [
        "genre", "director", "year", "year", "genre", None]


def test_every_solver_is_for_a_listed_environment() -> None:
    assert set(SOLVERS) <= set(SUPPORTED) | set(OOD)


def _mark(i: int, role: str, name: str) -> Mark:
    return Mark(index=i, ref=f"e{i}", role=role, name=name, x=0, y=0, width=10, height=10)


def test_a_step_is_named_by_role_name_and_nth_and_the_teacher_resolves_it_back() -> None:
    marks = [_mark(1, "button", "Odd"), _mark(2, "button", "Even"), _mark(3, "button", "Odd"),
             _mark(4, "textbox", "")]
    ref = reference(Step("Click", "x"), marks, 2)
    assert ref == ReferenceAction(action="Click", role="button", name="Odd", nth=1)
    assert resolve_reference_action(ref, marks).element == 3
    typed = reference(Step("Type", "x", "hi"), marks, 3)
    assert typed.nth is None and typed.text == "hi"
    assert resolve_reference_action(typed, marks).element == 4


def test_references_merge_into_the_task_lines() -> None:
    tasks = [task("click-test", 0, 1, "train"), task("click-test", 1, 1, "train")]
    refs = {"miniwob-click-test-0": [{"action": "Click", "role": "button", "name": "Click Me!"}],
            "miniwob-click-test-1": []}
    merged = with_references(tasks, refs)
    assert merged[0]["reference_actions"] == refs["miniwob-click-test-0"]
    assert "reference_actions" not in merged[1]  # an empty sequence is none
    assert "reference_actions" not in tasks[0]  # the input is left alone
    assert "reference_actions" not in all_tasks({})[0]


def test_the_file_is_one_task_a_line_and_round_trips() -> None:
    refs = {"b": [{"action": "Type", "role": "textbox", "name": "", "text": "é"}], "a": []}
    text = dump(refs)
    assert json.loads(text) == refs and text.splitlines()[1].startswith('"a"')
    assert len(text.splitlines()) == 4


def test_the_checked_in_references_are_for_listed_tasks_and_end_on_the_page() -> None:
    refs = load_references()
    ids = {t["task_id"] for t in all_tasks({})}
    assert refs and set(refs) <= ids
    for steps in refs.values():
        assert steps and all(s["action"] in ("Click", "Type") for s in steps)
    cov = coverage(all_tasks({}), refs)
    assert cov["click-test"] == "20/20" and cov["click-option"] == "60/60"
    assert sum(not c.startswith("0/") for c in cov.values()) >= 28, cov  # environments
