import time

import pytest

from webgym_common.timings import Timings, mean_breakdown, step_breakdown


def test_a_phase_is_timed_and_repeats_add_up() -> None:
    t = Timings()
    with t.phase("settle"):
        time.sleep(0.02)
    with t.phase("settle"):
        time.sleep(0.01)
    t.add("publish", 3.0)
    assert t.ms["settle"] >= 30 and t.ms["settle"] < 1000
    assert t.ms["publish"] == 3.0


def test_a_phase_that_raises_is_still_timed() -> None:
    t = Timings()
    with pytest.raises(ValueError), t.phase("execute"):
        raise ValueError("no such element")
    assert "execute" in t.ms


def test_the_bus_is_the_wait_less_the_publish_and_the_policys_own_phases() -> None:
    browser = {"action_wait": 120.0, "publish": 4.0, "execute": 30.0, "settle": 100.0,
               "screenshot": 20.0, "total": 60.0}
    policy = {"queue": 5.0, "model": 100.0, "prompt_store": 3.0, "remember": 2.0}
    out = step_breakdown(browser, policy)
    assert out["bus"] == pytest.approx(120 - 4 - 100 - 3 - 2)
    assert out["settle"] == 100.0 and out["model"] == 100.0 and out["queue"] == 5.0
    assert "total" not in out and "action_wait" not in out  # sums, not phases


def test_a_step_without_a_wait_has_no_bus_and_clocks_never_make_it_negative() -> None:
    assert "bus" not in step_breakdown({"settle": 5.0}, {})
    assert step_breakdown({"action_wait": 10.0}, {"model": 12.0})["bus"] == 0.0


def test_the_mean_counts_each_phase_over_the_steps_that_have_it() -> None:
    assert mean_breakdown([{"bus": 10.0, "model": 2.0}, {"bus": 20.0}]) == {
        "bus": 15.0, "model": 2.0}
