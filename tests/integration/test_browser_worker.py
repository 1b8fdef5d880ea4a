"""Browser workers as real processes sharing partitions: kills, rebalances, handovers.

Real Chromium, real Kafka, real MinIO, the sandbox web; mirrors producers/browser/worker.py
(ownership of episode partitions, the uncommitted request and actions of an episode in
flight, finished.py's memory of ended episodes). What one episode does with its pages is in
test_browser_episode.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka.partitioner import DefaultPartitioner

from harness.hand_fed import HandFedEpisode, mark_index, watch_episodes
from producers.drive_reference import drive, episode_request
from tests.support.browser_workers import wait_until_owning
from webgym_common.config import Settings
from webgym_common.stream.bus import EventProducer
from webgym_common.tasks import read_task_file

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS, _ = read_task_file(Path("environments/tasks/sandbox_tasks.jsonl"))


@pytest.mark.parametrize("how", ["kill", "stop"])
async def test_a_worker_dying_mid_episode_hands_it_to_another(
    settings: Settings, producer: EventProducer, start_worker, how: str
) -> None:
    first = start_worker(2)
    await wait_until_owning(first)
    async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/shop/",
                              max_steps=30) as ep:
        obs = await ep.start()
        obs = await ep.act(f"Type [{mark_index(obs, 'searchbox', 'Search products')}] [phone]")
        before = await ep.act("Scroll [WINDOW] [down]")
        assert before.worker_id and "q=phone" in before.url
        first.kill() if how == "kill" else first.stop()

        second = start_worker(2)
        await wait_until_owning(second)
        # The new owner reruns the log: the episode continues where it was.
        after = await ep.act("Scroll [WINDOW] [up]", wait_s=90)
        assert after.worker_id != before.worker_id
        assert after.step == before.step + 1 and "q=phone" in after.url
        await ep.send_only("ANSWER [done]")
        done = await ep.completed()
        assert done.termination == "answer" and done.worker_id == after.worker_id
        await asyncio.sleep(3)  # a second completion would arrive by now
        assert len(ep.completions) == 1


async def test_two_workers_share_the_partitions(
    settings: Settings, producer: EventProducer, start_worker
) -> None:
    workers = [start_worker(3), start_worker(3)]
    await wait_until_owning(*workers)
    await asyncio.sleep(2)  # let the group settle on two members
    tasks = [t for t in TASKS if t.domain != "sandbox-hostile"][:12]
    episodes = await drive(settings, [episode_request(t) for t in tasks], producer, 240)
    assert all(e.completed.termination == "answer" for e in episodes)
    assert all(e.completed.answer == e.task.definite_answer for e in episodes)
    assert len({e.completed.worker_id for e in episodes}) == 2


# -- reliability (issue 9): kills and rebalances -----------------------------------------------


def partition_of(episode_id: str, partitions: int) -> int:
    """The partition the producers' default partitioner gives an episode's key."""
    every = list(range(partitions))
    return DefaultPartitioner()(episode_id.encode(), every, every)


async def one_per_partition(settings: Settings, producer: EventProducer, url: str,
                            **kw: Any) -> list[HandFedEpisode]:
    """Hand-fed episodes, one on each episode partition."""
    n = settings.kafka.partitions
    found: dict[int, HandFedEpisode] = {}
    while len(found) < n:
        ep = HandFedEpisode(settings, producer, url, **kw)
        if found.setdefault(partition_of(ep.episode_id, n), ep) is not ep:
            await ep.close()
    return list(found.values())


async def posts_of(settings: Settings, episode_id: str) -> int:
    """How many forms the sandbox saw posted by this episode (its X-WebGym-Episode header)."""
    url = f"{settings.sandbox_url}/__webgym/posts"
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as http, \
            http.get(url, params={"episode": episode_id}) as resp:
        resp.raise_for_status()
        return int((await resp.json())["posts"])


async def finish_with_one_post(ep: HandFedEpisode, answer: str) -> None:
    """Add a product to the cart (one form post), then answer."""
    obs = await ep.start(wait_s=120)
    await ep.act(f"Click [{mark_index(obs, 'button', 'Add to cart')}]", wait_s=120)
    await ep.send_only(f"ANSWER [{answer}]")
    assert (await ep.completed(wait_s=120)).termination == "answer"


async def completions_per_episode(settings: Settings, producer: EventProducer,
                                  episodes: list[HandFedEpisode]) -> dict[str, int]:
    """Counted from webgym.episodes.completed itself, after every episode has ended."""
    logs = await watch_episodes(settings, producer, [e.episode_id for e in episodes],
                                timeout_s=120, linger_s=5)
    return {eid: len(log.completions) for eid, log in logs.items()}


PRODUCT = "acme-volt-500"  # in stock: its page has the Add to cart form


async def test_a_killed_worker_never_runs_an_ended_episode_again(
    settings: Settings, producer: EventProducer, start_worker
) -> None:
    """SIGKILL with 4 episodes in flight (one per partition, holding its offsets) after 8
    others ended: the next owner re-reads those 8 requests, and must leave them be."""
    first = start_worker(8)
    await wait_until_owning(first)
    shop = f"{settings.sandbox_url}/shop/"
    holders = await one_per_partition(settings, producer, shop, max_steps=30, timeout_s=900)
    product = f"{settings.sandbox_url}/shop/product/{PRODUCT}"
    finishers = [HandFedEpisode(settings, producer, product, timeout_s=900) for _ in range(8)]
    try:
        firsts = await asyncio.gather(*(h.start(wait_s=120) for h in holders))
        await asyncio.gather(*(
            h.act(f"Type [{mark_index(o, 'searchbox', 'Search products')}] [phone]", wait_s=120)
            for h, o in zip(holders, firsts, strict=True)))
        await asyncio.gather(*(finish_with_one_post(f, "done") for f in finishers))
        assert [await posts_of(settings, f.episode_id) for f in finishers] == [1] * 8

        first.kill()  # no goodbye: holds, commits and the in-memory finished set are gone
        second = start_worker(8)
        await wait_until_owning(second)
        # The episodes in flight are resumed by rerun and go on where they were.
        afters = await asyncio.gather(*(h.act("Scroll [WINDOW] [down]", wait_s=180)
                                        for h in holders))
        assert all("q=phone" in a.url and a.step == 2 for a in afters)
        for h in holders:
            await h.send_only("ANSWER [held]")
        await asyncio.gather(*(h.completed(wait_s=120) for h in holders))

        counts = await completions_per_episode(settings, producer, holders + finishers)
        assert counts == {e.episode_id: 1 for e in holders + finishers}
        # Nothing of an ended episode ran again: no re-run step, no second form post.
        assert [f.duplicates for f in finishers] == [0] * 8
        assert [await posts_of(settings, f.episode_id) for f in finishers] == [1] * 8
    finally:
        for ep in holders + finishers:
            await ep.close()


async def test_a_rebalance_ends_every_episode_exactly_once(
    settings: Settings, producer: EventProducer, start_worker
) -> None:
    """A second worker joins mid-episode, then the first leaves with SIGTERM."""
    first = start_worker(8)  # room for the 4 holders and the 4 finishers at once
    await wait_until_owning(first)
    shop = f"{settings.sandbox_url}/shop/"
    holders = await one_per_partition(settings, producer, shop, max_steps=30, timeout_s=900)
    product = f"{settings.sandbox_url}/shop/product/{PRODUCT}"
    finishers = [HandFedEpisode(settings, producer, product, timeout_s=900) for _ in range(4)]
    try:
        firsts = await asyncio.gather(*(h.start(wait_s=120) for h in holders))
        await asyncio.gather(*(
            h.act(f"Type [{mark_index(o, 'searchbox', 'Search products')}] [phone]", wait_s=120)
            for h, o in zip(holders, firsts, strict=True)))
        await asyncio.gather(*(finish_with_one_post(f, "done") for f in finishers))

        second = start_worker(8)  # the group rebalances: every partition is revoked
        await wait_until_owning(second)
        afters = await asyncio.gather(*(h.act("Scroll [WINDOW] [down]", wait_s=180)
                                        for h in holders))
        assert all("q=phone" in a.url and a.step == 2 for a in afters)

        first.stop()  # SIGTERM: its episodes are handed over to the second worker
        afters = await asyncio.gather(*(h.act("Scroll [WINDOW] [up]", wait_s=180)
                                        for h in holders))
        assert all("q=phone" in a.url and a.step == 3 for a in afters)
        for h in holders:
            await h.send_only("ANSWER [held]")
        done = await asyncio.gather(*(h.completed(wait_s=120) for h in holders))
        assert {d.termination for d in done} == {"answer"}

        counts = await completions_per_episode(settings, producer, holders + finishers)
        assert counts == {e.episode_id: 1 for e in holders + finishers}
        assert [f.duplicates for f in finishers] == [0] * 4
        assert [await posts_of(settings, f.episode_id) for f in finishers] == [1] * 4
    finally:
        for ep in holders + finishers:
            await ep.close()
