"""The env server's pure decisions: env table, reaping, idx mapping, actions, text."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from producers.envserver.envs import (
    UNSUPPORTED,
    ActionError,
    Env,
    Episode,
    WebArenaVerb,
    catalog_order,
    describe,
    ending,
    extract_action,
    idle_envs,
    next_env_idx,
    observation_text,
    render_tree,
    running,
    task_for_idx,
    to_action,
)
from webgym_common.agent.actions import format_action
from webgym_common.agent.marks import parse_marks
from webgym_common.events import (
    EpisodeCompleted,
    EpisodeScored,
    Mark,
    StepObserved,
    Task,
    Viewport,
)

PLAYGROUND = (Path(__file__).parents[1] / "browser" / "playground.aria.txt").read_text()
MARKS = {m.index: m for m in [
    Mark(index=1, ref="e4", role="link", name="Playground", x=0, y=0, width=1, height=1),
    Mark(index=2, ref="e15", role="textbox", name="Echo", x=0, y=0, width=1, height=1),
]}


def task(task_id: str, name: str = "do it") -> Task:
    return Task(task_id=task_id, task_name=name, domain="sandbox-shop", subdomain="s",
                website="{sandbox}/shop/", difficulty=1)


def obs(step: int = 0, **kw) -> StepObserved:
    return StepObserved(episode_id="e", task_id="t", step=step, url="http://x/",
                        title="Shop", viewport=Viewport(width=1, height=1), **kw)


def completed(termination: str = "answer") -> EpisodeCompleted:
    now = datetime.now(UTC)
    return EpisodeCompleted(episode_id="e", task_id="t", iteration=0, split="train", steps=2,
                            termination=termination, started_at=now)


def scored(reward: float) -> EpisodeScored:
    return EpisodeScored(episode_id="e", task_id="t", domain="d", iteration=0, split="train",
                         reward=reward, evaluation="[rules] matched", is_blocked=False,
                         crashed=False, submit=True, termination="answer", steps=2,
                         evaluator_version="rules-v1", policy_version="envserver")


# -- env table and reaping ---------------------------------------------------------------


def test_env_ids_are_never_reused() -> None:
    assert next_env_idx({}, -1) == 0
    assert next_env_idx({0: Env(0, 0.0), 1: Env(1, 0.0)}, 1) == 2
    assert next_env_idx({}, 7) == 8  # 0..7 closed or reaped: still 8


def test_idle_envs_are_reaped_unless_serving() -> None:
    envs = [Env(0, 100.0), Env(1, 50.0), Env(2, 0.0, busy=True)]
    assert idle_envs(envs, now=110.0, idle_timeout_s=30.0) == [1]
    assert idle_envs(envs, now=200.0, idle_timeout_s=30.0) == [0, 1]


def test_only_an_episode_that_has_not_ended_is_cancelled() -> None:
    episode = Episode("e", task("t"))
    assert not running(None) and running(episode)
    episode.take(completed())
    assert not running(episode)


def test_episode_keeps_the_first_of_a_replayed_step() -> None:
    episode = Episode("e", task("t", "catalog text"))
    first = obs(0, instruction="the page's own words")
    assert episode.take(first) and not episode.take(obs(0, instruction="again"))
    assert episode.observations[0] is first and episode.current is first
    assert episode.intent == "the page's own words"
    assert episode.take(scored(1.0)) and not episode.take(scored(0.0))


# -- idx -> task -------------------------------------------------------------------------


def test_idx_picks_the_catalog_sorted_by_task_id() -> None:
    tasks = catalog_order([task("wiki-001"), task("shop-002"), task("shop-001")])
    assert [task_for_idx(tasks, i).task_id for i in range(3)] == [
        "shop-001", "shop-002", "wiki-001"]
    with pytest.raises(IndexError, match="idx 0..2"):
        task_for_idx(tasks, 3)
    with pytest.raises(IndexError):
        task_for_idx(tasks, -1)


# -- actions -----------------------------------------------------------------------------


def test_the_action_is_the_first_triple_backtick_block() -> None:
    reply = ("Let's think step-by-step. The search box is [2]. In summary, the next action I "
             "will perform is ```type [2] [blue shoes] [1]``` and then ```click [1]```")
    assert extract_action(reply) == "type [2] [blue shoes] [1]"
    with pytest.raises(ActionError, match="no ```action``` block"):
        extract_action("click [1]")
    with pytest.raises(ActionError, match="empty"):
        extract_action("``` ```")


@pytest.mark.parametrize(("webarena", "ours"), [
    ("click [1]", "Click [1]"),
    ("CLICK [2]", "Click [2]"),
    ("click[1]", "Click [1]"),
    ("hover [1]", "Hover [1]"),
    ("type [2] [blue shoes] [1]", "Type [2] [blue shoes]"),
    ("type [2] [blue shoes]", "Type [2] [blue shoes]"),
    ("type [2] [a [bracketed] text] [1]", "Type [2] [a [bracketed] text]"),
    ("scroll [down]", "Scroll [WINDOW] [down]"),
    ("scroll [direction=up]", "Scroll [WINDOW] [up]"),
    ("goto [http://127.0.0.1:1/wiki/]", "Visit [http://127.0.0.1:1/wiki/]"),
    ("go_back", "GoBack"),
    ("stop [$335.99]", "ANSWER [$335.99]"),
    ("stop [N/A]", "ANSWER [N/A]"),
    ("stop", "ANSWER []"),
])
def test_webarena_actions_map_onto_ours(webarena: str, ours: str) -> None:
    action = to_action(webarena, MARKS)
    assert action.valid and format_action(action) == ours


@pytest.mark.parametrize("verb", sorted(UNSUPPORTED))
def test_what_the_grammar_cannot_express_is_an_explicit_error(verb: WebArenaVerb) -> None:
    with pytest.raises(ActionError, match="Unsupported action"):
        to_action(f"{verb.value} [Control+a]", MARKS)


@pytest.mark.parametrize(("webarena", "why"), [
    ("type [2] [text] [0]", "always presses Enter"),
    ("click [9]", "No element \\[9\\]"),
    ("click [abc]", "expected a number"),
    ("click", "takes one"),
    ("scroll [left]", "scroll \\[up\\]"),
    ("jump [3]", "unknown verb 'jump'"),
    ("type [2]", "type \\[id\\] \\[text\\]"),
    ("goto []", "goto \\[url\\]"),
    ("[3]", "no action name"),
])
def test_bad_actions_say_what_is_wrong(webarena: str, why: str) -> None:
    with pytest.raises(ActionError, match=why):
        to_action(webarena, MARKS)


def test_previous_action_names_the_element_as_webarena_does() -> None:
    action = to_action("click [1]", MARKS)
    assert describe("click [1]", action, MARKS) == "click [1] where [1] is link 'Playground'"
    assert describe("go_back", to_action("go_back", MARKS), MARKS) == "go_back"


# -- observation text --------------------------------------------------------------------


def test_tree_shows_the_mark_numbers_the_actions_use() -> None:
    marks = parse_marks(PLAYGROUND, 300)
    text = render_tree(PLAYGROUND, marks)
    lines = text.splitlines()
    by_name = {m.name: m.index for m in marks}
    # unnamed structure is left out and its children move up (banner > navigation > link)
    assert f"\t\t[{by_name['Playground']}] link 'Playground'" in lines
    assert "\tnavigation 'Sandbox action playground navigation'" in lines
    assert f"[{by_name['Echo']}] textbox 'Echo'" in text
    assert "heading 'Action playground' level: 1" in text  # named, no number
    assert "textbox 'Start here' focused: True" in text
    assert "StaticText 'Sandbox action playground'" in text  # a text node
    assert "StaticText 'Button clicked 0 times'" in text  # an unnamed node's inline text
    assert "/url" not in text and "ref=" not in text and "box=" not in text
    numbered = [line for line in lines if line.lstrip("\t").startswith("[")]
    assert len(numbered) == len(marks)  # every mark once, nothing else numbered


def test_yaml_quoted_lines_read_unquoted() -> None:
    tree = """- 'link "Price: low" [ref=e5] [box=1,1,5,5]'\n- text: 'a: b'"""
    marks = [Mark(index=1, ref="e5", role="link", name="Price: low", x=1, y=1, width=5,
                  height=5)]
    assert render_tree(tree, marks) == "\t[1] link 'Price: low'\n\tStaticText 'a: b'"


def test_observation_text_in_webarena_form() -> None:
    o = obs(1, accessibility_tree='- button "Go" [ref=e1] [box=1,1,5,5]',
            marks=[Mark(index=1, ref="e1", role="button", name="Go", x=1, y=1, width=5,
                        height=5)], error="[1] is covered by <div>")
    text = observation_text(o, "Buy it", "click [1] where [1] is button 'Go'", 1000)
    assert text == ("OBSERVATION:\nRootWebArea 'Shop' focused: True\n\t[1] button 'Go'\n"
                    "URL: http://x/\nOBJECTIVE: Buy it\nPREVIOUS ACTION: click [1] where [1] "
                    "is button 'Go' (failed: [1] is covered by <div>)")
    long = observation_text(obs(0, accessibility_tree="- text: " + "x" * 5000), "t", "None",
                            300)
    assert "... (cut)\nURL:" in long and len(long) < 400


# -- endings -----------------------------------------------------------------------------


def test_every_ending_terminates_and_limits_also_truncate() -> None:
    reward, truncated, info = ending(completed("answer"), scored(1.0))
    assert (reward, truncated, info["termination"]) == (1.0, False, "answer")
    assert info["evaluation"] == "[rules] matched"
    reward, truncated, info = ending(completed("max_steps"), None)
    assert (reward, truncated) == (0.0, True) and "did not come in time" in info["reward_error"]
