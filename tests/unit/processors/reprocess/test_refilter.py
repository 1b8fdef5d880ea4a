"""Refilter's decisions: the first score per episode in range, the replay rules with the
filters given, oldest first."""

from __future__ import annotations

from processors.reprocess.refilter import Filters, candidates, first_scores, sample_key
from tests.unit.scored import scored
from webgym_common.config import load_settings
from webgym_common.events import EpisodeScored, TrajectoryStep
from webgym_common.logrange.bounds import LogRange


def with_prompts(e: EpisodeScored, shas: tuple[str, ...] = ("a", "b", "c")) -> EpisodeScored:
    steps = [TrajectoryStep(step=i, url="http://s/", action_string="Click [1]",
                            raw_response="r", prompt_uri=f"s3://b/p{i}",
                            screenshot_sha256=sha) for i, sha in enumerate(shas)]
    return e.model_copy(update={"trajectory": steps})


def test_first_score_per_episode_within_the_iterations() -> None:
    a1, a2 = scored("a", iteration=1, reward=1.0), scored("a", iteration=1, reward=0.0)
    b = scored("b", iteration=2)
    got = first_scores([a1, b, a2], LogRange(iterations=frozenset({1})))
    assert got == [a1]
    assert [s.episode_id for s in first_scores([a1, b, a2], LogRange())] == ["a", "b"]


def test_filters_are_the_replay_processors_rules() -> None:
    base = load_settings().replay
    win = with_prompts(scored("w", reward=1.0), shas=("a", "a", "c"))  # step 0 = step 1
    lose = with_prompts(scored("l", reward=0.0))
    strict = Filters().replay_settings(base)
    assert [(s.episode_id, k.step) for s, k in candidates([win, lose], strict)] == [
        ("w", 1), ("w", 2)]
    keep_same = Filters(same_screenshot=False).replay_settings(base)
    assert [k.step for _, k in candidates([win], keep_same)] == [0, 1, 2]
    failures = Filters(include_failures=True).replay_settings(base)
    got = candidates([win, lose], failures)
    assert [(s.episode_id, k.step, k.success) for s, k in got][-3:] == [
        ("l", 0, False), ("l", 1, False), ("l", 2, False)]
    test_split = with_prompts(scored("t", reward=1.0, split="test"))
    assert candidates([test_split], strict) == []  # a test episode never trains


def test_the_sample_id_is_the_resume_key() -> None:
    assert sample_key(scored("x")) is None
