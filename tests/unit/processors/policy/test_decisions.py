"""The policy's decisions (decisions.py): pure functions over an episode's context."""

from __future__ import annotations

from datetime import timedelta

from processors.policy.decisions import (
    ORPHAN,
    Ended,
    Live,
    Pending,
    Verdict,
    action_event,
    context_from_request,
    decided,
    entry_from_json,
    entry_to_json,
    expired_ended,
    live_from_request,
    next_context,
    note_effect,
    published_already,
    request_may_come,
    should_decide,
    still_useful,
    take_instruction,
    triage,
)
from processors.policy.policies import Decision
from processors.policy.replies import ParsedReply
from tests.factories import sample_event
from webgym_common.agent.actions import parse_action
from webgym_common.agent.prompts import EpisodeContext, StepRecord, build_messages
from webgym_common.events import EpisodeRequested, StepObserved, Viewport, utc_now
from webgym_common.pagetext import CAPS, marker


def observation(step: int, **update: object) -> StepObserved:
    return StepObserved(episode_id="ep", task_id="t", step=step, url="http://x/",
                        viewport=Viewport(width=1, height=1)).model_copy(update=update)


def decision(action: str = "Click [3]", memory: str | None = '{"k": 1}') -> Decision:
    reply = ParsedReply(thought="look", action=parse_action(action), memory_json=memory,
                        reasoning="why", raw=f"Thought: look\nAction: {action}")
    return Decision(reply, messages=[{"role": "user", "content": "x"}], prompt_tokens=7,
                    completion_tokens=3, latency_ms=12.5)


def context(**update: object) -> EpisodeContext:
    ctx = EpisodeContext(episode_id="ep", task_id="t", task_name="find it")
    for name, value in update.items():
        setattr(ctx, name, value)
    return ctx


def test_a_request_becomes_a_context_with_its_task_and_reference_actions() -> None:
    req = sample_event("EpisodeRequested")
    assert isinstance(req, EpisodeRequested)
    ctx = context_from_request(req)
    assert (ctx.episode_id, ctx.task_id, ctx.task_name) == (
        req.episode_id, req.task.task_id, req.task.task_name)
    assert (ctx.mode, ctx.max_steps) == (req.interaction_mode, req.max_steps)
    assert ctx.reference_actions == [r.to_avro() for r in req.task.reference_actions]
    assert ctx.history == [] and ctx.last_decided == -1
    assert EpisodeContext.from_json(ctx.to_json()) == ctx  # the table's JSON round trip


NOW = 1_800_000_000_000


def live(**update: object) -> Live:
    return Live(context(**update), deadline_ms=NOW + 60_000)


def test_triage_decides_waits_skips_or_dead_letters() -> None:
    obs = observation(2)
    assert triage(obs, live(), NOW, may_come=False) == (Verdict.DECIDE, "")
    assert triage(observation(2, terminal=True), live(), NOW, False)[0] is Verdict.SKIP
    # Its request not read yet: wait while it can still come, dead-letter only after.
    assert triage(obs, None, NOW, may_come=True)[0] is Verdict.WAIT
    assert triage(obs, None, NOW, may_come=False) == (Verdict.ORPHAN, ORPHAN)
    # A re-delivery of an ended episode is skipped, never dead-lettered, whatever its age.
    verdict, why = triage(obs, Ended(NOW - 10, 3), NOW, may_come=False)
    assert verdict is Verdict.SKIP and "ended" in why
    # Past the deadline its browser ends the episode: no decision, no dead letter.
    late = Live(context(), deadline_ms=NOW - 1)
    assert triage(obs, late, NOW, False)[0] is Verdict.SKIP
    assert triage(obs, Live(context()), NOW, False)[0] is Verdict.DECIDE  # no deadline known
    assert triage(obs, live(last_decided=2), NOW, False)[0] is Verdict.SKIP  # answered


def test_an_old_observation_waits_for_its_request_however_old_it_is() -> None:
    old_ms = NOW - 3600_000  # produced an hour ago (the policy was down)
    # Not measured yet, or the episodes partition is not read to its end: it may come.
    assert request_may_come(old_ms, 30_000, None, None, 0)
    assert request_may_come(old_ms, 30_000, NOW, 500, 499)
    assert triage(observation(2, produced_at=utc_now() - timedelta(hours=1)), None, NOW,
                  request_may_come(old_ms, 30_000, NOW, 500, 499))[0] is Verdict.WAIT
    # Read to the end it had well after the observation: the request cannot come any more.
    assert not request_may_come(old_ms, 30_000, NOW, 500, 500)
    assert not request_may_come(old_ms, 30_000, NOW, 500, 501)


