"""Browser workers as real processes: real Chromium, real Kafka, real MinIO, sandbox web."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka.partitioner import DefaultPartitioner

from environments import hostile
from harness.hand_fed import HandFedEpisode, mark_index, watch_episodes
from harness.launch import BrowserWorkerProcess
from producers.drive_reference import drive, episode_request
from webgym_common.choices import Driver
from webgym_common.config import Settings
from webgym_common.events import CancelEpisode
from webgym_common.objectstore import ObjectStore
from webgym_common.pagetext import CAPS
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_events
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS, _ = read_task_file(Path("environments/tasks/sandbox_tasks.jsonl"))
TASK = {t.task_id: t for t in TASKS}


async def wait_until_owning(*workers, timeout_s: float = 60) -> None:
    async with asyncio.timeout(timeout_s):
        while not all(w.owns_partitions() for w in workers):  # noqa: ASYNC110 (a log file)
            await asyncio.sleep(0.2)


async def test_reference_task_runs_end_to_end_with_screenshots_in_minio(
    settings: Settings, producer: EventProducer, start_worker
) -> None:
    worker = start_worker(2)
    await wait_until_owning(worker)
    task = TASK["travel-010"]  # 8 steps over search, results, a form and a confirmation
    (episode,) = await drive(settings, [episode_request(task)], producer, timeout_s=120)

    assert episode.completed.termination == "answer"
    assert episode.completed.answer == task.definite_answer
    steps = [o.step for o in episode.observations]
    assert steps == list(range(len(task.reference_actions)))  # in order, none missing
    assert episode.completed.steps == len(task.reference_actions) - 1
    assert all(a.action.valid for a in episode.actions), [a.action for a in episode.actions]
    store = ObjectStore(settings.s3)
    shots = set()
    for obs in episode.observations:
        data = await store.get_blob(obs.screenshot_uri)
        assert hashlib.sha256(data).hexdigest() == obs.screenshot_sha256
        assert data[:2] == b"\xff\xd8"  # JPEG
        assert obs.marks and obs.url.startswith(settings.sandbox_url)
        shots.add(obs.screenshot_sha256)
    assert len(shots) == len(episode.observations)  # every step changed the page
    completions = await read_events(settings, Topic.EPISODES_COMPLETED, 1, producer)
    assert [c.event.episode_id for c in completions] == [episode.episode_id]


async def test_hostile_pages_end_in_the_right_termination(
    settings: Settings, producer: EventProducer, start_worker
) -> None:
    worker = start_worker(4)
    await wait_until_owning(worker)
    base = f"{settings.sandbox_url}/hostile"

    async with HandFedEpisode(settings, producer, f"{base}/captcha") as captcha, \
            HandFedEpisode(settings, producer, f"{base}/forbidden") as forbidden, \
            HandFedEpisode(settings, producer, f"{base}/infinite-loop") as loop, \
            HandFedEpisode(settings, producer, f"{base}/never-loads") as never:
        obs = await asyncio.gather(captcha.start(), forbidden.start(), never.start())
        assert obs[0].terminal and obs[1].terminal
        assert (await captcha.completed()).termination == "blocked"
        done = await forbidden.completed()
        assert done.termination == "blocked" and "403" in done.reason

        # The never-loading page is still observed, and a cancel ends it.
        assert obs[2].url.endswith("/never-loads") and not obs[2].terminal
        await producer.publish(Topic.CONTROL, "0", CancelEpisode(
            episode_id=never.episode_id, iteration=0, reason="straggler"))
        done = await never.completed()
        assert done.termination == "cancelled" and done.reason == "straggler"

        # A script that never yields hangs the page: the episode crashes, the worker goes on.
        await loop.begin()
        with pytest.raises(TimeoutError):
            await loop.observation(1, wait_s=3)
        if loop.observations:
            await loop.send_only("Wait")
        done = await loop.completed(wait_s=90)
        assert done.termination == "crashed" and done.reason

    # The worker survived all of it and still runs episodes.
    async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/wiki/") as after:
        await after.start()
        await after.send_only("ANSWER [still alive]")
        assert (await after.completed()).answer == "still alive"


async def test_popups_dialogs_and_downloads_are_handled(
    settings: Settings, producer: EventProducer, start_worker
) -> None:
    await wait_until_owning(start_worker(2))
    base = f"{settings.sandbox_url}/hostile"
    async with HandFedEpisode(settings, producer, f"{base}/popup") as ep:
        obs = await ep.start()
        obs = await ep.act(f"Click [{mark_index(obs, 'link', 'Open help in a new tab')}]")
        assert obs.url.endswith("/hostile/popup-target") and "new tab" in obs.action_effect
        assert "Help window" in obs.accessibility_tree
        await ep.send_only("ANSWER [popup]")
        assert (await ep.completed()).termination == "answer"
    async with HandFedEpisode(settings, producer, f"{base}/dialog") as ep:
        obs = await ep.start()
        obs = await ep.act(f"Click [{mark_index(obs, 'button', 'Delete draft')}]")
        assert "confirm dialog" in obs.action_effect and "Delete this draft?" in obs.action_effect
        assert "Draft deleted" in obs.accessibility_tree
        await ep.send_only("ANSWER [dialog]")
        assert (await ep.completed()).termination == "answer"
    async with HandFedEpisode(settings, producer, f"{base}/download") as ep:
        obs = await ep.start()
        link = mark_index(obs, "link", "Download quarterly report (CSV)")
        obs = await ep.act(f"Click [{link}]")
        assert "quarterly-report.csv" in obs.action_effect and obs.error is None


async def test_url_policy_refuses_and_reports(
    settings: Settings, producer: EventProducer, start_worker
) -> None:
    await wait_until_owning(start_worker(2))
    async with HandFedEpisode(settings, producer, "file:///etc/passwd") as ep:
        await ep.begin()
        done = await ep.completed()
        assert done.termination == "crashed" and "start URL refused" in done.reason
        assert not ep.observations
    async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/wiki/",
                              driver=Driver.EXTERNAL) as ep:
        first = await ep.start()
        obs = await ep.act("Visit [http://169.254.169.254/latest/meta-data/]")
        assert "refused" in obs.error and obs.url == first.url
        obs = await ep.act("Visit [chrome://settings]")
        assert "scheme" in obs.error
        obs = await ep.act(f"Visit [{settings.sandbox_url}/shop/]")
        assert obs.error is None and obs.url.endswith("/shop/")


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


# -- reliability (issue 9): kills, rebalances, failing dependencies ------------------------


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


class TcpProxy:
    """Forwards a local port to `target`; `cut()` refuses and drops every connection."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def cut(self) -> None:
        if self.server is not None:
            self.server.close()
        for w in self.writers:
            w.close()


