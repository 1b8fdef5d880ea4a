"""A synthetic shop world (bench.bus_scale runs in it): a shop-like page (20 marks and their
aria tree), tasks whose reference actions click them, the requests a controller would
publish for them, the observations a browser worker would publish, and the router that
hands each step's ActionChosen to the episode waiting for it.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from webgym_common.events import (
    ActionChosen,
    EpisodeRequested,
    EpisodeScored,
    Mark,
    ReferenceAction,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.stream.bus import EventConsumer

NAMES = ["Search products", "Phones", "Laptops", "Cameras", "Monitors", "Audio", "Cart",
         "Cobalt Pulse 311", "Acme Lumen 964", "Cobalt Atlas 320", "Price: low to high",
         "Brand", "Next page", "Sign in", "Help", "Deals", "Contact", "About", "Careers", "Blog"]
MARKS = [Mark(index=i + 1, ref=f"e{i + 1}", role="searchbox" if i == 0 else "link", name=n,
              x=10, y=20 * i, width=100, height=18) for i, n in enumerate(NAMES)]
TREE = "\n".join(
    ['- banner:', '  - heading "Gadget Depot" [level=1]']
    + [f'  - {m.role} "{m.name}" [ref={m.ref}] [box={m.x:.0f},{m.y:.0f},{m.width:.0f},'
       f'{m.height:.0f}]' for m in MARKS]
    + ['- main:', '  - paragraph: "Showing 1-24 of 311 products"'])


def synthetic_task(n: int, steps: int) -> Task:
    """A shop task whose reference clicks `steps` links named on every page seen."""
    links = [m for m in MARKS if m.role == "link"]
    refs = [ReferenceAction(action="Click", role="link", name=links[(n + k) % len(links)].name)
            for k in range(steps)]
    return Task(task_id=f"bus-scale-{n}", task_name=f"Find product {n} on Gadget Depot",
                domain="bench", website="http://127.0.0.1/shop/", difficulty=1,
                definite_answer=f"{n}", reference_actions=refs, max_steps=steps)


def requests_for(prefix: str, n: int, steps: int, tasks: list[Task]) -> list[EpisodeRequested]:
    """`n` train episodes of `steps` steps over `tasks` in turn, as the controller requests
    them (ids `<prefix>-0000-<task id>`, ...)."""
    deadline = utc_now() + timedelta(minutes=30)
    return [EpisodeRequested(
        episode_id=f"{prefix}-{i:04d}-{tasks[i % len(tasks)].task_id}",
        task=tasks[i % len(tasks)], iteration=0, split="train", max_steps=steps,
        deadline=deadline, policy_version="bench") for i in range(n)]


def observation(req: EpisodeRequested, step: int, worker: str, terminal: bool = False
                ) -> StepObserved:
    return StepObserved(
        episode_id=req.episode_id, task_id=req.task.task_id, step=step,
        url=f"http://127.0.0.1/shop/?page={step}", title="Gadget Depot",
        viewport=Viewport(width=1280, height=720), accessibility_tree=TREE, marks=MARKS,
        timings_ms={"action": 20.0, "settle": 20.0, "tree": 5.0, "total": 50.0},
        action_effect=None if step == 0 else "the page changed", terminal=terminal,
        worker_id=worker)


class Router:
    """One reader of webgym.actions and webgym.episodes.scored for every episode: the first
    action of each (episode, step) resolves its waiter, with the moment it was read."""

    def __init__(self, consumer: EventConsumer) -> None:
        self.consumer = consumer
        self.waiting: dict[tuple[str, int], asyncio.Future[tuple[ActionChosen, float]]] = {}
        self.arrived: dict[tuple[str, int], tuple[ActionChosen, float]] = {}
        self.scored: dict[str, float] = {}
        self.scored_changed = asyncio.Event()

    def expect(self, eid: str, step: int) -> asyncio.Future[tuple[ActionChosen, float]]:
        fut = asyncio.get_running_loop().create_future()
        if (got := self.arrived.pop((eid, step), None)) is not None:
            fut.set_result(got)
        else:
            self.waiting[(eid, step)] = fut
        return fut

    async def run(self) -> None:
        while True:
            batch = await self.consumer.poll(timeout_ms=20)
            now = time.time()  # wall clock: compared with produced_at
            for r in batch:
                ev = r.event
                if isinstance(ev, ActionChosen):
                    key = (ev.episode_id, ev.step)
                    fut = self.waiting.pop(key, None)
                    if fut is not None and not fut.done():
                        fut.set_result((ev, now))
                    elif fut is None and key not in self.arrived:  # before it was awaited
                        self.arrived[key] = (ev, now)
                elif isinstance(ev, EpisodeScored):
                    self.scored.setdefault(ev.episode_id, now)
                    self.scored_changed.set()
