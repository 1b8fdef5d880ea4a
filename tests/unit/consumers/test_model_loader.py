"""The model loader's decisions, and its load step against a fake vLLM and object store."""

from __future__ import annotations

import hashlib
import io
import json
import ssl
from pathlib import Path

import fastavro
import httpx
import pytest

import consumers.model_loader as ml
from consumers.model_loader import (
    Loader,
    Plan,
    Serving,
    adapter_uris,
    backoff_s,
    content_digest,
    newest,
    plan,
    to_unload,
)
from consumers.model_servers import ModelServer, Outcome, listed_outcome, load_outcome
from webgym_common.codec import SINGLE_OBJECT_MAGIC, Codec
from webgym_common.config import load_settings
from webgym_common.events import Event, ModelServed, ModelVersion
from webgym_common.objectstore import ObjectStoreError
from webgym_common.schemas import SCHEMA_DIR, build_schema
from webgym_common.topics import Topic
from webgym_common.versions import served_name


def version(n: int, model: str = "webgym-policy", kind: str = "lora") -> ModelVersion:
    return ModelVersion(model_name=model, version=n, checkpoint_uri=f"s3://ckpt/{model}/{n}/",
                        base_model="smollm2", finetuning_type=kind, file_sha256=DIGESTS)


def test_each_version_has_a_name_of_its_own() -> None:
    assert served_name("webgym-policy", 1) == "webgym-policy-v1"
    assert served_name("webgym-policy", 12) == "webgym-policy-v12"


def test_only_a_lora_version_newer_than_the_one_served_is_loaded() -> None:
    served = {"webgym-policy": 2}
    assert plan(version(3), served) is Plan.LOAD
    assert plan(version(2), served) is Plan.OLD and plan(version(1), served) is Plan.OLD
    assert plan(version(1, "other"), served) is Plan.LOAD  # nothing of it served yet
    assert plan(version(3, kind="full"), served) is Plan.FULL
    assert plan(version(2, kind="full"), served) is Plan.OLD


def test_the_backlog_is_the_newest_version_of_each_model() -> None:
    events: list[Event] = [version(1), version(1, "b"), version(3), version(2), version(2, "b")]
    assert [(m.model_name, m.version) for m in newest(events)] == [("webgym-policy", 3),
                                                                   ("b", 2)]
    assert newest([]) == []


def test_what_vllms_answer_to_a_load_means() -> None:
    assert load_outcome(200, "Success") is Outcome.LOADED
    already = ("The lora adapter 'webgym-policy-v1' has already been loaded. If you want to "
               "load the adapter in place, set 'load_inplace' to True.")
    assert load_outcome(400, already) is Outcome.ALREADY
    for status in (408, 429, 502, 503, 504):
        assert load_outcome(status, "") is Outcome.TRANSIENT
    conflict = "The lora adapter 'webgym-policy' conflicts with a served base model."
    for status, body in ((400, conflict), (404, "not found"), (500, "rank 128 > 16")):
        assert load_outcome(status, body) is Outcome.REJECTED


def test_a_name_counts_as_served_only_from_our_own_directory() -> None:
    path = Path("/data/adapters/webgym-policy-v1/abc")
    assert listed_outcome(Outcome.LOADED, str(path), path) == (Outcome.LOADED, "listed")
    assert listed_outcome(Outcome.ALREADY, str(path), path) == (Outcome.ALREADY, "listed")
    assert listed_outcome(Outcome.LOADED, None, path)[0] is Outcome.TRANSIENT
    outcome, why = listed_outcome(Outcome.ALREADY, "/old/run/abc", path)
    assert outcome is Outcome.REJECTED and "/old/run/abc" in why


def test_versions_older_than_the_previous_two_are_unloaded() -> None:
    listed = ["webgym-policy", "webgym-policy-v1", "webgym-policy-v2", "webgym-policy-v10",
              "webgym-policy-v3", "webgym-policy-v4", "other-v1", "webgym-policy-vx"]
    assert to_unload(listed, "webgym-policy", 4) == ["webgym-policy-v1"]
    assert to_unload(listed, "webgym-policy", 10) == [f"webgym-policy-v{n}" for n in (1, 2, 3, 4)]
    assert to_unload(listed, "webgym-policy", 3) == []
    assert to_unload(listed, "webgym-policy", 4, keep=1) == [f"webgym-policy-v{n}"
                                                             for n in (1, 2, 3)]


