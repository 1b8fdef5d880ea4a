"""Settings of the stack the pipeline runs on: Kafka, the S3 store, the embedded
processes' home and ports, the local vLLM server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from webgym_common.choices import Compression, KafkaSecurityProtocol, SaslMechanism

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_HOME = Path(os.environ.get("WEBGYM_HOME", Path.home() / ".cache" / "webgym"))


class KafkaSettings(BaseModel):
    """How every process reaches Kafka, and the topics' partitions and retention."""

    model_config = ConfigDict(frozen=True)

    # Unset: the embedded broker's address (infra.host:infra.kafka_port).
    bootstrap_servers: str = ""
    # Every topic name is "<topic_prefix>.<suffix>"; tests use a unique prefix each.
    topic_prefix: str = "webgym"
    # Episode-keyed topics share this count so a worker owning an episode's
    # partition in webgym.episodes also owns it in webgym.actions.
    partitions: int = Field(8, ge=1, le=1024)
    replication_factor: int = Field(
        1, ge=1,
        description="copies of each partition; unset: as many as the embedded stack has brokers, "
                    "up to 3")
    request_timeout_ms: int = Field(
        30_000, ge=1000, description="how long a client waits for a broker's reply")
    session_timeout_ms: int = Field(
        10_000, ge=1000, description="a consumer not heard from this long leaves its group")
    heartbeat_interval_ms: int = Field(
        1_000, ge=100, description="how often a consumer tells its group it is alive")
    max_poll_interval_ms: int = Field(
        300_000, ge=1000, description="the longest a consumer may go between two polls")
    # 0: an event goes out at once (it is on a step's critical path); under load the producer
    # still batches whatever piles up while its previous request is in flight.
    linger_ms: int = Field(0, ge=0)
    compression: Compression = Field(
        Compression.ZSTD, description="how producers compress record batches")
    max_request_size: int = Field(
        4 * 1024 * 1024, ge=1024,
        description="the largest request a producer sends: an event must fit")
    replay_retention_ms: int = Field(
        7 * 24 * 3600 * 1000, ge=60_000, description="how long webgym.replay keeps its samples")
    scored_retention_ms: int = Field(-1, ge=-1)  # -1 = forever: scored episodes are the record
    default_retention_ms: int = Field(
        3 * 24 * 3600 * 1000, ge=60_000,
        description="how long the other delete-topics keep their records")
    # How every client (our producers, consumers and admin, faust's apps) talks to the brokers:
    # the embedded broker speaks PLAINTEXT on loopback only; a shared cluster wants SASL_SSL.
    security_protocol: KafkaSecurityProtocol = KafkaSecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism = Field(
        SaslMechanism.PLAIN, description="SASL's mechanism (SASL_PLAINTEXT, SASL_SSL)")
    sasl_username: str = Field("", description="SASL's user (SASL_PLAINTEXT, SASL_SSL)")
    sasl_password: str = Field("", description="SASL's password (SASL_PLAINTEXT, SASL_SSL)")
    # The CA that signed the brokers' certificates (SSL, SASL_SSL); unset: the system's CAs.
    ssl_cafile: Path | None = None

    @model_validator(mode="after")
    def _security_complete(self) -> KafkaSettings:
        if self.security_protocol.uses_sasl and not (self.sasl_username and self.sasl_password):
            raise ValueError(
                f"security_protocol {self.security_protocol} needs WEBGYM_KAFKA__SASL_USERNAME "
                "and WEBGYM_KAFKA__SASL_PASSWORD")
        if self.ssl_cafile is not None and not self.security_protocol.uses_tls:
            raise ValueError(
                f"ssl_cafile is only used with TLS (security_protocol SSL or SASL_SSL), not "
                f"{self.security_protocol}")
        return self


class S3Settings(BaseModel):
    """The object store (MinIO or any S3) of screenshots, prompts and adapters."""

    model_config = ConfigDict(frozen=True)

    # Unset: the embedded MinIO's address (infra.host:infra.minio_port).
    endpoint: str = ""
    # Unset, for the embedded MinIO: the ones generated for this data dir
    # (webgym_common.config.stack_secrets, <data_dir>/secrets.json).
    access_key: str = ""
    secret_key: str = Field("", description="the S3 secret key (unset: as access_key)")
    bucket: str = Field("webgym", description="the bucket of screenshots, prompts and adapters")
    secure: bool = Field(False, description="talk to the endpoint over HTTPS")
    region: str = Field("us-east-1", description="the S3 region")
    timeout_s: float = Field(30.0, gt=0, description="per S3 request")
    presign_expiry_s: int = Field(
        3600, ge=1, le=7 * 24 * 3600, description="how long a presigned screenshot URL stays valid")


