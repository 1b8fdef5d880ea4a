"""The held-out report's table: how many rows each version was trained on."""

from __future__ import annotations

from producers.controller.summary import rows_trained_on
from webgym_common.events import ModelVersion, TrainingProgress


def progress(version: int, state: str, samples: int, run: str = "") -> TrainingProgress:
    return TrainingProgress(run_id=run or f"run{version}{state}", state=state, version=version,
                            samples=samples)


def published(version: int, samples: int, model: str = "webgym-policy",
              run: str = "") -> ModelVersion:
    return ModelVersion(model_name=model, version=version, checkpoint_uri=f"s3://m/v{version}",
                        base_model="smollm2", parent_version=version - 1,
                        metrics={"samples": float(samples)}, run_id=run)


def test_a_version_compacted_out_of_the_models_topic_keeps_its_rows_from_its_run() -> None:
    # webgym.models keeps the latest version of a model only; webgym.training every run.
    events = [progress(1, "started", 993), progress(1, "finished", 993),
              progress(2, "failed", 10), progress(2, "finished", 452),
              progress(3, "running", 454), published(2, 452),
              published(7, 5, model="someone-else")]
    assert rows_trained_on("webgym-policy", events) == {1: 993, 2: 452}


def test_the_controls_rows_sit_under_its_evaluation_number_not_over_v1() -> None:
    events = [progress(1, "finished", 993), progress(1, "finished", 640, run="ctrl"),
              published(1, 640, model="webgym-policy-control", run="ctrl")]
    assert rows_trained_on("webgym-policy", events) == {1: 993, 1001: 640}