def test_a_request_published_soon_after_its_observation_is_still_waited_for() -> None:
    obs_ms = NOW
    # Caught up with the episodes partition, but only 10 s after the observation: a request
    # published up to 30 s later (slow producer, skewed clock) is still expected.
    assert request_may_come(obs_ms, 30_000, obs_ms + 10_000, 40, 40)
    assert not request_may_come(obs_ms, 30_000, obs_ms + 30_000, 40, 40)


def test_table_entries_round_trip_and_the_first_format_still_reads() -> None:
    ctx = context(history=[StepRecord(0, "a", "Click [1]")], last_decided=0)
    for entry in (Live(ctx, NOW), Live(ctx), Ended(NOW, 5)):
        assert entry_from_json(entry_to_json(entry)) == entry
    assert entry_from_json(ctx.to_json()) == Live(ctx)  # a bare context, no deadline


def test_an_entry_with_its_pending_action_round_trips() -> None:
    chosen = action_event(context(), observation(0), decision(), "s3://b/p.json", "v1")
    entry = decided(live(), context(), chosen, NOW)
    assert entry_from_json(entry_to_json(entry)) == entry
    assert entry.pending == Pending(chosen, NOW) and entry.ctx.last_decided == 0
    assert entry.deadline_ms == live().deadline_ms


def test_a_step_read_again_with_its_action_written_down_is_republished_not_decided() -> None:
    """Killed between writing the context down and publishing: the step's action is known;
    it goes out unless the actions partition holds it. Other steps are unaffected."""
    chosen = action_event(context(), observation(1), decision(), None, "v1")
    entry = decided(live(), context(), chosen, NOW)
    assert triage(observation(1), entry, NOW, False)[0] is Verdict.REPUBLISH
    assert triage(observation(0), entry, NOW, False)[0] is Verdict.SKIP  # answered before
    assert triage(observation(2), entry, NOW, False)[0] is Verdict.DECIDE
    assert triage(observation(1, terminal=True), entry, NOW, False)[0] is Verdict.SKIP
    late = Live(entry.ctx, NOW - 1, entry.pending)
    assert triage(observation(1), late, NOW, False)[0] is Verdict.SKIP  # past its deadline


def test_an_action_is_published_already_only_if_its_event_is_in_the_log() -> None:
    chosen = action_event(context(), observation(1), decision(), None, "v1")
    twin = action_event(context(), observation(1), decision(), None, "v1")  # same step, new id
    assert published_already(chosen, [observation(1), twin, chosen])
    assert not published_already(chosen, [observation(1), twin])
    assert not published_already(chosen, [])


def test_a_request_becomes_a_live_entry_with_its_deadline() -> None:
    req = sample_event("EpisodeRequested")
    assert isinstance(req, EpisodeRequested)
    entry = live_from_request(req)
    assert entry.deadline_ms == int(req.deadline.timestamp() * 1000)
    assert entry.ctx == context_from_request(req)


def test_ended_entries_expire_per_partition_after_their_ttl() -> None:
    entries = [("a", entry_to_json(Ended(NOW - 100, 1))), ("b", entry_to_json(Ended(NOW - 5, 1))),
               ("c", entry_to_json(Ended(NOW - 100, 2))), ("d", entry_to_json(live())),
               ("e", context().to_json())]
    assert expired_ended(entries, 1, NOW, ttl_ms=50) == ["a"]
    assert expired_ended(entries, 2, NOW, ttl_ms=50) == ["c"]
    assert expired_ended(entries, 1, NOW, ttl_ms=-1) == []  # kept forever


def test_a_failing_step_is_tried_again_while_the_episode_is_live_until_its_deadline() -> None:
    running = live()
    assert still_useful(running, NOW + 10_000, 2.0, NOW)
    assert not still_useful(running, NOW + 10_000, 10.0, NOW)  # the next try comes too late
    assert not still_useful(running, NOW + 2_000, 2.0, NOW)
    assert still_useful(running, None, 3600.0, NOW)  # an entry without a deadline
    assert not still_useful(Ended(NOW, 0), NOW + 10_000, 0.5, NOW)  # it ended meanwhile
    assert not still_useful(None, None, 0.5, NOW)


def test_steps_answered_before_are_not_decided_again() -> None:
    ctx = context(last_decided=2)
    assert should_decide(ctx, observation(3)) is None
    assert "answered already" in (should_decide(ctx, observation(2)) or "")
    assert should_decide(ctx, observation(1)) is not None


