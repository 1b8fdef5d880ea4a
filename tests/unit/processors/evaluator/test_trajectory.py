"""Trajectory records (trajectory.py): page excerpts and episodes built from table rows."""

from __future__ import annotations

from datetime import UTC, datetime

from processors.evaluator.trajectory import build_episode, expected_parts, page_excerpt, steps_in
from webgym_common.events import EpisodeCompleted


def test_page_excerpt_drops_refs_and_blank_lines() -> None:
    assert page_excerpt('- link "Buy" [ref=e12] [cursor=pointer]\n\n- text: hi', 100) == (
        '- link "Buy"\n- text: hi')


def test_build_episode_orders_steps_and_knows_what_to_wait_for() -> None:
    done = EpisodeCompleted(episode_id="e", task_id="t", iteration=0, split="test", steps=2,
                            termination="answer", answer="x",
                            started_at=datetime(2026, 1, 1, tzinfo=UTC))
    obs = {s: {"url": f"http://a/{s}", "title": "", "text": "", "screenshot_uri": None,
               "screenshot_sha256": None, "screenshot_format": None} for s in (2, 0, 1)}
    acts = {s: {"action_string": "Wait", "kind": "Wait", "url": None, "valid": True,
                "thought": None, "memory_json": None, "raw_response": ""} for s in (1, 0, 2)}
    ep = build_episode(done, None, obs, acts)
    assert [s.step for s in ep.trajectory] == [0, 1, 2] and ep.submitted
    assert expected_parts(done) == (range(3), range(3))
    assert expected_parts(done.model_copy(update={"termination": "max_steps"})) == (
        range(3), range(2))
    # The episode's records in a table: from 0 through the ANSWER step and any beyond.
    table = {"e/0": {"a": 0}, "e/2": {"a": 2}, "e/3": {"a": 3}, "e/4": {"a": 4}, "f/1": {}}
    assert sorted(steps_in(table, done)) == [0, 2, 3, 4]