def test_the_adapter_files_live_under_the_checkpoint_prefix() -> None:
    expected = {"adapter_config.json": "s3://b/runs/r1/adapter_config.json",
                "adapter_model.safetensors": "s3://b/runs/r1/adapter_model.safetensors"}
    assert adapter_uris("s3://b/runs/r1") == expected == adapter_uris("s3://b/runs/r1/")


def test_the_directory_digest_follows_the_content_only() -> None:
    a = content_digest({"x": b"1", "y": b"2"})
    assert a == content_digest({"y": b"2", "x": b"1"}) and len(a) == 16
    assert a != content_digest({"x": b"1", "y": b"3"})
    assert content_digest({"x": b"12", "y": b""}) != content_digest({"x": b"1", "y": b"2"})


def test_backoff_doubles_up_to_a_cap() -> None:
    assert [backoff_s(a) for a in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_s(10_000) == 30


# -- the load step against a fake vLLM (httpx's MockTransport) and object store ----------


class FakeStore:
    def __init__(self, files: dict[str, bytes], fail: int = 0) -> None:
        self.files, self.fail = files, fail

    async def get_blob(self, uri: str) -> bytes:
        if self.fail:
            self.fail -= 1
            raise ObjectStoreError("MinIO did not answer")
        return self.files[uri.rsplit("/", 1)[-1]]


class FakeVllm:
    """load_lora_adapter and /models as vLLM answers them; `down` requests refused first."""

    def __init__(self, down: int = 0, taken: dict[str, str] | None = None) -> None:
        self.down = down
        self.loaded: dict[str, str] = dict(taken or {})
        self.calls: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url.path}")
        if self.down:
            self.down -= 1
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path == "/v1/models":
            data = [{"id": "webgym-policy", "root": "/models/smollm2"}]
            data += [{"id": n, "root": p} for n, p in self.loaded.items()]
            return httpx.Response(200, json={"data": data})
        body = json.loads(request.content)
        if request.url.path == "/v1/unload_lora_adapter":
            self.loaded.pop(body["lora_name"], None)
            return httpx.Response(200, text="Success")
        if body["lora_name"] in self.loaded:
            return httpx.Response(400, json={"error": {"message": f"The lora adapter "
                                             f"'{body['lora_name']}' has already been loaded."}})
        self.loaded[body["lora_name"]] = body["lora_path"]
        return httpx.Response(200, text="Success")


FILES = {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"weights"}
DIGESTS = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}


def fake_server(vllm: FakeVllm, url: str = "http://vllm/v1") -> ModelServer:
    server = ModelServer(url, "k", 5)
    server.http = httpx.AsyncClient(base_url=f"{url}/", transport=httpx.MockTransport(vllm))
    return server


def loader(tmp_path: Path, vllm: FakeVllm | dict[str, FakeVllm], store: FakeStore,
           require_digests: bool = True) -> Loader:
    """A loader of one replica, or of one replica per url -> fake vLLM."""
    settings = load_settings(infra={"data_dir": str(tmp_path)},
                             model_loader={"load_timeout_s": 1,
                                           "require_digests": require_digests})
    replicas = vllm if isinstance(vllm, dict) else {"http://vllm/v1": vllm}
    return Loader(settings, store,  # type: ignore[arg-type]
                  [fake_server(fake, url) for url, fake in replicas.items()])


class FakeProducer:
    def __init__(self) -> None:
        self.published: list[tuple[Topic, str, Event]] = []

    async def publish(self, topic: Topic, key: str, event: Event) -> None:
        self.published.append((topic, key, event))


def files_in(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() if p.is_file() else b"" for p in sorted(directory.iterdir())}


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ml, "backoff_s", lambda attempt: 0.0)


async def test_a_version_is_served_from_its_own_directory_once_vllm_lists_it(
        tmp_path: Path) -> None:
    vllm = FakeVllm(down=3)  # vLLM down for the first three requests: tried again
    load = loader(tmp_path, vllm, FakeStore(FILES, fail=2))  # and MinIO for two
    assert await load.load("webgym-policy", 1, "s3://ckpt/1", DIGESTS) is not None
    path = Path(vllm.loaded["webgym-policy-v1"])
    assert path.parent == tmp_path / "adapters" / "webgym-policy-v1"
    assert path.name == content_digest(FILES)
    assert files_in(path) == FILES
    assert list(files_in(path.parent)) == [path.name]  # nothing half-written left
    # Loaded again (a loader restarted before announcing it): vLLM's "already loaded" is fine.
    assert await load.load("webgym-policy", 1, "s3://ckpt/1", DIGESTS) is not None


