"""`webgym pipeline up --with-envserver`: the env server under the pipeline's supervisor.

Real processes on the real embedded stack, driven through the CLI as a user would: the
pipeline (teacher policy) with the env server beside it, an AgentGym-style client over
plain HTTP (create, reset, observation, step, close: every answer a 200 whose body is
JSON, as AgentGym's client decodes it), the server SIGKILLed and restarted by the
supervisor, and `webgym pipeline down` leaving no process and a free port.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.agentgym_client import reference_reply
from infra.procs import free_port, pid_alive
from producers.catalog import load_tasks
from tests.support.pipeline_cli import pid_of, ready, row, webgym
from webgym_common.config import Settings
from webgym_common.stream.bus import EventProducer
from webgym_common.tasks import read_task_file

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
SANDBOX = Path("environments/tasks/sandbox_tasks.jsonl")
TASKS, _ = read_task_file(SANDBOX)
IDX = {t.task_id: i for i, t in enumerate(sorted(TASKS, key=lambda t: t.task_id))}
TASK = next(t for t in TASKS if t.task_id == "shop-001")
# What `up` starts with the env server asked for and training off.
NAMES = ["browser", "policy", "evaluator", "history", "metrics", "replay", "envserver"]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def call(http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any) -> Any:
    """One request as AgentGym's client makes it: a 200 whose body decodes as JSON."""
    async with http.request(method, url, **kwargs) as response:
        text = await response.text()
        assert response.status == 200, (method, url, response.status, text)
        return json.loads(text)


async def test_the_supervised_env_server_serves_an_agentgym_client_and_down_stops_it(
    settings: Settings, producer: EventProducer,
) -> None:
    s = settings.model_copy(update={"envserver": settings.envserver.model_copy(
        update={"port": free_port()})})
    url = f"http://127.0.0.1:{s.envserver.port}"
    assert not (await load_tasks(SANDBOX, producer)).bad
    running: list[int | None] = []
    supervisor = None
    try:
        before = webgym(s, "pipeline", "status")
        assert "not started (optional: up --with-envserver)" in row(before.stdout, "envserver")
        up = webgym(s, "pipeline", "up", "--policy", "teacher", "--contexts", "2",
                    "--with-envserver")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "envserver" in up.stdout
        assert all(pid_of(s, n) and ready(s, n) for n in NAMES)
        supervisor = int((s.infra.data_dir / "run" / "pipeline-supervisor.pid").read_text())
        status = webgym(s, "pipeline", "status")
        assert status.returncode == 0, status.stdout  # every process ready, the server too
        assert "ready" in row(status.stdout, "envserver")

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as http:
            env_idx = (await call(http, "POST", url + "/create"))["env_idx"]
            reset = await call(http, "POST", url + "/reset",
                               json={"env_idx": env_idx, "seed": 0, "idx": IDX[TASK.task_id]})
            assert reset["object"] == TASK.task_name and reset["sites"] == [TASK.domain]
            observation = reset["observation"]
            assert observation.startswith("OBSERVATION:\n"), reset
            assert await call(http, "GET", url + "/observation",
                              params={"env_idx": str(env_idx)}) == observation
            for ref in TASK.reference_actions:
                result = await call(http, "POST", url + "/step", json={
                    "env_idx": env_idx, "action": reference_reply(ref, observation)})
                assert not result["info"].get("error"), result
                observation = result["observation"]
                if result["terminated"]:
                    break
            assert result["terminated"] and result["reward"] == 1.0, result
            assert await call(http, "POST", url + "/close",
                              json={"env_idx": env_idx}) == {"closed": "closed"}
            assert await call(http, "GET", url + "/list_envs") == []

            # Killed, the server is restarted by the supervisor and serves again.
            killed = pid_of(s, "envserver")
            assert killed is not None
            os.killpg(killed, signal.SIGKILL)
            async with asyncio.timeout(120):
                while pid_of(s, "envserver") in (None, killed) or not ready(s, "envserver"):  # noqa: ASYNC110 (polls files)
                    await asyncio.sleep(0.3)
            assert await call(http, "GET", url + "/list_envs") == []  # a new server: no envs
        restarted = webgym(s, "pipeline", "status")
        assert " 1 " in row(restarted.stdout, "envserver")
        assert "SIGKILL" in row(restarted.stdout, "envserver")
        running = [pid_of(s, n) for n in NAMES]
    finally:
        down = webgym(s, "pipeline", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "envserver" in down.stdout
    assert supervisor is not None and not pid_alive(supervisor)
    assert not any(pid_alive(p) for p in running if p)
    await asyncio.sleep(2.0)  # four times the backoff: a restart after `down` would show
    assert not list((s.infra.data_dir / "run").glob("pipeline-*.pid"))
    assert not listening(s.envserver.port)
    after = webgym(s, "pipeline", "status")
    assert after.returncode == 1 and "supervisor: not running" in after.stdout
    assert all("stopped" in row(after.stdout, n) for n in NAMES)
