"""Synthetic browser workers for the bus benches: many episodes through the real broker,
policy and evaluator without Chromium.

A worker plays all its episodes at once, exactly as a browser worker publishes them
(producers/browser/episode.py): EpisodeRequested (as the controller would), StepObserved
step 0, then per step it waits for the step's ActionChosen (read by one shared `Router`),
"executes" it in `Options.browser_step_ms`, publishes the next observation; after the last
action the terminal observation (max_steps) and the EpisodeCompleted. What each step took
is added to its `Level`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.delivery_counts import StepCount
from harness.outcomes import Tally
from harness.synthetic import MARKS, Router, observation
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted, EpisodeRequested, utc_now
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic


@dataclass
class Level:
    episodes: int
    steps: int
    wall_s: float = 0.0
    actions: int = 0
    bus_ms: list[float] = field(default_factory=list)
    # ... less the policy's own measured phases (model, prompt_store, remember): Kafka alone
    kafka_ms: list[float] = field(default_factory=list)
    # per step: observation publish acked, then the action produced (minus the policy's
    # latency), then the action read here (ms; wall clocks of one machine)
    parts_ms: list[tuple[float, float, float]] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)  # bus latency of step 0
    later_ms: list[float] = field(default_factory=list)  # ... of the steps after it
    scored_s: float | None = None  # from the first request until every episode was scored
    tally: Tally | None = None
    step_count: StepCount | None = None
    cpu_s: dict[str, float] = field(default_factory=dict)  # process -> CPU s while measured
    timeouts: int = 0
    wrong_actions: int = 0
    logs: Path | None = None


@dataclass(frozen=True)
class Options:
    steps: int = 6
    policy_latency_ms: float = 200.0
    browser_step_ms: float = 50.0
    browsers: int = 4
    policy_workers: int = 1
    action_timeout_s: float = 120.0
    score_timeout_s: float = 180.0


async def browser(k: int, settings: Settings, requests: list[EpisodeRequested], steps: int,
                  router: Router, level: Level, opts: Options,
                  on_done: Callable[[], object]) -> None:
    """One synthetic browser worker with len(requests) contexts, all playing at once."""
    worker = f"synthetic-{k}"
    delay_ms = opts.policy_latency_ms
    async with EventProducer(settings, client_id=f"bench-{worker}") as producer:
        async def play(req: EpisodeRequested) -> None:
            eid, started = req.episode_id, utc_now()
            await producer.publish(Topic.EPISODES, eid, req)  # as the controller does
            termination, reason, step = "max_steps", None, 0
            while True:
                fut = router.expect(eid, step)
                sent = time.time()
                await producer.publish(Topic.OBSERVATIONS, eid, observation(req, step, worker))
                acked = time.time()
                try:
                    action, received = await asyncio.wait_for(fut, opts.action_timeout_s)
                except TimeoutError:
                    router.waiting.pop((eid, step), None)
                    termination = "timeout"
                    reason = f"no action for step {step} in {opts.action_timeout_s:.0f}s"
                    level.timeouts += 1
                    break
                level.actions += 1
                level.bus_ms.append((received - sent) * 1000 - delay_ms)
                level.kafka_ms.append((received - sent) * 1000 - sum(
                    action.timings_ms.get(p, 0.0) for p in ("model", "prompt_store",
                                                             "remember")))
                (level.first_ms if step == 0 else level.later_ms).append(level.bus_ms[-1])
                produced = action.produced_at.timestamp()
                level.parts_ms.append(((acked - sent) * 1000,
                                       (produced - acked) * 1000 - delay_ms,
                                       (received - produced) * 1000))
                want = req.task.reference_actions[step].name
                if action.action.kind != "Click" or action.action.element is None or \
                        MARKS[action.action.element - 1].name != want:
                    level.wrong_actions += 1
                if opts.browser_step_ms:
                    await asyncio.sleep(opts.browser_step_ms / 1000)
                step += 1
                if step >= req.max_steps:
                    await producer.publish(Topic.OBSERVATIONS, eid,
                                           observation(req, step, worker, terminal=True))
                    break
            await producer.publish(Topic.EPISODES_COMPLETED, eid, EpisodeCompleted(
                episode_id=eid, task_id=req.task.task_id, iteration=req.iteration,
                split=req.split, steps=step, termination=termination, reason=reason,
                final_url=f"http://127.0.0.1/shop/?page={step}", started_at=started,
                worker_id=worker))
            on_done()

        await asyncio.gather(*(play(r) for r in requests))
