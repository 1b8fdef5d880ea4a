"""The chaos verdict rules (pure): lost, duplicated, wrong, from what the topics hold."""

from __future__ import annotations

from harness.outcomes import (
    Completion,
    Observed,
    Tally,
    markdown,
    moment,
    tally,
)
from webgym_common.stream.deadletters import Letter

ANSWER = Completion("answer", None)


def clean(n: int = 4) -> Observed:
    eids = [f"train-it0-{i:04d}-shop-012" for i in range(n)]
    return Observed(
        episode_task={e: "shop-012" for e in eids},
        completed={e: [ANSWER] for e in eids},
        scored=dict.fromkeys(eids, 1),
        scored_task={e: "shop-012" for e in eids},
        scored_iteration=dict.fromkeys(eids, 0),
        history={"shop-012": (n, list(eids))},
        metrics_episodes={0: n},
        posts=dict.fromkeys(eids, 1),
        expected_posts={"shop-012": 1},
    )


def test_a_clean_run_has_nothing_lost_duplicated_or_wrong() -> None:
    t = tally("s", clean())
    assert (t.episodes, t.lost, t.duplicated, t.wrong, t.dlq) == (4, 0, 0, 0, 0)
    assert t.clean and not t.notes


def test_an_episode_never_completed_or_never_scored_is_lost() -> None:
    o = clean()
    e0, e1 = sorted(o.episode_task)[:2]
    del o.completed[e0], o.scored[e0], o.scored_task[e0], o.scored_iteration[e0]
    del o.scored[e1], o.scored_task[e1], o.scored_iteration[e1]
    o.history["shop-012"] = (2, sorted(o.scored_task))
    o.metrics_episodes[0] = 2
    t = tally("s", o)
    assert t.lost == 2 and t.wrong == 0
    assert any("never completed" in n for n in t.notes)
    assert any("never scored" in n for n in t.notes)


def test_a_request_named_by_iteration_started_only_counts_as_an_episode() -> None:
    o = clean()
    o.episode_task["train-it0-0009-shop-012"] = "shop-012"
    assert tally("s", o).lost == 1


def test_two_completions_or_two_scores_are_one_duplicated_episode() -> None:
    o = clean()
    e0 = sorted(o.episode_task)[0]
    o.completed[e0].append(Completion("crashed", "worker lost"))
    o.scored[e0] = 2
    t = tally("s", o)
    assert t.duplicated == 1 and "answer/crashed" in " ".join(t.notes)


def test_side_effects_twice_are_wrong_but_fewer_after_an_early_end_are_not() -> None:
    o = clean()
    e0, e1, e2 = sorted(o.episode_task)[:3]
    assert o.posts is not None
    o.posts[e0] = 2  # a re-run post
    o.posts[e1] = 0  # answered without posting: not what the reference actions do
    o.posts[e2] = 0
    o.completed[e2] = [Completion("crashed", "MinIO unreachable")]  # ended early: fine
    t = tally("s", o)
    assert t.wrong == 2 and t.ended_early["crashed"] == 1


def test_the_history_must_count_each_scored_episode_of_its_task_once() -> None:
    o = clean()
    ids = sorted(o.episode_task)
    o.history["shop-012"] = (5, [*ids, ids[0]])  # one counted twice
    assert tally("s", o).wrong == 1
    o.history["shop-012"] = (3, ids[1:])  # one never counted
    assert tally("s", o).wrong == 1


def test_metrics_counting_other_than_the_scored_episodes_are_wrong() -> None:
    o = clean()
    o.metrics_episodes[0] = 3
    assert tally("s", o).wrong == 4


def test_replay_samples_must_be_exactly_the_eligible_steps_republished_ids_are_fine() -> None:
    o = clean()
    e0, e1, e2, e3 = sorted(o.episode_task)
    o.samples_due = {e0: {f"{e0}:0", f"{e0}:1"}, e1: {f"{e1}:0"}, e2: set(), e3: {f"{e3}:0"}}
    o.samples = {e0: [f"{e0}:0", f"{e0}:1", f"{e0}:0"], e1: [f"{e1}:0"], e3: [f"{e3}:0"]}
    t = tally("s", o)
    assert t.wrong == 0 and any("1 re-published under their own id" in n for n in t.notes)
    o.samples[e1] = []  # a sample the killed processor never published
    o.samples[e2] = [f"{e2}:3"]  # a step that is not eligible
    t = tally("s", o)
    assert t.wrong == 2
    assert any(f"{e1}: 1 of 1 samples missing" in n for n in t.notes)
    o.samples_due = None  # no replay processor in the run: nothing to check
    assert tally("s", o).wrong == 0


def test_an_early_end_needs_a_reason() -> None:
    o = clean()
    e0, e1 = sorted(o.episode_task)[:2]
    o.completed[e0] = [Completion("crashed", None)]
    o.completed[e1] = [Completion("max_steps", None)]  # the reason is its name
    o.posts = None
    t = tally("s", o)
    assert t.wrong == 1 and "without a reason" in " ".join(t.notes)
    assert "side effects not checked" in " ".join(t.notes)


def test_rerun_posts_are_reported_apart_from_the_episode_s_own() -> None:
    o = clean()
    o.rerun_posts = {sorted(o.episode_task)[0]: 2}
    t = tally("s", o)
    assert t.wrong == 0 and t.rerun_posts == 2 and "re-sent as re-runs" in t.notes[-1]


def test_observations_published_again_are_reported_and_harm_nothing() -> None:
    o = clean()
    o.resent = {sorted(o.episode_task)[0]: 2}
    t = tally("s", o)
    assert t.clean and "2 observations published again" in t.notes[-1]


def test_dead_letters_are_counted_and_explained() -> None:
    o = clean()
    o.dlq = [Letter("c.observations", 0, 5, "no EpisodeRequested arrived in time", "policy",
                    10, "2026-01-01T00:00:00+00:00")]
    t = tally("s", o)
    assert t.dlq == 1 and not t.clean and "no EpisodeRequested" in t.notes[-1]


def test_moments_are_seeded_and_fall_while_episodes_are_in_flight() -> None:
    assert moment("policy", 1, 48, 8) == moment("policy", 1, 48, 8)
    seen = {moment(k, s, 48, 8) for k in ("policy", "browser") for s in range(20)}
    assert len(seen) > 10
    assert all(1 <= m.after_completed <= 32 and 0 <= m.extra_s <= 3 for m in seen)


def test_the_markdown_table_has_one_row_per_scenario_and_the_notes() -> None:
    t = Tally("SIGKILL policy", 48, 1, 0, 0, tally("s", clean()).ended_early, 0, 0, 61.0,
              ["1 never completed: x"])
    text = markdown([t], {"machine": "2 cores"})
    assert "| SIGKILL policy | 48 | 1 | 0 | 0 | 0 | 0 | 0 | 61s |" in text
    assert "- SIGKILL policy: 1 never completed: x" in text and "machine: 2 cores" in text