class InfraSettings(BaseModel):
    """Where the embedded stack keeps its caches, data and logs, and which ports it binds."""

    model_config = ConfigDict(frozen=True)

    home: Path = DEFAULT_HOME  # caches: jars, binaries, venvs
    # Unset (or null): <home>/data, filled in before validation.
    data_dir: Path = Field(default_factory=lambda: DEFAULT_HOME / "data")
    host: str = Field(
        "127.0.0.1", description="the address the embedded stack binds and its clients use")
    kafka_version: str = Field("3.9.2", description="the Apache Kafka release fetched")
    # Kafka nodes, each a broker and a controller (a KRaft quorum of `brokers` voters).
    # Node k (1-based) listens on kafka_port + 2(k-1) and kafka_controller_port + 2(k-1).
    brokers: int = Field(1, ge=1, le=9)
    kafka_port: int = Field(19092, ge=1, le=65535, description="the first Kafka node's broker port")
    kafka_controller_port: int = Field(
        19093, ge=1, le=65535, description="the first Kafka node's controller port")
    kafka_heap: str = "512m"  # the single node's heap
    kafka_cluster_heap: str = "384m"  # each node's when brokers > 1 (3 fit beside Chromium)
    minio_version: str = Field(
        "v0.0.0-20260212201848-7aac2a2c5b7c", description="the MinIO version built with go install")
    minio_port: int = Field(19000, ge=1, le=65535, description="MinIO's S3 port")
    minio_console_port: int = Field(19001, ge=1, le=65535, description="MinIO's console port")
    sandbox_port: int = Field(18765, ge=1, le=65535, description="the sandbox web sites' port")
    # Where the browsers reach the sandbox web; unset: `host`. Under compose the sandbox is a
    # service of its own (`sandbox`), so its name, not loopback, goes into task URLs.
    sandbox_host: str | None = None
    start_timeout_s: float = Field(
        120.0, gt=0, description="how long a component may take to become healthy")
    stop_timeout_s: float = Field(
        20.0, gt=0, description="how long a process has to stop before it is killed")
    # The pipeline's supervisor restarts a process that dies after restart_backoff_s,
    # doubling per quick death up to restart_backoff_max_s; a process that ran for
    # restart_reset_after_s starts over at restart_backoff_s.
    restart_backoff_s: float = Field(1.0, gt=0)
    restart_backoff_max_s: float = Field(
        30.0, gt=0, description="the longest wait before a restart")
    restart_reset_after_s: float = Field(
        60.0, gt=0, description="a process that ran this long restarts at the shortest wait")

    @property
    def cache_dir(self) -> Path:
        return self.home

    def kafka_node_ports(self) -> list[tuple[int, int]]:
        """(broker port, controller port) of node 1, 2, ... `brokers`."""
        return [(self.kafka_port + 2 * i, self.kafka_controller_port + 2 * i)
                for i in range(self.brokers)]

    @property
    def kafka_bootstrap(self) -> str:
        """Every embedded broker's address, comma-separated (clients may reach any of them)."""
        return ",".join(f"{self.host}:{port}" for port, _ in self.kafka_node_ports())

    @model_validator(mode="after")
    def _kafka_ports_distinct(self) -> InfraSettings:
        ports = [p for pair in self.kafka_node_ports() for p in pair]
        if len(set(ports)) != len(ports) or max(ports) > 65535:
            raise ValueError(
                f"{self.brokers} Kafka nodes need ports kafka_port + 2k and "
                f"kafka_controller_port + 2k (k < {self.brokers}) all distinct and <= 65535; "
                f"kafka_port={self.kafka_port}, kafka_controller_port={self.kafka_controller_port}"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _data_under_home(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("data_dir") is None:
            data = {**data, "data_dir": Path(data.get("home") or DEFAULT_HOME) / "data"}
        return data



class VllmSettings(BaseModel):
    """The local vLLM (CPU) server `webgym infra up --with-vllm` starts."""

    model_config = ConfigDict(frozen=True)

    port: int = Field(18000, ge=1, le=65535, description="the local vLLM's port")
    # The model it serves and the trainer fine-tunes: a Hugging Face model directory
    # (`webgym run --model`); unset: SmolLM2-135M-Instruct, built into the cache.
    model: str = ""
    vllm_version: str = Field("0.32.0", description="the vLLM release installed in its venv")
    torch_version: str = "2.13.0"  # vLLM's venv (the trainer's: trainer.torch_version)
    max_model_len: int = Field(4096, ge=256, description="the longest prompt plus reply, in tokens")
    kv_cache_gib: int = Field(
        1, ge=1, description="memory for the KV cache (VLLM_CPU_KVCACHE_SPACE)")
    # Every policy prompt starts with the same system prompt and a step repeats the task and
    # history of the one before: vLLM keeps their KV blocks and skips their prefill.
    prefix_caching: bool = True
    start_timeout_s: float = Field(
        600.0, gt=0, description="how long vLLM may take to answer after its start")
    # Which cores vLLM's CPU worker binds its OpenMP threads to: "all" = every core this
    # process may use; "auto" = vLLM's own choice, which on a 2-core machine binds one core
    # and reserves the other (slower: docs/benchmarks.md, bench/vllm_cpu_fit.py);
    # "nobind"; or "0-3".
    cpu_threads_bind: str = Field("all", pattern=r"^(all|auto|nobind|[0-9,\-|]+)$")
    # The weights' dtype: "cpu" = bfloat16 where the CPU has native bf16, else float32
    # (infra/vllm_server.server_dtype); or any of vLLM's --dtype values.
    dtype: str = Field("cpu", pattern=r"^(cpu|auto|float32|bfloat16|float16|half|float)$")
    # The server requires it (`--api-key`) on every /v1 route, runtime LoRA loading included,
    # and the policy, the LLM judge and the model loader send it to the local server unless
    # given a key of their own (policy.api_key, evaluator.api_key). Unset: the one generated
    # for this data dir (webgym_common.config.stack_secrets, <data_dir>/secrets.json).
    api_key: str | None = None
