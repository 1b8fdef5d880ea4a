"""The main job's closing panel: where the results are, what still runs, how to stop it."""

from __future__ import annotations

from pathlib import Path

from producers.controller.main_job import closing_lines


def test_the_main_job_ends_naming_its_results_what_still_runs_and_how_to_stop_it(
    tmp_path: Path,
) -> None:
    from webgym_common.config import load_settings

    settings = load_settings(infra={"data_dir": str(tmp_path)}, policy={"kind": "vllm"})
    lines = closing_lines(settings, None, [tmp_path / "export" / "it0.avro"],
                                  "http://127.0.0.1:18780/", ["browser", "policy", "trainer"])
    text = "\n".join(lines)
    assert f"{tmp_path / 'evaluations'}" in text and "metrics.csv" in text
    assert f"trajectories: {tmp_path / 'export'}/ (1 iteration files)" in text
    assert "monitor: http://127.0.0.1:18780/" in text
    assert "vLLM" in text and "browser, policy, trainer, monitor" in text
    assert lines[-1] == "stop everything: .venv/bin/webgym down"
    teacher = closing_lines(load_settings(policy={"kind": "teacher"}), tmp_path, [],
                                    None, [])
    assert "vLLM" not in "\n".join(teacher) and "pipeline: nothing" in "\n".join(teacher)
