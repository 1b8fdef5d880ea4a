"""The model servers a VllmPolicy spreads its decisions over (policy.replicas; unset, the one
server policy.base_url names).

Each request goes to the replica with the fewest of this process's requests in flight
(`pick_replica`; a tie goes to the one listed first), skipping a replica that failed in the
last policy.replica_cooldown_s. A replica fails a request by not answering (connection
refused or reset, a timeout), by a 5xx, or by a 404 for the model: vLLM forgets its
runtime adapters when it restarts, and lists them again only once the model loader's
check has reloaded them (consumers/model_loader.py). The model loader announces a version
only once every replica lists it, so any replica is asked for the served name; the policy
asks a replica again once its cool-down ends, and a success ends it at once. When every
replica is cooling down, the request goes to the one with the fewest in flight all the
same: with a single replica this is the single server as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TypeVar

from openai import APIConnectionError, AsyncOpenAI, InternalServerError, NotFoundError

log = logging.getLogger("processors.policy.policies")
T = TypeVar("T")

# What makes a replica cool down: it is away, overloaded, or lacks the model (restarted).
REPLICA_FAILURES = (APIConnectionError, InternalServerError, NotFoundError)


def pick_replica(in_flight: Mapping[str, int], cooling: Collection[str]) -> str | None:
    """The replica to ask: the fewest requests in flight among those not cooling down, the
    first listed of equals; None when every replica is cooling down."""
    ready = [replica for replica in in_flight if replica not in cooling]
    return min(ready, key=lambda replica: in_flight[replica], default=None)


class Replicas:
    """The replicas' clients, their requests in flight and their cool-downs."""

    def __init__(self, clients: Mapping[str, AsyncOpenAI], cooldown_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clients = dict(clients)
        self.in_flight = dict.fromkeys(self.clients, 0)
        self.cooldown_s, self.clock = cooldown_s, clock
        self.until: dict[str, float] = {}  # replica -> when its cool-down ends

    def cooling(self) -> set[str]:
        now = self.clock()
        return {replica for replica, until in self.until.items() if until > now}

    def ready(self) -> bool:
        """Whether a replica that is not cooling down can take a request."""
        return pick_replica(self.in_flight, self.cooling()) is not None

    def pick(self) -> str:
        chosen = pick_replica(self.in_flight, self.cooling()) or pick_replica(self.in_flight, ())
        assert chosen is not None, "no replica"
        return chosen

    async def ask(self, call: Callable[[AsyncOpenAI], Awaitable[T]]) -> tuple[T, str]:
        """`call` with the client of the replica picked now, and which replica answered. A
        failure cools that replica down and is raised: the caller tries again, on another
        replica where one is ready."""
        replica = self.pick()
        self.in_flight[replica] += 1
        try:
            answer = await call(self.clients[replica])
        except REPLICA_FAILURES as err:
            if len(self.clients) > 1:
                log.warning("replica %s failed (%s: %s); it cools down for %.0fs", replica,
                            type(err).__name__, str(err)[:200], self.cooldown_s)
            self.until[replica] = self.clock() + self.cooldown_s
            raise
        finally:
            self.in_flight[replica] -= 1
        self.until.pop(replica, None)
        return answer, replica