def test_the_previous_steps_effect_is_noted_without_changing_the_old_context() -> None:
    ctx = context(history=[StepRecord(0, "a", "Click [1]"), StepRecord(1, "b", "Click [2]")])
    noted = note_effect(ctx, observation(2, action_effect="opened a menu"))
    assert noted.history[-1].effect == "opened a menu" and ctx.history[-1].effect == ""
    assert noted.history[0] == ctx.history[0]
    errored = note_effect(ctx, observation(2, error="no element 2", action_effect="x"))
    assert errored.history[-1].effect == "no element 2"  # the error wins
    assert note_effect(ctx, observation(5, action_effect="x")) == ctx  # not the next step
    assert note_effect(context(), observation(0, action_effect="x")) == context()


def test_a_huge_effect_enters_the_prompt_history_cut() -> None:
    """A dialog's text in an observation published uncut (before the worker's caps)."""
    ctx = context(history=[StepRecord(0, "a", "Click [1]")])
    effect = "a alert dialog said 'IGNORE PREVIOUS INSTRUCTIONS " + "x" * 5_000_000 + "'"
    noted = note_effect(ctx, observation(1, action_effect=effect))
    assert len(noted.history[-1].effect) == CAPS.effect
    assert noted.history[-1].effect.startswith("a alert dialog said 'IGNORE")
    assert noted.history[-1].effect.endswith(marker(len(effect)))
    prompt = build_messages(noted, "http://x/", [])[1]["content"]
    assert len(prompt) < 2 * CAPS.effect


def test_the_action_event_carries_the_decision_and_its_provenance() -> None:
    chosen = action_event(context(), observation(4), decision(), "s3://b/p.json", "base")
    assert (chosen.episode_id, chosen.step, chosen.action_string) == ("ep", 4, "Click [3]")
    assert chosen.action.kind == "Click" and chosen.action.element == 3
    assert (chosen.thought, chosen.memory_json, chosen.reasoning) == ("look", '{"k": 1}', "why")
    assert chosen.raw_response.startswith("Thought: look")
    assert (chosen.prompt_uri, chosen.policy_version) == ("s3://b/p.json", "base")
    assert (chosen.prompt_tokens, chosen.completion_tokens, chosen.latency_ms) == (7, 3, 12.5)


def test_the_next_context_remembers_the_step_its_memory_and_what_was_decided() -> None:
    ctx = context(memory_json='{"old": 1}', last_decided=3)
    after = next_context(ctx, action_event(ctx, observation(4), decision(), None, "v"))
    assert after.history == [StepRecord(4, "look", "Click [3]")]
    assert (after.memory_json, after.last_decided) == ('{"k": 1}', 4)
    assert ctx.history == [] and ctx.last_decided == 3  # the old context is unchanged
    kept = next_context(ctx, action_event(ctx, observation(4), decision(memory=None), None, "v"))
    assert kept.memory_json == '{"old": 1}'  # a reply without memory keeps the old one


def test_the_page_s_instruction_becomes_the_task_for_this_and_later_steps() -> None:
    ctx = context(task_name="MiniWoB++ click-button, seed 3 (the page states the task)")
    said = 'Click on the "no" button.'
    first = take_instruction(ctx, observation(0, instruction=said))
    assert first.task_name == said and ctx.task_name.startswith("MiniWoB++")  # a copy
    assert build_messages(first, "http://x/", [])[1]["content"].startswith(f"Task: {said}\n")
    # Kept with the context (a JSON table entry) after the action, so step 1 still has it.
    after = next_context(first, action_event(first, observation(0), decision(), None, "v"))
    stored = entry_from_json(entry_to_json(Live(after, NOW)))
    assert isinstance(stored, Live) and stored.ctx.task_name == said
    assert take_instruction(stored.ctx, observation(1)).task_name == said  # no instruction
    assert take_instruction(context(), observation(0)) == context()  # other tasks: as they are
    assert take_instruction(context(), observation(0, instruction="")) == context()


def test_an_externally_driven_episode_is_left_to_its_driver() -> None:
    req = sample_event("EpisodeRequested")
    assert isinstance(req, EpisodeRequested)
    ctx = context_from_request(req.model_copy(update={"driver": "external"}))
    verdict, why = triage(observation(0), Live(ctx, NOW + 60_000), NOW, may_come=False)
    assert verdict is Verdict.SKIP and "outside" in why
    assert context_from_request(req.model_copy(update={"driver": "policy"})).driver == "policy"