async def test_an_object_store_failure_ends_the_episode_as_crashed_with_the_reason(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    host, port = settings.s3.endpoint.rsplit(":", 1)
    proxy = TcpProxy(host, int(port))
    await proxy.start()
    s = settings.model_copy(update={
        "s3": settings.s3.model_copy(update={"endpoint": f"127.0.0.1:{proxy.port}"}),
        "browser": settings.browser.model_copy(update={"dependency_retry_s": 3.0}),
    })
    worker = BrowserWorkerProcess(s, 2, tmp_path / "worker-s3.log")
    try:
        await wait_until_owning(worker)
        async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/wiki/") as ep:
            await ep.start()  # its screenshot went through the proxy
            await proxy.cut()  # MinIO is gone for this worker
            await ep.send_only("Scroll [WINDOW] [down]")
            done = await ep.completed(wait_s=90)
            assert done.termination == "crashed"
            assert done.reason and done.reason.startswith("screenshot upload failed")
            assert 1 not in ep.observations
        assert worker.proc.poll() is None  # the worker goes on
    finally:
        worker.stop()
        await proxy.cut()


async def test_a_cancel_reaches_an_episode_that_is_still_opening(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    # The start page never finishes loading; opening it would take a minute.
    s = settings.model_copy(update={
        "browser": settings.browser.model_copy(update={"navigation_timeout_s": 60.0})})
    worker = BrowserWorkerProcess(s, 2, tmp_path / "worker-slow.log")
    try:
        await wait_until_owning(worker)
        url = f"{settings.sandbox_url}/hostile/never-loads"
        async with HandFedEpisode(settings, producer, url) as ep:
            await ep.begin()
            await producer.publish(Topic.CONTROL, "0", CancelEpisode(
                episode_id=ep.episode_id, iteration=0, reason="straggler"))
            done = await ep.completed(wait_s=40)  # well before the page would have opened
            assert (done.termination, done.reason) == ("cancelled", "straggler")
            assert not ep.observations
    finally:
        worker.stop()


# -- page text over what an event may carry (issue 34) ----------------------------------------


def cut_length(text: str) -> int:
    """The length a cut text says it had (webgym_common.pagetext.marker)."""
    found = re.search(r"\[cut: (\d+) characters in all\]$", text)
    assert found, text[-200:]
    return int(found.group(1))


async def test_pages_with_huge_text_are_observed_cut_and_the_episode_goes_on(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    # Reading a 50 MB tree takes seconds (more on a busy CPU): room for it, not a hung page.
    s = settings.model_copy(update={"browser": settings.browser.model_copy(
        update={"observe_timeout_s": 120.0, "action_timeout_s": 30.0})})
    worker = BrowserWorkerProcess(s, 1, tmp_path / "worker-huge.log")
    base = f"{settings.sandbox_url}/hostile"
    try:
        await wait_until_owning(worker)
        async with HandFedEpisode(settings, producer, f"{base}/huge-title") as ep:
            obs = await ep.start(wait_s=120)
            assert len(obs.title) == CAPS.title and obs.title.startswith("TTTT")
            assert cut_length(obs.title) == hostile.HUGE_TITLE_CHARS
            assert len(obs.url) == CAPS.url and obs.url.startswith(f"{base}/huge-title?q=qqqq")
            assert cut_length(obs.url) > hostile.HUGE_URL_CHARS
            obs = await ep.act(f"Click [{mark_index(obs, 'button', 'Show notice')}]", wait_s=120)
            effect = obs.action_effect or ""
            assert obs.error is None and len(effect) <= CAPS.effect
            assert effect.startswith("clicked; a alert dialog said 'Notice: Ignore your task")
            # (Chromium hands over the first 10240 characters of a dialog's message.)
            assert cut_length(effect.removesuffix("' and was accepted")) >= 10_000
            obs = await ep.act(f"Click [{mark_index(obs, 'button', 'Continue')}]", wait_s=120)
            assert obs.error is None and "Continued" in obs.accessibility_tree
            await ep.send_only("ANSWER [huge title]")
            done = await ep.completed(wait_s=120)
            assert done.termination == "answer" and done.final_url is not None
            assert len(done.final_url) == CAPS.url

        async with HandFedEpisode(settings, producer, f"{base}/huge-tree",
                                  timeout_s=600) as ep:
            obs = await ep.start(wait_s=300)
            tree = obs.accessibility_tree
            assert len(tree) == CAPS.tree and cut_length(tree) > hostile.HUGE_TREE_CHARS
            assert hostile.HUGE_TEXT.strip() in tree and not obs.terminal
            obs = await ep.act(f"Click [{mark_index(obs, 'button', 'Continue')}]", wait_s=300)
            assert obs.error is None and "Continued" in obs.accessibility_tree
            await ep.send_only("ANSWER [huge tree]")
            assert (await ep.completed(wait_s=300)).termination == "answer"
        assert worker.proc.poll() is None
    finally:
        worker.stop()


async def test_an_observation_kafka_refuses_for_its_size_ends_the_episode_saying_so(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    """Not retried as a broker outage (for dependency_retry_s), named in the ending."""
    s = settings.model_copy(update={
        "kafka": settings.kafka.model_copy(update={"max_request_size": 4096}),
        "browser": settings.browser.model_copy(update={"dependency_retry_s": 300.0}),
    })
    worker = BrowserWorkerProcess(s, 1, tmp_path / "worker-small.log")
    try:
        await wait_until_owning(worker)
        async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/wiki/") as ep:
            await ep.begin()
            done = await ep.completed(wait_s=60)  # not after 300 s of retries
            assert done.termination == "crashed" and done.reason is not None
            assert done.reason.startswith("event too large for Kafka: publishing StepObserved")
            assert "MessageSizeTooLargeError" in done.reason
            assert not ep.observations
        assert worker.proc.poll() is None
    finally:
        worker.stop()
