"""The metric sinks: which scalars an event is, and real TensorBoard / W&B (offline) files."""

from __future__ import annotations

from pathlib import Path

from consumers.monitor.tensorboard import Sinks, TensorBoardSink, WandbSink, scalars
from webgym_common.choices import WandbMode
from webgym_common.events import EvaluationResult, RolloutMetrics


def metrics(iteration: int, success: float, demonstrations: int = 0) -> RolloutMetrics:
    return RolloutMetrics(iteration=iteration, split="train", episodes=8, crashed_rate=0.0,
                          blocked_rate=0.0, success_rate=success, avg_steps=3.0,
                          avg_chars_per_response=50.0, goback_rate=0.0, evaluator_version="r",
                          demonstrations=demonstrations,
                          demonstration_success_rate=1.0 if demonstrations else 0.0)


EVAL = EvaluationResult(model_name="m", version=2, suite="sandbox", split="test", seed=0,
                        temperature=0.0, episodes=10, scored=10, successes=3,
                        success_rate=0.3, ci_low=0.1, ci_high=0.6, avg_steps=4.0)


def test_an_iterations_metrics_and_an_evaluation_are_scalars_on_their_own_axes() -> None:
    tags = {tag: (value, step) for tag, value, step in scalars(metrics(3, 0.5))}
    assert tags["rollout/train/success_rate"] == (0.5, 3)
    assert scalars(EVAL) == [("eval/m/sandbox/test/success_rate", 0.3, 2)]
    baseline = EVAL.model_copy(update={"version": -1})  # the scripted baseline: a level
    assert scalars(baseline) == [("eval/m/sandbox/test/baseline_success_rate", 0.3, 0)]


def test_demonstrations_are_scalars_apart_from_the_policys_success() -> None:
    tags = {tag: (value, step) for tag, value, step in scalars(metrics(0, 0.25, 4))}
    assert tags["rollout/train/success_rate"] == (0.25, 0)  # the policy's own
    assert tags["rollout/train/demonstration_success_rate"] == (1.0, 0)
    assert tags["rollout/train/demonstrations"] == (4, 0)
    assert tags["rollout/train/policy_episodes"] == (4, 0)
    # without demonstrations there is no demonstrations' rate to draw (not a rate of 0)
    none = {tag for tag, _, _ in scalars(metrics(1, 0.5))}
    assert "rollout/train/demonstration_success_rate" not in none
    assert "rollout/train/demonstrations" in none


def test_tensorboard_files_are_written_once_per_value(tmp_path: Path) -> None:
    sink = TensorBoardSink(tmp_path)
    assert sink.write(metrics(0, 0.25)) == 9  # 6 rates, episodes, policy's, demonstrations
    assert sink.write(metrics(0, 0.25)) == 0  # a compacted topic read again
    sink.close()
    files = list(tmp_path.glob("events.out.tfevents.*"))
    assert len(files) == 1 and b"rollout/train/success_rate" in files[0].read_bytes()


def test_a_wandb_run_in_offline_mode_holds_the_scalars(tmp_path: Path) -> None:
    sinks = Sinks([WandbSink("webgym-test", WandbMode.OFFLINE, tmp_path, "unit")])
    assert sinks.write(metrics(0, 0.25)) + sinks.write(metrics(1, 0.5)) == 18
    assert sinks.write(EVAL) == 1
    sinks.close()
    (run,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    data = run.read_bytes()
    logs = "".join(p.read_text() for p in tmp_path.glob("wandb/offline-run-*/logs/*.log"))
    assert b"rollout/train/success_rate" in data, f"{len(data)} bytes; the run's logs:\n{logs}"
    assert b"eval/m/sandbox/test/success_rate" in data
    assert b"rollout_step" in data
