"""The evaluator's rules (rules.py): answer normalization and crash detection."""

from __future__ import annotations

from dataclasses import replace

import pytest

from processors.evaluator.rules import answers_match, crash_reason, normalize_answer
from tests.unit.processors.evaluator.builders import episode, step


@pytest.mark.parametrize(("answer", "expected", "match"), [
    ("$335.99", "335.99", True),
    ("USD 1,299.00", "$1299.00", True),
    ("32GB", "32 GB", True),
    ("  APS-C. ", "aps-c", True),
    ("Paris,\tFrance", "paris france", True),
    ("１２ items", "12 items", True),
    ("3.5", "35", False),
    ("$335.99", "$339.99", False),
    ("", "x", False),
    (None, "x", False),
])
def test_answer_normalization(answer: str | None, expected: str, match: bool) -> None:
    assert answers_match(answer, expected) is match


def test_normalized_form() -> None:
    assert normalize_answer("  The PRICE: $1,299.50!  ") == "the price 1299.50"


# -- crash rules -------------------------------------------------------------------------


def test_crash_rules_each_clause() -> None:
    ok = episode()
    assert crash_reason(ok, blocked=False) is None
    assert "browser crashed" in crash_reason(replace(ok, termination="crashed"), False)
    assert "empty" in crash_reason(episode(trajectory=()), False)
    bad_visit = (replace(step(0, action="Visit [notaurl]"), action_url="notaurl"), step(1))
    assert "invalid URL" in crash_reason(episode(steps=1, trajectory=bad_visit), False)
    blank = (replace(step(0), url="about:blank"), step(1, action="ANSWER [$335.99]"))
    assert "not a web page" in crash_reason(episode(steps=1, trajectory=blank), False)
    hole = (step(0), step(1, action=None), step(2, action="ANSWER [$335.99]"))
    assert "dummy (null) action" in crash_reason(episode(steps=2, trajectory=hole), False)
    short = episode(steps=4, termination="timeout", answer=None)
    assert "fewer than 10" in crash_reason(short, blocked=False)
    assert crash_reason(short, blocked=True) is None  # blocked is not crashed
    # Answered early, or ran out a step budget smaller than 10: not crashed.
    assert crash_reason(episode(steps=2), False) is None
    used_budget = episode(steps=4, termination="max_steps", answer=None, max_steps=4)
    assert crash_reason(used_budget, False) is None
