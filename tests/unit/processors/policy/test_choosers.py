"""choosers.py: who decides an episode's steps."""

from __future__ import annotations

from processors.policy.choosers import Chooser, Choosers, chooser_for
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.choices import PolicyKind
from webgym_common.config import load_settings
from webgym_common.versions import BASELINE_VERSION


def test_demonstrations_go_to_the_teacher_baseline_requests_to_the_baseline_the_rest_to_the_policy(
) -> None:
    ctx = EpisodeContext(episode_id="ep", task_id="t", task_name="find it")
    assert chooser_for(ctx) is Chooser.POLICY
    assert chooser_for(EpisodeContext(episode_id="ep", task_id="t", task_name="x",
                                      demonstration=True)) is Chooser.TEACHER
    assert chooser_for(EpisodeContext(episode_id="ep", task_id="t", task_name="x",
                                      policy_version=BASELINE_VERSION)) is Chooser.BASELINE
    # A demonstration is teacher-forced whatever version it was requested on.
    assert chooser_for(EpisodeContext(episode_id="ep", task_id="t", task_name="x",
                                      demonstration=True, policy_version=BASELINE_VERSION)
                       ) is Chooser.TEACHER


def test_only_a_model_policy_follows_the_served_versions() -> None:
    teacher = Choosers(load_settings(policy={"kind": PolicyKind.TEACHER}))
    assert teacher.served is None and teacher.by_kind[Chooser.POLICY].version == "teacher-forcing"
    vllm = Choosers(load_settings(policy={"kind": PolicyKind.VLLM}))
    assert vllm.served is not None and vllm.by_kind[Chooser.POLICY] is vllm.policy
