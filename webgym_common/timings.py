"""Where a step's time goes: named phases in milliseconds, carried in the events.

A browser worker fills StepObserved.timings_ms and the policy ActionChosen.timings_ms
(the phases each schema's doc lists); the monitor and `bench.step_breakdown` add them up.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence

# The phases of one step, in the order they happen, and who measures them. `bus` is not
# measured anywhere: it is what is left of the browser's wait for an action once the
# policy's own phases are taken out (see step_breakdown).
BROWSER_PHASES = ("execute", "settle", "screenshot", "tree", "upload", "publish")
POLICY_PHASES = ("queue", "model", "prompt_store", "remember")
# A step from the observation's publish to the next observation ready, in order (`queue`
# overlaps `bus`, so it is not one of them).
STEP_PHASES = ("publish", "bus", "model", "prompt_store", "remember", "execute", "settle",
               "screenshot", "tree", "upload")


class Timings:
    """Phases timed with a monotonic clock; `ms` maps each phase to its milliseconds."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, (time.perf_counter() - started) * 1000)

    def add(self, name: str, ms: float) -> None:
        self.ms[name] = self.ms.get(name, 0.0) + ms


def step_breakdown(browser: Mapping[str, float], policy: Mapping[str, float]) -> dict[str, float]:
    """One step's phases, from its observation's and its action's timings.

    `browser`: the timings of the observation that *followed* the action (it carries the
    wait for that action, `action_wait`, counted from when the previous observation's publish
    started, and that publish, `publish`); `policy`: the action's. The bus is the wait less
    the publish and the policy's own phases: the trips through Kafka both ways, the policy's
    queue and its bookkeeping (`queue` overlaps it, so it is reported but not subtracted).
    """
    out = {name: float(browser[name]) for name in BROWSER_PHASES if name in browser}
    out.update({name: float(policy[name]) for name in POLICY_PHASES if name in policy})
    if "action_wait" in browser:
        inside = sum(float(policy.get(name, 0.0)) for name in ("model", "prompt_store",
                                                               "remember"))
        out["bus"] = max(0.0, float(browser["action_wait"]) - float(browser.get("publish", 0.0))
                         - inside)
    return out


def mean_breakdown(steps: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each phase over the steps that have it."""
    sums: dict[str, list[float]] = {}
    for step in steps:
        for name, ms in step.items():
            sums.setdefault(name, []).append(ms)
    return {name: sum(v) / len(v) for name, v in sums.items()}
