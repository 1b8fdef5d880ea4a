"""The hostile-pages scenario's pieces that need no stack (pure): where the policy double
injects its Visit, what it replies, and the verdict on what the topics hold."""

from __future__ import annotations

from tests.chaos.hostile import REFUSED_PREFIX, TITLE_TASK, Seen, verdict
from tests.chaos.visit_policy import VisitInjectingPolicy, injection
from tests.factories import sample_event
from webgym_common.agent.actions import ActionKind, parse_action
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    Mark,
    ParsedAction,
    StepObserved,
)
from webgym_common.pagetext import CAPS, cut

TARGET = "http://127.0.0.1:9/chaos-visit-target"
GO = Mark(index=4, ref="e4", role="button", name="Go", x=1, y=2, width=3, height=4)
REFS = [{"action": "Click", "role": "button", "name": "Go"},
        {"action": "Click", "role": "button", "name": "Go"}, {"action": "ANSWER", "text": "x"}]


def observation(eid: str, step: int, **update: object) -> StepObserved:
    obs = sample_event("StepObserved")
    assert isinstance(obs, StepObserved)
    fields = {"episode_id": eid, "step": step, "url": "http://sandbox/shop/", "title": "Shop",
              "marks": [GO], "accessibility_tree": '- button "Go" [ref=e4]',
              "action_effect": None, "error": None, **update}
    return obs.model_copy(update=fields)


def test_each_episode_gets_its_visit_after_its_first_step_and_before_its_answer() -> None:
    seen = [injection(f"train-it0-{i:04d}-shop-012", 4) for i in range(200)]
    assert {i.step for i in seen} == {1, 2, 3}
    assert {i.lenient for i in seen} == {True, False}
    assert injection("train-it0-0000-shop-012", 4) == seen[0]  # by the id alone
    assert {injection(f"e{i}", 2).step for i in range(50)} == {1}


async def test_the_double_replies_visit_once_and_shifts_the_teachers_steps() -> None:
    from processors.policy.policies import TeacherForcingPolicy

    policy = VisitInjectingPolicy(TeacherForcingPolicy(), TARGET)
    for i in range(40):
        eid = f"train-it0-{i:04d}-t"
        ctx = EpisodeContext(episode_id=eid, task_id="t", task_name="go", reference_actions=REFS)
        at = injection(eid, len(REFS))
        kinds = [(await policy.decide(ctx, observation(eid, s))).reply.action.kind
                 for s in range(len(REFS) + 1)]
        assert kinds.count(ActionKind.CLICK) == 2 and kinds[-1] == ActionKind.ANSWER
        assert kinds[at.step] == (ActionKind.VISIT if at.lenient else ActionKind.INVALID)
        injected = await policy.decide(ctx, observation(eid, at.step))
        assert f"Action: Visit [{TARGET}]" in injected.reply.raw
        assert injected.messages is not None  # the prompt it was shown is stored as usual


def episode(eid: str, refs: int, task: str = "shop-012", refused: bool = True,
            **last: object) -> Seen:
    """An episode that answered after its injected Visit (refused, unless told otherwise)."""
    at = injection(eid, refs)
    kind = ActionKind.VISIT if at.lenient else ActionKind.INVALID
    action = parse_action(f"Visit [{TARGET}]", offered_only=not at.lenient)
    chosen = sample_event("ActionChosen")
    assert isinstance(chosen, ActionChosen) and isinstance(action, ParsedAction)
    chosen = chosen.model_copy(update={"episode_id": eid, "step": at.step, "action": action,
                                       "raw_response": f"Action: Visit [{TARGET}]"})
    assert chosen.action.kind == kind
    error = (REFUSED_PREFIX if at.lenient else "invalid action: ") + "..." if refused else None
    obs = [observation(eid, s, **(last if s == refs else {})) for s in range(refs + 1)]
    obs[at.step + 1] = obs[at.step + 1].model_copy(update={"error": error})
    done = sample_event("EpisodeCompleted")
    assert isinstance(done, EpisodeCompleted)
    done = done.model_copy(update={"episode_id": eid, "termination": "answer",
                                   "final_url": obs[-1].url})
    return Seen({eid: (task, refs)}, [chosen], obs, [done], [])


def merged(*parts: Seen) -> Seen:
    out = Seen()
    for p in parts:
        out.requested |= p.requested
        out.actions += p.actions
        out.observations += p.observations
        out.completions += p.completions
        out.hits += p.hits
    return out


def test_refused_visits_and_cut_hostile_pages_are_clean() -> None:
    title = cut("T" * 10_000_000, CAPS.title)
    url = cut("http://sandbox/hostile/huge-title?q=" + "q" * 1_000_000, CAPS.url)
    seen = merged(*(episode(f"train-it0-{i:04d}-shop-012", 4) for i in range(6)),
                  episode("train-it0-0100-chaos-huge-title", 3, TITLE_TASK))
    for i, o in enumerate(seen.observations):
        if o.episode_id.endswith("huge-title"):
            seen.observations[i] = o.model_copy(update={"title": title, "url": url})
    wrong, notes = verdict(seen, TARGET)
    assert wrong == {}, wrong
    lenient = sum(injection(e, refs).lenient for e, (_, refs) in seen.requested.items())
    assert 0 < lenient < 7
    assert (f"in 7 episodes: {7 - lenient} made Invalid by the parser ({7 - lenient} reported "
            f"so), {lenient} let through as Visit actions ({lenient} refused by the browser "
            "worker); 0 requests reached the target; 0 observations there") in notes[0]
    assert "1 huge-title episodes (1 answered" in notes[1]


def test_a_visit_that_went_through_is_wrong_whichever_way_it_shows() -> None:
    eid = next(f"e{i}-shop-012" for i in range(100) if injection(f"e{i}-shop-012", 4).lenient)
    at_target = episode(eid, 4, url=TARGET)
    assert "at the Visit target" in verdict(at_target, TARGET)[0][eid]
    not_refused = episode(eid, 4, refused=False)
    assert "after the injected Visit" in verdict(not_refused, TARGET)[0][eid]
    hit = merged(episode(eid, 4), Seen(hits=[eid]))
    assert verdict(hit, TARGET)[0][eid] == "the Visit target received a request"
    uninjected = episode(eid, 4)
    uninjected.actions = []
    assert "without its injected Visit" in verdict(uninjected, TARGET)[0][eid]


def test_a_hostile_page_not_cut_or_not_answered_is_wrong() -> None:
    eid = "train-it0-0001-chaos-huge-title"
    uncut = episode(eid, 3, TITLE_TASK)
    assert "not cut" in verdict(uncut, TARGET)[0][eid]
    crashed = episode(eid, 3, TITLE_TASK)
    crashed.completions = [crashed.completions[0].model_copy(
        update={"termination": "crashed", "reason": "event too large for Kafka"})]
    assert "did not answer: crashed (event too large" in verdict(crashed, TARGET)[0][eid]
    over = episode("e-shop-012", 4)
    over.observations[0] = over.observations[0].model_copy(update={"title": "T" * 3000})
    assert "title of 3000 characters" in verdict(over, TARGET)[0]["e-shop-012"]