async def test_a_name_vllm_serves_from_elsewhere_is_refused_not_reused(tmp_path: Path) -> None:
    vllm = FakeVllm(taken={"webgym-policy-v1": "/old/run/adapter"})
    assert await loader(tmp_path, vllm, FakeStore(FILES)).load("webgym-policy", 1,
                                                                "s3://c/1", DIGESTS) is None


async def test_serving_announces_a_new_version_only_after_loading_and_unloads_old_ones(
        tmp_path: Path) -> None:
    vllm = FakeVllm()
    load = loader(tmp_path, vllm, FakeStore(FILES))
    producer = FakeProducer()
    serving = Serving(load, producer, {}, "base-model")  # type: ignore[arg-type]
    for n in (1, 2, 3, 4):
        await serving.handle(version(n))
    await serving.handle(version(2))  # older than served: nothing
    await serving.handle(version(5, kind="full"))  # not hot-loadable on the CPU: nothing
    announced = [e for _, _, e in producer.published]
    assert all(t is Topic.MODELS_SERVED and k == "webgym-policy"
               for t, k, _ in producer.published)
    assert [(e.version, e.served_name) for e in announced if isinstance(e, ModelServed)] == [
        (n, f"webgym-policy-v{n}") for n in (1, 2, 3, 4)]
    assert all(isinstance(e, ModelServed) and e.load_ms > 0 for e in announced)
    assert sorted(vllm.loaded) == ["webgym-policy-v2", "webgym-policy-v3", "webgym-policy-v4"]
    assert not (tmp_path / "adapters" / "webgym-policy-v1").exists()
    # Each load was checked against /v1/models before its announcement.
    loads = [i for i, c in enumerate(vllm.calls) if c.endswith("load_lora_adapter")
             and "unload" not in c]
    assert all(vllm.calls[i + 1] == "GET /v1/models" for i in loads)


async def test_a_version_with_nothing_trained_is_served_as_the_base_model(
        tmp_path: Path) -> None:
    """The trainer's run had no eligible sample on top of the base: no checkpoint at all."""
    vllm = FakeVllm()
    producer = FakeProducer()
    serving = Serving(loader(tmp_path, vllm, FakeStore(FILES)), producer, {},  # type: ignore[arg-type]
                      "base-model")
    empty = version(1).model_copy(update={"checkpoint_uri": ""})
    assert plan(empty, {}) is Plan.BASE
    await serving.handle(empty)
    await serving.handle(version(2))  # the next real adapter loads as usual
    announced = [e for _, _, e in producer.published if isinstance(e, ModelServed)]
    assert [(e.version, e.served_name, e.checkpoint_uri) for e in announced] == [
        (1, "base-model", ""), (2, "webgym-policy-v2", version(2).checkpoint_uri)]
    assert list(vllm.loaded) == ["webgym-policy-v2"]
    await serving.loader.reconcile(announced)  # the base is never "lost"
    assert list(vllm.loaded) == ["webgym-policy-v2"]


async def test_a_served_name_vllm_lost_is_loaded_again(tmp_path: Path) -> None:
    vllm = FakeVllm()
    load = loader(tmp_path, vllm, FakeStore(FILES))
    served = ModelServed(model_name="webgym-policy", version=3, served_name="webgym-policy-v3",
                         checkpoint_uri="s3://c/3", file_sha256=DIGESTS)
    await load.reconcile([served])  # vLLM restarted: it knows no adapter
    assert list(vllm.loaded) == ["webgym-policy-v3"]
    calls = len(vllm.calls)
    await load.reconcile([served])  # listed: nothing to do
    assert vllm.calls[calls:] == ["GET /v1/models"]


# -- what is loaded at all: the trainer's files under a model name ------------------------


async def test_a_file_that_differs_from_its_published_digest_is_never_loaded(
        tmp_path: Path) -> None:
    vllm = FakeVllm()
    tampered = {**FILES, "adapter_model.safetensors": b"someone else's weights"}
    load = loader(tmp_path, vllm, FakeStore(tampered))
    assert await load.load("webgym-policy", 1, "s3://ckpt/1", DIGESTS) is None
    assert vllm.calls == []  # vLLM never asked
    assert not (tmp_path / "adapters" / "webgym-policy-v1").exists()  # nothing written
    # a digest missing for a file it loads is refused the same way
    partial = {"adapter_config.json": DIGESTS["adapter_config.json"]}
    assert await load.load("webgym-policy", 1, "s3://ckpt/1", partial) is None
    assert vllm.calls == []


