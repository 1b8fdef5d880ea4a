"""harness/synthetic.py: a synthetic world the teacher policy can act in."""

from __future__ import annotations

from harness.synthetic import MARKS, observation, requests_for, synthetic_task
from webgym_common.agent.teacher import resolve_reference_action


def test_the_teacher_can_play_every_step_of_a_synthetic_episode() -> None:
    """Each reference action resolves to a Click on a mark of the synthetic page."""
    for n in range(8):
        task = synthetic_task(n, 6)
        req = requests_for("p", 1, 6, [task])[0]
        assert req.max_steps == 6 and len(task.reference_actions) == 6
        for step, ref in enumerate(task.reference_actions):
            obs = observation(req, step, "w")
            action = resolve_reference_action(ref, obs.marks)
            assert action.kind == "Click" and action.valid, action.error
            assert action.element is not None and MARKS[action.element - 1].name == ref.name
    last = observation(req, 6, "w", terminal=True)
    assert last.terminal and last.step == 6
