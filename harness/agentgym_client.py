"""A client written to AgentGym's documented env-server API (agentenv's WebArena client:
create, reset, step with the model's raw reply, close), for tests and benchmarks.

Plain HTTP, nothing of the server imported: the server must work for a client that knows
only the routes and the JSON. `reference_reply` plays the model: it turns a task's
reference step into a reply in WebArena's prompt style, the element id read from the
observation text (`[12] link 'Foo'`).
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp

from webgym_common.events import ReferenceAction


class AgentGymClient:
    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session, self.base_url = session, base_url.rstrip("/")
        self.env_idx: int | None = None

    async def _post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        async with self.session.post(f"{self.base_url}{path}", json=body) as response:
            assert response.status == 200, (path, response.status, await response.text())
            if response.content_type == "application/json":
                return await response.json()
            return await response.text()

    async def create(self) -> int:
        self.env_idx = (await self._post("/create"))["env_idx"]
        return self.env_idx

    async def reset(self, idx: int) -> dict[str, Any]:
        return await self._post("/reset", {"env_idx": self.env_idx, "seed": 0, "idx": idx})

    async def step(self, reply: str) -> dict[str, Any]:
        return await self._post("/step", {"env_idx": self.env_idx, "action": reply})

    async def observe(self) -> str:
        async with self.session.get(f"{self.base_url}/observation",
                                    params={"env_idx": str(self.env_idx)}) as response:
            assert response.status == 200
            return await response.json()

    async def close(self) -> dict[str, str]:
        return await self._post("/close", {"env_idx": self.env_idx})


def element_id(observation: str, role: str, name: str, nth: int = 0) -> int:
    """The id the observation text gives the element `role 'name'`."""
    found = re.findall(rf"^\t*\[(\d+)\] {re.escape(role)} '{re.escape(name)}'", observation,
                       re.M)
    assert len(found) > nth, f"no {role} '{name}' in:\n{observation[:3000]}"
    return int(found[nth])


def webarena_action(ref: ReferenceAction, observation: str) -> str:
    """A reference step in WebArena's grammar."""
    if ref.action == "ANSWER":
        return f"stop [{ref.text or ''}]"
    if ref.action == "Scroll" and ref.role is None:
        return f"scroll [{ref.direction or 'down'}]"
    target = element_id(observation, ref.role or "", ref.name or "", ref.nth or 0)
    if ref.action == "Type":
        return f"type [{target}] [{ref.text or ''}] [1]"
    return f"{ref.action.lower()} [{target}]"


def reference_reply(ref: ReferenceAction, observation: str) -> str:
    """What a model prompted with WebArena's p_cot_id_actree_2s would answer."""
    return ("Let's think step-by-step. The page shows what the objective needs. In summary, "
            f"the next action I will perform is ```{webarena_action(ref, observation)}```")
