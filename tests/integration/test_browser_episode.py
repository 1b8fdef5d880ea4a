"""One episode in a real browser worker: real Chromium, real Kafka, real MinIO, sandbox web.

Mirrors producers/browser/episode.py and what it leans on (observe.py, endings.py, the URL
policy): a reference task end to end, hostile pages, popups, dialogs and downloads, refused
URLs, failing dependencies, a cancel, and page text over what an event may carry. Workers
sharing partitions (kills, rebalances) are in test_browser_worker.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path

import pytest

from environments import hostile
from harness.hand_fed import HandFedEpisode, mark_index
from harness.launch import BrowserWorkerProcess
from producers.drive_reference import drive, episode_request
from tests.support.browser_workers import wait_until_owning
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


# -- reliability (issue 9): failing dependencies, a cancel while opening -------------------------


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
