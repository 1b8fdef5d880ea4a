"""Browser workers as real processes: real Chromium, real Kafka, real MinIO, sandbox web."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from producers.drive_reference import drive, episode_request
from tests.support.hand_fed import HandFedEpisode, mark_index
from webgym_common.bus import EventProducer, read_events
from webgym_common.config import Settings
from webgym_common.events import CancelEpisode
from webgym_common.objectstore import ObjectStore
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS, _ = read_task_file(Path("infra/sandbox/tasks/sandbox_tasks.jsonl"))
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
    async with HandFedEpisode(settings, producer, f"{settings.sandbox_url}/wiki/") as ep:
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
        # The new owner replays the log: the episode continues where it was.
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
