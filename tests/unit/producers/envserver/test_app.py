"""The env server's HTTP side with a fake producer: the pipeline's events are fed by hand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from producers.envserver.app import make_app
from producers.envserver.server import EnvServer
from tests.unit.producers.envserver.fakes import TASKS, FakeProducer
from webgym_common.config import Settings, load_settings
from webgym_common.events import (
    ActionChosen,
    CancelEpisode,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    Mark,
    StepObserved,
    Task,
    Viewport,
)


def observed(eid: str, step: int, terminal: bool = False) -> StepObserved:
    return StepObserved(
        episode_id=eid, task_id="t", step=step, url=f"http://x/{step}", title="Shop",
        viewport=Viewport(width=1, height=1), terminal=terminal,
        accessibility_tree='- button "Go" [ref=e1] [box=1,1,5,5]',
        marks=[Mark(index=1, ref="e1", role="button", name="Go", x=1, y=1, width=5, height=5)])


def completed(eid: str, termination: str) -> EpisodeCompleted:
    return EpisodeCompleted(episode_id=eid, task_id="t", iteration=0, split="train", steps=1,
                            termination=termination, started_at=datetime.now(UTC))


def scored(eid: str, reward: float) -> EpisodeScored:
    return EpisodeScored(episode_id=eid, task_id="t", domain="d", iteration=0, split="train",
                         reward=reward, evaluation="ok", is_blocked=False, crashed=False,
                         submit=True, termination="answer", steps=1, evaluator_version="v",
                         policy_version="envserver")


class Pipeline:
    """Stands in for the browser worker and the evaluator: answers what the server publishes."""

    def __init__(self, server: EnvServer, producer: FakeProducer) -> None:
        self.server, self.producer = server, producer
        self.seen = 0
        self.silent = False

    def feed(self, event: StepObserved | EpisodeCompleted | EpisodeScored) -> None:
        episode = self.server.episodes.get(event.episode_id)
        if episode is not None and episode.take(event):
            self.server.signals[event.episode_id].set()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            for _, _, event in self.producer.sent[self.seen:]:
                self.seen += 1
                if self.silent:
                    continue
                if isinstance(event, EpisodeRequested):
                    self.feed(observed(event.episode_id, 0))
                elif isinstance(event, ActionChosen) and event.action.kind == "ANSWER":
                    self.feed(completed(event.episode_id, "answer"))
                    self.feed(scored(event.episode_id, 1.0))
                elif isinstance(event, ActionChosen):
                    self.feed(observed(event.episode_id, event.step + 1))


@pytest.fixture
def settings() -> Settings:
    return load_settings(envserver={"max_envs": 3, "reset_timeout_s": 0.5,
                                    "step_timeout_s": 0.5, "score_timeout_s": 0.5,
                                    "reap_interval_s": 0.05, "idle_timeout_s": 0.3})


@pytest_asyncio.fixture(loop_scope="session")
async def served(settings: Settings) -> AsyncIterator[tuple[TestClient, EnvServer, Pipeline]]:
    producer = FakeProducer()

    async def catalog() -> list[Task]:
        return list(TASKS)

    server = EnvServer(settings, producer, catalog)  # type: ignore[arg-type]
    pipeline = Pipeline(server, producer)
    task = asyncio.create_task(pipeline.run())
    async with TestClient(TestServer(make_app(server))) as client:
        yield client, server, pipeline
    task.cancel()


async def post(client: TestClient, path: str, **body: Any) -> Any:
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    return await response.json() if response.content_type == "application/json" \
        else await response.text()


async def test_an_episode_through_the_routes(served) -> None:
    client, server, pipeline = served
    assert await (await client.get("/")).text() == "ok"
    env = (await post(client, "/create"))["env_idx"]
    assert await (await client.get("/list_envs")).json() == [env]
    reset = await post(client, "/reset", env_idx=env, seed=0, idx=0)
    assert reset["object"] == "task 1" and reset["sites"] == ["sandbox-shop"]  # shop-001
    assert reset["observation"].startswith("OBSERVATION:\nRootWebArea 'Shop'")
    assert "\t[1] button 'Go'" in reset["observation"]
    assert "PREVIOUS ACTION: None" in reset["observation"]
    (request,) = pipeline.producer.of(EpisodeRequested)
    assert request.driver == "external" and request.task.task_id == "shop-001"

    step = await post(client, "/step", env_idx=env, action="I click it ```click [1]```")
    assert step["reward"] == 0 and not step["terminated"] and step["info"]["step"] == 1
    assert "PREVIOUS ACTION: click [1] where [1] is button 'Go'" in step["observation"]
    (chosen,) = pipeline.producer.of(ActionChosen)
    assert chosen.step == 0 and chosen.action_string == "Click [1]"
    assert chosen.raw_response == "I click it ```click [1]```"
    assert await (await client.get(f"/observation?env_idx={env}")).json() == step["observation"]

    unsupported = await post(client, "/step", env_idx=env, action="```press [Enter]```")
    assert unsupported["reward"] == 0 and not unsupported["terminated"]
    assert unsupported["observation"].startswith("Unsupported action")
    assert len(pipeline.producer.of(ActionChosen)) == 1  # nothing published

    done = await post(client, "/step", env_idx=env, action="```stop [$5]```")
    assert done["terminated"] and not done["truncated"] and done["reward"] == 1.0
    assert done["info"]["termination"] == "answer"
    assert await post(client, "/close", env_idx=env) == {"closed": "closed"}
    assert await (await client.get("/list_envs")).json() == []
    assert not pipeline.producer.of(CancelEpisode)  # it had ended: nothing to cancel


async def test_bad_requests_get_clear_errors_and_leave_other_envs_alone(served) -> None:
    client, server, pipeline = served
    env = (await post(client, "/create"))["env_idx"]
    await post(client, "/reset", env_idx=env, seed=0, idx=1)

    async def error(method: str, path: str, status: int, **kw: Any) -> str:
        response = await client.request(method, path, **kw)
        assert response.status == status, await response.text()
        return (await response.json())["error"]

    assert "unknown env_idx 99" in await error("POST", "/step", 404,
                                               json={"env_idx": 99, "action": "x"})
    assert "malformed JSON" in await error("POST", "/step", 400, data=b"{not json")
    assert "missing field(s): action" in await error("POST", "/step", 400,
                                                      json={"env_idx": env})
    assert "missing field(s): idx" in await error("POST", "/reset", 400, json={"env_idx": env})
    assert "env_idx must be an integer" in await error("POST", "/close", 400,
                                                       json={"env_idx": "zero"})
    assert "out of range" in await error("POST", "/reset", 400,
                                         json={"env_idx": env, "seed": 0, "idx": 5})
    assert "JSON object" in await error("POST", "/step", 400, json=[env, "x"])
    assert "missing query parameter" in await error("GET", "/observation", 400)
    other = (await post(client, "/create"))["env_idx"]
    assert "POST /reset first" in await error("POST", "/step", 409,
                                              json={"env_idx": other, "action": "```go_back```"})
    await post(client, "/create")
    assert "most this server allows" in await error("POST", "/create", 503)
    # the first env still works
    step = await post(client, "/step", env_idx=env, action="```click [1]```")
    assert step["info"]["step"] == 1 and not step["terminated"]


async def test_reset_cancels_the_running_episode_and_timeouts_answer_200(served) -> None:
    client, server, pipeline = served
    env = (await post(client, "/create"))["env_idx"]
    await post(client, "/reset", env_idx=env, seed=0, idx=0)
    first = pipeline.producer.of(EpisodeRequested)[-1].episode_id
    pipeline.silent = True  # the browser stops answering
    step = await post(client, "/step", env_idx=env, action="```click [1]```")
    assert step["observation"].startswith("TimeoutError") and step["reward"] == 0
    reset = await post(client, "/reset", env_idx=env, seed=0, idx=1)
    assert reset["observation"] == "TimeoutError" and "no start page" in reset["error"]
    (cancel,) = pipeline.producer.of(CancelEpisode)
    assert cancel.episode_id == first and "reset" in cancel.reason


async def test_idle_envs_are_reaped_and_their_episodes_cancelled(served) -> None:
    client, server, pipeline = served
    envs = [(await post(client, "/create"))["env_idx"] for _ in range(3)]
    for env in envs:
        await post(client, "/reset", env_idx=env, seed=0, idx=0)
    reaper = asyncio.create_task(server.reap())
    try:
        async with asyncio.timeout(5):
            while server.envs:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    finally:
        reaper.cancel()
    cancelled = {c.episode_id for c in pipeline.producer.of(CancelEpisode)}
    assert cancelled == {r.episode_id for r in pipeline.producer.of(EpisodeRequested)}
    assert not server.episodes and not server.signals
    response = await client.post("/step", json={"env_idx": envs[0], "action": "```go_back```"})
    assert response.status == 404 and "reaped" in (await response.json())["error"]
