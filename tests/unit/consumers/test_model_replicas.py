"""The model loader with several vLLM replicas (policy.replicas): each version loaded into
every replica, announced once all of them list it; a replica that is down holds back the
announcement, never the others' loads; one that restarts gets the served versions again."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from consumers.model_loader import Loader, Serving
from consumers.model_servers import missing_loads
from tests.unit.consumers.test_model_loader import (
    DIGESTS,
    FILES,
    FakeProducer,
    FakeStore,
    FakeVllm,
    loader,
    no_waiting,
    version,
)
from webgym_common.events import ModelServed

__all__ = ["no_waiting"]  # the autouse fixture: no backoff sleeps here either

A, B = "http://a/v1", "http://b/v1"
LOAD = "POST /v1/load_lora_adapter"


class Replica(FakeVllm):
    """A fake vLLM that writes what it is asked into a journal shared with the others."""

    def __init__(self, url: str, journal: list[str], down: int = 0) -> None:
        super().__init__(down=down)
        self.url, self.journal = url, journal

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            self.journal.append(f"{self.url} down")
        response = super().__call__(request)
        name = json.loads(request.content)["lora_name"] if request.method == "POST" else ""
        self.journal.append(f"{self.url} {request.method} {request.url.path} {name}".strip())
        return response


class Announcing(FakeProducer):
    """Records, as each ModelServed goes out, what every replica lists at that moment."""

    def __init__(self, replicas: dict[str, Replica]) -> None:
        super().__init__()
        self.replicas = replicas
        self.listed_then: list[dict[str, set[str]]] = []

    async def publish(self, topic, key, event) -> None:  # type: ignore[no-untyped-def]
        self.listed_then.append({u: set(r.loaded) for u, r in self.replicas.items()})
        await super().publish(topic, key, event)


def two(journal: list[str], b_down: int = 0) -> dict[str, Replica]:
    return {A: Replica(A, journal), B: Replica(B, journal, down=b_down)}


def test_missing_loads_are_what_each_answering_replica_does_not_list() -> None:
    wanted = {"m-v2", "m-v3"}
    listed = {A: {"m", "m-v2", "m-v3"}, B: {"m", "m-v2"}, "http://c/v1": {"m"}}
    assert missing_loads(wanted, listed) == {B: {"m-v3"}, "http://c/v1": {"m-v2", "m-v3"}}
    assert missing_loads(wanted, {A: {"m-v2", "m-v3", "m-v1"}}) == {}
    assert missing_loads(set(), listed) == {}
    assert missing_loads(wanted, {}) == {}  # no replica answered: nothing to load now


async def test_a_version_is_announced_once_every_replica_lists_it(tmp_path: Path) -> None:
    journal: list[str] = []
    replicas = two(journal, b_down=4)  # b refuses connections for its first four requests
    producer = Announcing(replicas)
    serving = Serving(loader(tmp_path, replicas, FakeStore(FILES)), producer,  # type: ignore[arg-type]
                      {}, "m")
    await serving.handle(version(1))
    served = [e for _, _, e in producer.published if isinstance(e, ModelServed)]
    assert [(e.version, e.served_name) for e in served] == [(1, "webgym-policy-v1")]
    assert producer.listed_then[0] == {A: {"webgym-policy-v1"}, B: {"webgym-policy-v1"}}
    # The same directory for both (a shared volume in compose), loaded once into each.
    assert replicas[A].loaded == replicas[B].loaded
    loads = [e for e in journal if "POST /v1/load_lora_adapter" in e]
    assert loads == [f"{A} {LOAD} webgym-policy-v1", f"{B} {LOAD} webgym-policy-v1"]
    # a loaded at once, while b was still down: b held back the announcement, not a's load.
    assert journal.index(f"{A} {LOAD} webgym-policy-v1") < journal.index(f"{B} GET /v1/models")


async def test_a_replica_that_refuses_the_adapter_means_nothing_is_announced(
        tmp_path: Path) -> None:
    journal: list[str] = []
    replicas = two(journal)
    replicas[B].loaded["webgym-policy-v1"] = "/old/run/adapter"  # other weights, same name
    producer = Announcing(replicas)
    serving = Serving(loader(tmp_path, replicas, FakeStore(FILES)), producer,  # type: ignore[arg-type]
                      {}, "m")
    await serving.handle(version(1))
    assert producer.published == []


async def test_a_replica_that_restarts_or_starts_later_gets_the_served_versions(
        tmp_path: Path) -> None:
    journal: list[str] = []
    replicas = two(journal)
    load = loader(tmp_path, replicas, FakeStore(FILES))
    served = [ModelServed(model_name=m, version=3, served_name=f"{m}-v3",
                          checkpoint_uri=f"s3://c/{m}/3", file_sha256=DIGESTS)
              for m in ("webgym-policy", "webgym-policy-control")]
    await load.reconcile(served)  # both new: every served version onto both
    assert sorted(replicas[A].loaded) == sorted(replicas[B].loaded) == [
        "webgym-policy-control-v3", "webgym-policy-v3"]
    replicas[B].loaded.clear()  # b restarted: vLLM forgets its runtime adapters
    journal.clear()
    await load.reconcile(served)
    assert sorted(replicas[B].loaded) == ["webgym-policy-control-v3", "webgym-policy-v3"]
    assert [e for e in journal if e.startswith(A)] == [f"{A} GET /v1/models"]  # a: untouched


async def test_a_replica_that_is_down_is_tried_at_the_next_check_without_stopping_the_rest(
        tmp_path: Path) -> None:
    journal: list[str] = []
    replicas = two(journal, b_down=100)
    load = loader(tmp_path, replicas, FakeStore(FILES))
    served = [ModelServed(model_name="webgym-policy", version=1, served_name="webgym-policy-v1",
                          checkpoint_uri="s3://c/1", file_sha256=DIGESTS)]
    await load.reconcile(served)
    assert list(replicas[A].loaded) == ["webgym-policy-v1"] and replicas[B].loaded == {}
    replicas[B].down = 0  # b is back
    await load.reconcile(served)
    assert list(replicas[B].loaded) == ["webgym-policy-v1"]


async def test_while_a_version_waits_for_a_replica_the_check_goes_on(tmp_path: Path) -> None:
    journal: list[str] = []
    replicas = two(journal)
    load: Loader = loader(tmp_path, replicas, FakeStore(FILES))
    serving = Serving(load, Announcing(replicas), {}, "m")  # type: ignore[arg-type]
    await serving.handle(version(1))
    replicas[A].loaded.clear()  # a restarts, and b goes down, before v2 comes
    replicas[B].down = 3
    load.checked = 0.0  # a check is due
    journal.clear()
    await serving.handle(version(2))
    assert sorted(replicas[A].loaded) == sorted(replicas[B].loaded) == [
        "webgym-policy-v1", "webgym-policy-v2"]
    # v1 went back onto a while v2 waited for b, before b answered again
    assert journal.index(f"{A} {LOAD} webgym-policy-v1") < journal.index(f"{B} GET /v1/models")
    assert sorted(load.servers) == [A, B]


async def test_old_versions_are_unloaded_from_every_replica(tmp_path: Path) -> None:
    journal: list[str] = []
    replicas = two(journal)
    serving = Serving(loader(tmp_path, replicas, FakeStore(FILES)),  # type: ignore[arg-type]
                      Announcing(replicas), {}, "m")
    for n in (1, 2, 3, 4):
        await serving.handle(version(n))
    for r in replicas.values():
        assert sorted(r.loaded) == [f"webgym-policy-v{n}" for n in (2, 3, 4)]
    assert not (tmp_path / "adapters" / "webgym-policy-v1").exists()