async def test_serving_refuses_a_tampered_version_and_announces_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    vllm = FakeVllm()
    producer = FakeProducer()
    tampered = {**FILES, "adapter_config.json": b'{"r": 8, "target_modules": "all"}'}
    serving = Serving(loader(tmp_path, vllm, FakeStore(tampered)), producer, {},  # type: ignore[arg-type]
                      "base-model")
    await serving.handle(version(1))
    assert producer.published == [] and vllm.loaded == {}
    assert "webgym-policy-v1 NOT served" in caplog.text
    assert "adapter_config.json has sha256" in caplog.text  # says which file differs


async def test_a_version_published_without_digests_is_refused_unless_allowed(
        tmp_path: Path) -> None:
    vllm = FakeVllm()
    assert await loader(tmp_path, vllm, FakeStore(FILES)).load(
        "webgym-policy", 1, "s3://ckpt/1", {}) is None
    assert vllm.calls == []
    allowing = loader(tmp_path, vllm, FakeStore(FILES), require_digests=False)
    assert await allowing.load("webgym-policy", 1, "s3://ckpt/1", {}) is not None
    assert list(vllm.loaded) == ["webgym-policy-v1"]


async def test_the_served_event_carries_the_digests_a_reload_checks_again(
        tmp_path: Path) -> None:
    vllm, producer = FakeVllm(), FakeProducer()
    store = FakeStore(FILES)
    serving = Serving(loader(tmp_path, vllm, store), producer, {}, "b")  # type: ignore[arg-type]
    await serving.handle(version(1))
    served = [e for _, _, e in producer.published if isinstance(e, ModelServed)]
    assert [e.file_sha256 for e in served] == [DIGESTS]
    vllm.loaded.clear()  # vLLM restarted ...
    store.files = {**FILES, "adapter_model.safetensors": b"swapped meanwhile"}  # ... and then
    await serving.loader.reconcile(served)
    assert vllm.loaded == {}


@pytest.mark.parametrize("name", ["../../etc", "a/b", "..", ".hidden", "-x", "", "x" * 101,
                                  "m\nx", "m v"])
async def test_a_model_name_that_is_no_name_is_refused_before_any_path_is_built(
        tmp_path: Path, name: str) -> None:
    vllm, producer = FakeVllm(), FakeProducer()
    load = loader(tmp_path, vllm, FakeStore(FILES))
    serving = Serving(load, producer, {}, "b")  # type: ignore[arg-type]
    await serving.handle(version(1, model=name))
    assert await load.load(name, 1, "s3://ckpt/1", DIGESTS) is None
    await load.reconcile([ModelServed(model_name=name, version=1, served_name=f"{name}-v1",
                                        checkpoint_uri="s3://c/1", file_sha256=DIGESTS)])
    assert producer.published == [] and vllm.loaded == {}
    assert "load_lora_adapter" not in " ".join(vllm.calls)
    assert not (tmp_path / "adapters").exists()


def test_a_model_version_written_before_digests_decodes_with_none() -> None:
    archived = next((SCHEMA_DIR / "archive").glob("ModelVersion.v1.*.avsc"))
    writer = build_schema(json.loads(archived.read_text()), {})
    assert "file_sha256" not in [f["name"] for f in writer.raw["fields"]]
    body = io.BytesIO()
    old = version(4).model_dump(exclude={"file_sha256"})
    old["produced_at"] = int(old["produced_at"].timestamp() * 1000)
    fastavro.schemaless_writer(body, writer.parsed, old)
    decoded = Codec().decode(SINGLE_OBJECT_MAGIC + writer.fingerprint + body.getvalue())
    assert isinstance(decoded, ModelVersion)
    assert (decoded.version, decoded.file_sha256) == (4, {})


async def test_the_model_server_verifies_tls_unless_told_not_to() -> None:
    verifying = ModelServer("https://vllm.example/v1", "k", 5)
    trusting = ModelServer("https://vllm.example/v1", "k", 5, tls_verify=False)
    try:
        assert ssl_context(verifying).verify_mode is ssl.CERT_REQUIRED
        assert ssl_context(verifying).check_hostname
        assert ssl_context(trusting).verify_mode is ssl.CERT_NONE
    finally:
        await verifying.http.aclose()
        await trusting.http.aclose()


def ssl_context(server: ModelServer) -> ssl.SSLContext:
    return server.http._transport._pool._ssl_context  # type: ignore[attr-defined]
