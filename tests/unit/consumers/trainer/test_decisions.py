"""The trainer's fold and its next run (consumers/trainer/decisions.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

from aiokafka import TopicPartition

from consumers.trainer.decisions import (
    POOL_END,
    TrainerState,
    already_published,
    caught_up,
    control_run,
    fold,
    next_run,
    passthrough,
    pending_iteration,
    steps_after_warm_start,
    trained_through,
    trained_version,
)
from consumers.trainer.llamafactory import run_id
from tests.factories import sample_event
from webgym_common.choices import TrainMode
from webgym_common.config import Settings
from webgym_common.events import (
    ChatMessage,
    Event,
    IterationClosed,
    ModelVersion,
    ReplaySample,
    Task,
    TrainingProgress,
)
from webgym_common.stream.bus import Received

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MODEL = "webgym-policy"
_offsets = count()


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def task(task_id: str, split: str, answer: str) -> Task:
    return Task.model_validate({
        **sample_event("Task").model_dump(), "task_id": task_id, "split": split,
        "environment": None, "extra_json": None,
        "reference_actions": [{"action": "ANSWER", "text": answer}]})


# "t" may train; "twin" is a train task whose solution is the held-out "held"'s.
CATALOG = (task("t", "train", "a"), task("held", "test", "b"), task("twin", "train", "b"))


def sample(sid: str, iteration: int = 0, ms: int = 0, version: str = "base",
           success: bool = True, split: str = "train", task_id: str = "t") -> ReplaySample:
    return ReplaySample(
        sample_id=sid, episode_id=sid.split(":")[0], task_id=task_id, step=0,
        messages=[ChatMessage(role="user", content="go")], response="click(1)",
        reward=1.0 if success else 0.0, iteration=iteration, policy_version=version,
        success=success, split=split, produced_at=at(ms))


def closed(iteration: int, split: str = "train") -> IterationClosed:
    return IterationClosed(iteration=iteration, split=split, requested=1,
                           completed=1, crashed=0, blocked=0, cancelled=0)


def version(n: int, iterations: list[int], run: str = "", model: str = MODEL,
            metrics: dict[str, float] | None = None, uri: str = "") -> ModelVersion:
    return ModelVersion(model_name=model, version=n, checkpoint_uri=uri or f"s3://b/v{n}",
                        base_model="/m", trained_on_iterations=iterations, run_id=run or f"r{n}",
                        parent_version=n - 1, metrics=metrics or {}, produced_at=at(10_000 * n),
                        file_sha256={"a.json": "cd" * 32})


def received(event: Event, partition: int = 0) -> Received:
    return Received("topic", partition, next(_offsets), None, event, 0)


def state_of(*events: Event) -> TrainerState:
    state = TrainerState(MODEL)
    for e in (*CATALOG, *events):
        fold(state, received(e))
    return state


def settings(**trainer: Any) -> Settings:
    replay = trainer.pop("replay", {})
    return Settings(trainer=trainer, replay={"samples_per_run": 100, **replay})


def test_fold_first_copy_wins_and_other_models_are_ignored() -> None:
    first, again = sample("e1:0", ms=1), sample("e1:0", ms=99)
    state = state_of(first, again, closed(0), closed(0), version(1, [0]),
                     version(1, [5], model="other"))
    assert state.samples["e1:0"].sample is first
    assert list(state.closed) == [0]
    assert state.versions[1].trained_on_iterations == [0]
    assert last_iterations(state) == (0, None)


def last_iterations(state: TrainerState) -> tuple[int, int | None]:
    return trained_through(state), pending_iteration(state)


def test_sync_waits_for_a_close_then_trains_on_everything_in_order() -> None:
    s = settings()
    state = state_of(sample("b:0", ms=2), sample("a:0", ms=1), sample("c:0", ms=2))
    assert next_run(state, s) is None  # no iteration closed
    fold(state, received(closed(0)))
    run = next_run(state, s)
    assert run is not None
    # fewer samples than samples_per_run: all, oldest first (time, then id)
    assert run.sample_ids == ("a:0", "b:0", "c:0")
    assert (run.version, run.parent_version, run.trained_on_iterations) == (1, 0, (0,))
    assert run.run_id == run_id(["a:0", "b:0", "c:0"], 0, TrainMode.LORA_SFT)
    assert run.pool == 3 and run.pool_end_ms == int(at(2).timestamp() * 1000)


def test_sync_draw_is_webgyms_seeded_by_the_version() -> None:
    # version 1 -> seed 1: hand-computed in test_draw (weights 1, 4, 9, 16) -> b, d
    s = settings(replay={"samples_per_run": 2, "recency_power": 2.0})
    state = state_of(*(sample(f"{x}:0", ms=i) for i, x in enumerate("abcd")), closed(0))
    run = next_run(state, s)
    assert run is not None and run.sample_ids == ("b:0", "d:0")
    # the same log read in another interleaving plans the same run
    other = state_of(closed(0), *(sample(f"{x}:0", ms=i) for i, x in reversed(
        list(enumerate("abcd")))))
    assert next_run(other, s) == run


def test_oldest_unfollowed_iteration_first_and_later_iterations_not_drawn() -> None:
    s = settings(max_staleness=5)
    state = state_of(sample("a:0", 0), sample("b:0", 1), sample("c:0", 2),
                     closed(0), closed(1), closed(2), version(1, [0]))
    run = next_run(state, s)
    assert run is not None
    assert (run.version, run.parent_version, run.trained_on_iterations) == (2, 1, (0, 1))
    assert run.sample_ids == ("a:0", "b:0")  # iteration 2 is not closed-and-due yet


def test_window_keeps_the_last_n_iterations() -> None:
    s = settings(max_staleness=10, replay={"window_iterations": 2})
    state = state_of(*(sample(f"e{i}:0", i) for i in range(5)), closed(4),
                     version(1, [3]))
    run = next_run(state, s)
    assert run is not None and run.sample_ids == ("e3:0", "e4:0")


def test_staleness_k0_keeps_the_current_versions_samples_and_demonstrations() -> None:
    events = [sample("old:0", 0, version="base"), sample("new:0", 1, version="v1"),
              sample("late:0", 1, version="base"), sample("demo:0", 1, version="demonstration"),
              closed(0), version(1, [0]), closed(1)]
    run = next_run(state_of(*events), settings(max_staleness=0))
    assert run is not None and set(run.sample_ids) == {"new:0", "demo:0"}
    run = next_run(state_of(*events), settings(max_staleness=1))
    assert run is not None and set(run.sample_ids) == {"old:0", "new:0", "late:0", "demo:0"}


def test_failures_only_for_modes_that_learn_from_them() -> None:
    events = [sample("win:0"), sample("loss:0", success=False), closed(0), version(1, [0]),
              sample("win:1", iteration=1, version="v1"),
              sample("loss:1", iteration=1, version="v1", success=False), closed(1)]
    run = next_run(state_of(*events), settings())
    assert run is not None and run.sample_ids == ("win:1",) and run.mode is TrainMode.LORA_SFT
    run = next_run(state_of(*events), settings(mode="kto"))
    assert run is not None and set(run.sample_ids) == {"win:1", "loss:1"}
    assert run.mode is TrainMode.KTO
    run = next_run(state_of(*events), settings(replay={"success_only": False}))
    assert run is not None and set(run.sample_ids) == {"win:1", "loss:1"}


def test_the_warm_start_is_supervised_on_successes_whatever_the_mode() -> None:
    events = [*bank(2), sample("win:0"), sample("loss:0", success=False), closed(0)]
    for mode in ("kto", "dpo"):
        run = next_run(state_of(*events), settings(mode=mode))
        assert run is not None and run.mode is TrainMode.LORA_SFT
        assert "loss:0" not in run.sample_ids and "win:0" in run.sample_ids
        assert run.run_id == run_id(run.sample_ids, 0, TrainMode.LORA_SFT)
    full = next_run(state_of(*events), settings(mode="full_sft"))
    assert full is not None and full.mode is TrainMode.FULL_SFT
    # without a warm start the first run is already the configured objective's
    cold = next_run(state_of(*events), settings(mode="kto", warm_start=False))
    assert cold is not None and cold.mode is TrainMode.KTO and "loss:0" in cold.sample_ids


def test_an_empty_close_still_gets_a_version_with_the_parents_weights() -> None:
    s = settings()
    state = state_of(closed(0))
    run = next_run(state, s)
    assert run is not None and run.empty
    assert (run.version, run.parent_version, run.trained_on_iterations) == (1, 0, (0,))
    base = passthrough(None, run, MODEL, "/m", "lora_sft", "lora")
    assert (base.version, base.checkpoint_uri, base.base_model, base.sample_ids) == (
        1, "", "/m", [])
    assert base.metrics["samples"] == 0.0 and base.run_id == run.run_id
    # on top of a trained version: the same checkpoint under the next number
    state = state_of(sample("a:0", 0), closed(0), version(1, [0], uri="s3://b/m/v1"),
                     closed(1))
    run = next_run(state, s)
    assert run is not None and run.empty and run.version == 2
    v2 = passthrough(state.versions[1], run, MODEL, "/m", "lora_sft", "lora")
    assert (v2.checkpoint_uri, v2.parent_version, v2.trained_on_iterations) == (
        "s3://b/m/v1", 1, [1])
    assert v2.file_sha256 == state.versions[1].file_sha256 == {"a.json": "cd" * 32}
    assert base.file_sha256 == {}


def test_a_test_iteration_gets_its_parents_weights() -> None:
    state = state_of(sample("a:0", 0), closed(0, split="test"))
    run = next_run(state, settings())
    assert run is not None and run.empty and run.trained_on_iterations == (0,)


def test_async_every_k_fresh_samples_from_a_fixed_pool() -> None:
    s = settings(trigger="async", every_samples=3, max_staleness=1)
    state = state_of(sample("a:0", ms=1), sample("b:0", ms=2))
    assert next_run(state, s) is None
    fold(state, received(sample("c:0", ms=3)))
    run = next_run(state, s)
    assert run is not None and run.sample_ids == ("a:0", "b:0", "c:0")
    assert run.trained_on_iterations == (0,) and run.version == 1
    # a restart that finds one more sample in the log plans the same run
    fold(state, received(sample("d:0", ms=4)))
    assert next_run(state, s) == run
    # after the version: only samples past its pool count as new
    done = version(1, [0], run=run.run_id, metrics={POOL_END: float(run.pool_end_ms)})
    fold(state, received(done))
    assert next_run(state, s) is None  # d only
    fold(state, received(sample("e:0", ms=5, version="v1")))
    fold(state, received(sample("f:0", ms=6, version="v1")))
    run2 = next_run(state, s)
    assert run2 is not None and run2.version == 2 and run2.parent_version == 1
    assert set(run2.sample_ids) == {"a:0", "b:0", "c:0", "d:0", "e:0", "f:0"}


def test_async_counts_only_samples_fresh_enough() -> None:
    s = settings(trigger="async", every_samples=2, max_staleness=0)
    state = state_of(version(2, [0]), sample("a:0", ms=30_000, version="v1"),
                     sample("b:0", ms=30_001, version="base"))
    assert next_run(state, s) is None
    fold(state, received(sample("c:0", ms=30_002, version="demonstration")))
    assert next_run(state, s) is None
    fold(state, received(sample("d:0", ms=30_003, version="v2")))
    run = next_run(state, s)
    assert run is not None and set(run.sample_ids) == {"c:0", "d:0"}


def test_already_published_by_run_id() -> None:
    state = state_of(version(1, [0], run="abc"))
    assert already_published(state, "abc")
    assert not already_published(state, "abd")


def test_caught_up_when_every_partition_is_committed_to_its_end() -> None:
    p0, p1 = TopicPartition("s", 0), TopicPartition("s", 1)
    assert caught_up({p0: 5, p1: 3}, {p0: 5, p1: 3})
    assert caught_up({p0: 5}, {p0: 5, p1: 0})  # an empty partition needs no commit
    assert not caught_up({p0: 4, p1: 3}, {p0: 5, p1: 3})
    assert not caught_up({}, {p0: 1})


def test_trained_version_carries_the_run() -> None:
    state = state_of(sample("a:0"), sample("b:0", ms=1), closed(0))
    run = next_run(state, settings())
    assert run is not None
    mv = trained_version(run, settings().trainer, "s3://webgym/models/m/v1", "/m", 2,
                         {"train_loss": 1.5}, {"adapter_model.safetensors": "ab" * 32})
    assert mv.file_sha256 == {"adapter_model.safetensors": "ab" * 32}
    assert (mv.model_name, mv.version, mv.parent_version, mv.run_id, mv.mode,
            mv.finetuning_type) == (MODEL, 1, 0, run.run_id, "lora_sft", "lora")
    assert mv.sample_ids == ["a:0", "b:0"] and mv.trained_on_iterations == [0]
    assert mv.metrics == {"train_loss": 1.5, "samples": 2.0, POOL_END: float(run.pool_end_ms)}


# -- the demonstration bank (iteration -2: webgym_common.demonstrations) ------------------


def bank(n: int) -> list[ReplaySample]:
    return [sample(f"train-bankp2-{i:04d}-t{i}:0", iteration=-2, ms=i, version="demonstration")
            for i in range(n)]


def test_the_first_run_trains_on_the_whole_bank_beside_its_draw() -> None:
    state = state_of(*bank(5), sample("train-it0-0000-a:0"), closed(0))
    run = next_run(state, settings())
    assert run is not None and run.version == 1
    assert run.sample_ids[0] == "train-it0-0000-a:0"
    assert sorted(run.sample_ids[1:]) == sorted(s.sample_id for s in bank(5))
    assert run.trained_on_iterations == (0,)  # the bank is no iteration
    assert run.pool == 1  # the bank is outside the window


def test_an_empty_iteration_0_trains_the_warm_start_on_the_bank_alone() -> None:
    empty = IterationClosed(iteration=0, split="train", requested=0, completed=0, crashed=0,
                            blocked=0, cancelled=0)  # rollout.warm_start_first
    run = next_run(state_of(*bank(5), empty), settings())
    assert run is not None and run.version == 1 and run.mode is TrainMode.LORA_SFT
    assert sorted(run.sample_ids) == sorted(s.sample_id for s in bank(5))


def test_without_warm_start_and_share_the_bank_is_not_trained_on() -> None:
    state = state_of(*bank(5), sample("train-it0-0000-a:0"), closed(0))
    run = next_run(state, settings(warm_start=False, demonstration_share=0))
    assert run is not None and run.sample_ids == ("train-it0-0000-a:0",)


def test_later_runs_mix_bank_rows_at_the_declared_share() -> None:
    policy = [sample(f"train-it1-{i:04d}-a:0", iteration=1, ms=100 + i, version="v1")
              for i in range(3)]
    state = state_of(*bank(50), *policy, closed(0), closed(1), version(1, [0]))
    few = {"samples_per_run": 4}
    run = next_run(state, settings(demonstration_share=0.5, replay=few))
    assert run is not None and run.version == 2
    demos = [i for i in run.sample_ids if i.startswith("train-bank")]
    assert len(demos) == 3 and len(run.sample_ids) == 6  # half the rows
    again = next_run(state, settings(demonstration_share=0.5, replay=few))
    assert again is not None and again.run_id == run.run_id  # seeded: the same draw
    # a run of few successes is counted as samples_per_run rows: it keeps rehearsing the bank
    small = next_run(state, settings(demonstration_share=0.5, replay={"samples_per_run": 40}))
    assert small is not None and len(small.sample_ids) == 3 + 20


def test_a_run_with_no_policy_success_draws_its_share_of_samples_per_run() -> None:
    state = state_of(*bank(50), closed(0), closed(1), version(1, [0]))
    run = next_run(state, settings(demonstration_share=0.25, replay={"samples_per_run": 20}))
    assert run is not None and len(run.sample_ids) == 5 and not run.empty


def test_a_test_iteration_trains_on_nothing_not_even_the_bank() -> None:
    state = state_of(*bank(5), closed(0, split="test"))
    run = next_run(state, settings())
    assert run is not None and run.empty


def test_bank_samples_never_trigger_an_async_run() -> None:
    state = state_of(*bank(10), version(1, [0], metrics={POOL_END: -1.0}))
    assert next_run(state, settings(trigger="async", every_samples=2)) is None


def test_a_sample_of_a_task_the_leak_guard_refuses_never_reaches_a_run() -> None:
    # a held-out task's sample mislabelled train, a train task sharing a held-out solution,
    # and a task the catalog does not know: none is drawn, the train task's sample is
    state = state_of(sample("a:0", task_id="held"), sample("b:0", task_id="twin"),
                     sample("c:0", task_id="unknown"), sample("d:0"), closed(0))
    run = next_run(state, settings())
    assert run is not None and run.sample_ids == ("d:0",)


def progress(version: int, steps: int, state: str = "finished") -> TrainingProgress:
    return TrainingProgress(run_id=f"r{version}", state=state, version=version, step=steps,
                            total_steps=steps, samples=1)


def test_the_control_matches_the_steps_of_every_version_after_the_warm_start() -> None:
    events = [progress(1, 96), progress(2, 40, "running"), progress(2, 96), progress(3, 96),
              progress(3, 96)]  # v3's run finished twice (a redo): counted once
    assert steps_after_warm_start(events) == 192
    assert steps_after_warm_start([progress(1, 96)]) == 0


def test_the_control_continues_v1_on_every_bank_sample_the_guard_allows() -> None:
    state = state_of(sample("train-bankp1-0000-t:0", iteration=-2, version="demonstration"),
                     sample("train-bankp1-0001-twin:0", iteration=-2, version="demonstration",
                            task_id="twin"),
                     sample("it0:0", iteration=0), sample("it1:0", iteration=1, version="v1"),
                     closed(0), version(1, [0]), version(2, [1]))
    run = control_run(state, settings())
    assert run.sample_ids == ("train-bankp1-0000-t:0",)  # no policy row, no held-out solution
    assert (run.version, run.parent_version) == (1, 1)
    # a folder and a progress key of its own, never the policy line's run on the same rows
    assert run.run_id != run_id(run.sample_ids, 1, TrainMode.LORA_SFT)
    assert run.mode is TrainMode.LORA_SFT
    # under a preference mode the control stays supervised: the bank has no failure to compare
    kto = control_run(state, settings(mode="kto"))
    assert kto.mode is TrainMode.LORA_SFT and kto.sample_ids == run.sample_ids
