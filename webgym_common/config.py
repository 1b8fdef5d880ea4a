"""The one typed settings object.

Values come from (highest first): constructor arguments, environment variables
(`WEBGYM_<SECTION>__<FIELD>`, e.g. `WEBGYM_KAFKA__BOOTSTRAP_SERVERS`), the YAML
file named by `WEBGYM_CONFIG` (sections as top-level keys), then the defaults here.
Sections merge field by field: `load_settings(policy={"kind": "teacher"})` keeps
every other WEBGYM_POLICY__* variable.

Settings are frozen: a change is a new object (`load_settings(**overrides)` or
`model_copy(update=...)`), never an assignment into the cached one.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

# -- choices: every setting with a fixed set of values is one of these ----------------


class PolicyKind(StrEnum):
    VLLM = "vllm"  # any OpenAI-compatible server
    TEACHER = "teacher"  # replays the task's reference actions


class JudgeKind(StrEnum):
    RULES = "rules"  # normalized match of the answer against the definite answer
    LLM = "llm"  # WebGym's judge


class SamplingStrategy(StrEnum):
    UNIFORM = "uniform"
    RATIO = "ratio"
    ATTEMPT = "attempt"


class InteractionMode(StrEnum):
    SET_OF_MARKS = "set_of_marks"
    COORDINATES = "coordinates"


class Split(StrEnum):
    """A task's split (Task.split; none: any split). Values hold no "-": episode ids join on it."""

    TRAIN = "train"
    TEST = "test"  # held out by entity (sandbox) or by seed (MiniWoB++)
    OOD = "ood"  # held-out templates / environments: WebGym's out-of-distribution test set


class WandbMode(StrEnum):
    OFFLINE = "offline"
    ONLINE = "online"


class Driver(StrEnum):
    """Who chooses an episode's actions (EpisodeRequested.driver)."""

    POLICY = "policy"  # the policy processor
    EXTERNAL = "external"  # webgym drive, the env server: the policy processor stays out


class Suite(StrEnum):
    """Which task suite a task belongs to (webgym_common.tasks.suite_of)."""

    SANDBOX = "sandbox"  # the sandbox sites: hand-written and generated tasks
    MINIWOB = "miniwob"  # MiniWoB++ pages, scored by the page itself
    WEB = "web"  # any other task file (WebGym's, live web sites)
    ALL = "all"


class Band(StrEnum):
    """WebGym's difficulty bands: easy 1-3, medium 4-6, hard 7+ (tasks.band_of)."""

    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


class ScreenshotFormat(StrEnum):
    PNG = "png"
    JPEG = "jpeg"
    WEBP = "webp"

    @property
    def mime(self) -> str:
        return f"image/{self.value}"

    @classmethod
    def mime_of(cls, fmt: str | None) -> str:
        """The MIME type of a stored screenshot's format (JPEG when unknown)."""
        return cls(fmt).mime if fmt is not None and fmt in cls._value2member_map_ \
            else cls.JPEG.mime


class ImageTransport(StrEnum):
    DATA_URL = "data_url"
    PRESIGNED = "presigned"


class ProcessingGuarantee(StrEnum):
    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"


class TrainTrigger(StrEnum):
    SYNC = "sync"  # after each iteration closes (WebGym)
    ASYNC = "async"  # every `every_samples` new replay samples (AReaL / AsyncWebRL)


class TrainMode(StrEnum):
    LORA_SFT = "lora_sft"
    FULL_SFT = "full_sft"
    KTO = "kto"  # successes and failures, each with its label
    DPO = "dpo"  # a success and a failure of the same task at the same step count as a pair

    @property
    def stage(self) -> str:
        return {"lora_sft": "sft", "full_sft": "sft"}.get(self.value, self.value)

    @property
    def finetuning_type(self) -> str:
        return "full" if self is TrainMode.FULL_SFT else "lora"

    @property
    def needs_failures(self) -> bool:
        return self in (TrainMode.KTO, TrainMode.DPO)


class Compression(StrEnum):
    ZSTD = "zstd"
    GZIP = "gzip"
    LZ4 = "lz4"
    SNAPPY = "snappy"
    NONE = "none"


PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = Path(os.environ.get("WEBGYM_HOME", Path.home() / ".cache" / "webgym"))


class KafkaSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    # Unset: the embedded broker's address (infra.host:infra.kafka_port).
    bootstrap_servers: str = ""
    # Every topic name is "<topic_prefix>.<suffix>"; tests use a unique prefix each.
    topic_prefix: str = "webgym"
    # Episode-keyed topics share this count so a worker owning an episode's
    # partition in webgym.episodes also owns it in webgym.actions.
    partitions: int = Field(8, ge=1, le=1024)
    replication_factor: int = Field(1, ge=1)
    request_timeout_ms: int = Field(30_000, ge=1000)
    session_timeout_ms: int = Field(10_000, ge=1000)
    heartbeat_interval_ms: int = Field(1_000, ge=100)
    max_poll_interval_ms: int = Field(300_000, ge=1000)
    linger_ms: int = Field(5, ge=0)
    compression: Compression = Compression.ZSTD
    max_request_size: int = Field(4 * 1024 * 1024, ge=1024)
    replay_retention_ms: int = Field(7 * 24 * 3600 * 1000, ge=60_000)
    scored_retention_ms: int = Field(-1, ge=-1)  # -1 = forever: scored episodes are the record
    default_retention_ms: int = Field(3 * 24 * 3600 * 1000, ge=60_000)


class S3Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    # Unset: the embedded MinIO's address (infra.host:infra.minio_port).
    endpoint: str = ""
    access_key: str = "webgym"
    secret_key: str = "webgym-secret"
    bucket: str = "webgym"
    secure: bool = False
    region: str = "us-east-1"
    timeout_s: float = Field(30.0, gt=0)
    presign_expiry_s: int = Field(3600, ge=1, le=7 * 24 * 3600)


class InfraSettings(BaseModel):
    """Where the embedded stack keeps its caches, data and logs, and which ports it binds."""

    model_config = ConfigDict(frozen=True)

    home: Path = DEFAULT_HOME  # caches: jars, binaries, venvs
    # Unset (or null): <home>/data, filled in before validation.
    data_dir: Path = Field(default_factory=lambda: DEFAULT_HOME / "data")
    host: str = "127.0.0.1"
    kafka_version: str = "3.9.2"
    # Kafka nodes, each a broker and a controller (a KRaft quorum of `brokers` voters).
    # Node k (1-based) listens on kafka_port + 2(k-1) and kafka_controller_port + 2(k-1).
    brokers: int = Field(1, ge=1, le=9)
    kafka_port: int = Field(19092, ge=1, le=65535)
    kafka_controller_port: int = Field(19093, ge=1, le=65535)
    kafka_heap: str = "512m"  # the single node's heap
    kafka_cluster_heap: str = "384m"  # each node's when brokers > 1 (3 fit beside Chromium)
    minio_version: str = "v0.0.0-20260212201848-7aac2a2c5b7c"
    minio_port: int = Field(19000, ge=1, le=65535)
    minio_console_port: int = Field(19001, ge=1, le=65535)
    sandbox_port: int = Field(18765, ge=1, le=65535)
    start_timeout_s: float = Field(120.0, gt=0)
    stop_timeout_s: float = Field(20.0, gt=0)
    # The pipeline's supervisor restarts a process that dies after restart_backoff_s,
    # doubling per quick death up to restart_backoff_max_s; a process that ran for
    # restart_reset_after_s starts over at restart_backoff_s.
    restart_backoff_s: float = Field(1.0, gt=0)
    restart_backoff_max_s: float = Field(30.0, gt=0)
    restart_reset_after_s: float = Field(60.0, gt=0)

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


class BrowserSettings(BaseModel):
    """Browser workers: one Chromium per process, `contexts` episodes at a time."""

    model_config = ConfigDict(frozen=True)

    executable_path: Path = Path("/usr/lib/chromium/chromium-headless-shell")
    contexts: int = Field(4, ge=1, le=64)
    viewport_width: int = Field(1280, ge=320, le=4096)
    viewport_height: int = Field(720, ge=240, le=4096)
    screenshot_format: ScreenshotFormat = ScreenshotFormat.JPEG
    screenshot_quality: int = Field(80, ge=1, le=100)
    action_timeout_s: float = Field(10.0, gt=0)
    navigation_timeout_s: float = Field(15.0, gt=0)
    observe_timeout_s: float = Field(15.0, gt=0)
    settle_s: float = Field(0.3, ge=0, description="quiet time after an action before observing")
    wait_action_s: float = Field(5.0, ge=0, description="how long the Wait action waits")
    max_marks: int = Field(300, ge=1)
    # The URL policy (producers/browser/urlpolicy.py). Hosts (shell globs, `host` or
    # `host:port`) episodes may visit at all; "*" = any host whose every address is public.
    url_allowlist: list[str] = Field(default_factory=lambda: ["*"])
    # host[:port] globs exempt from the address checks (loopback, private, CGNAT, ULA...):
    # allowed as they are. "{sandbox}" is the sandbox web's host:port. Link-local and
    # metadata addresses are refused whatever either list says.
    private_allowlist: list[str] = Field(default_factory=lambda: ["{sandbox}"])
    url_resolve_timeout_s: float = Field(5.0, gt=0, description="DNS lookup of a visited host")
    url_cache_ttl_s: float = Field(60.0, ge=0, description="how long a host's addresses are kept")
    # Actions that arrive before their episode's request wait this long, then are dropped.
    pending_action_ttl_s: float = Field(60.0, gt=0)
    # On a rebalance, the episodes of revoked partitions are cancelled; the worker waits this
    # long for them to stop (and for what they sent to reach Kafka) before letting go.
    revoke_timeout_s: float = Field(5.0, gt=0)
    # An episode retries a failing screenshot upload (MinIO) or observation publish (Kafka)
    # this long (never past its deadline), then ends as crashed saying which failed.
    dependency_retry_s: float = Field(60.0, gt=0)
    # Ended episodes are looked up in webgym.episodes.completed from this long before the
    # first record a worker re-reads on a partition (producer clocks may differ).
    finished_lookback_s: float = Field(600.0, ge=0)


class PolicySettings(BaseModel):
    """The policy processor and the model server it calls."""

    model_config = ConfigDict(frozen=True)

    kind: PolicyKind = PolicyKind.VLLM
    # Any OpenAI-compatible endpoint: the local vLLM, compose's vLLM service, a GPU box.
    # Unset: the local vLLM that `webgym infra up --with-vllm` starts.
    base_url: str = ""
    api_key: str = "EMPTY"
    model: str = "webgym-policy"  # served model name until a ModelVersion says otherwise
    version: str = "base"
    max_inflight: int = Field(8, ge=1, le=256, description="episodes deciding at once")
    timeout_s: float = Field(120.0, gt=0)
    retries: int = Field(3, ge=0, le=10)
    max_tokens: int = Field(160, ge=16)
    temperature: float = Field(0.0, ge=0, le=2)
    # Test/ood episodes (webgym eval) sample at this temperature with this seed, whatever the
    # training temperature: a version's success is measured the same way every time.
    eval_temperature: float = Field(0.0, ge=0, le=2)
    eval_seed: int = 0
    structured_output: bool = True  # constrain replies to the action grammar (regex)
    thinking: bool = False  # the model reasons in <think>...</think> first
    vision: bool = False  # attach the screenshot as an image part
    image_transport: ImageTransport = ImageTransport.DATA_URL
    max_element_chars: int = Field(
        800, ge=200,
        description="the page view's budget in characters (webgym_common.agent.pageview). 800 "
                    "keeps system + user prompt with 5 history steps + a 60-token reply within the "
                    "trainer's cutoff_len of 1024 SmolLM2 tokens on the densest pages measured",
    )
    # An observation whose EpisodeRequested has not been read waits until the episodes partition
    # is read to the end it had at least this long after the observation (its request may be
    # published this late); only then is it dead-lettered. Never skipped by age.
    context_wait_s: float = Field(30.0, gt=0)
    # The model server or MinIO down: a decision is retried, waiting up to this long between
    # tries, while the episode can still use an action (until its deadline).
    retry_max_backoff_s: float = Field(10.0, gt=0)
    # Benchmarks only: the teacher-forcing policy waits this long per decision, like a model.
    teacher_delay_s: float = Field(0.0, ge=0)
    # ... plus a random extra up to this long, so decisions finish out of order as a model's do.
    teacher_delay_jitter_s: float = Field(0.0, ge=0)


class EvaluatorSettings(BaseModel):
    """The evaluator processor: the verifiable reward of every completed episode."""

    model_config = ConfigDict(frozen=True)

    # "rules": normalized match of the ANSWER against the task's definite answer.
    # "llm": WebGym's judge (blocking check, criterion B, criterion A per fact group).
    judge: JudgeKind = JudgeKind.RULES
    # Any OpenAI-compatible endpoint. Unset: the policy's base_url and model.
    base_url: str = ""
    api_key: str = "EMPTY"
    model: str = ""
    timeout_s: float = Field(60.0, gt=0, description="per judge request")
    retries: int = Field(2, ge=0, le=10)
    max_concurrency: int = Field(4, ge=1, le=256, description="judge requests at once")
    max_inflight: int = Field(4, ge=1, le=64, description="episodes being scored at once")
    max_tokens: int = Field(384, ge=16)
    temperature: float = Field(0.0, ge=0, le=2)
    structured_output: bool = False  # constrain the reply to analysis + verdict (vLLM only)
    vision: bool = False  # attach the screenshots as image parts (Qwen-VL-class judges)
    max_screenshots: int = Field(48, ge=1, le=256, description="the last N steps judged")
    blocking_sample: int = Field(20, ge=1, le=256, description="steps the blocking check sees")
    page_text_chars: int = Field(1500, ge=0, description="page text kept per step")
    evidence_chars: int = Field(6000, ge=200, description="page text per judge prompt")
    blocklist_hours: float = Field(12.0, gt=0)
    # A state agent still below a completion's offsets that sits idle this long has the rest
    # of its partition read: only transaction markers left there means it has caught up.
    trajectory_wait_s: float = Field(15.0, gt=0)
    # After a completion, the agents folding the state topics are waited for until they have
    # read past it (processors/evaluator/catchup.py). Those that handle nothing for this long
    # while still behind are given up on: the episode is scored with what is there, saying so.
    trajectory_stall_s: float = Field(300.0, gt=0)
    # A question the judge failed (unreachable, no verdict line) is asked this many times in
    # all, pausing verdict_backoff_s, then twice that, ...; then the score is a judge failure.
    verdict_attempts: int = Field(3, ge=1, le=20)
    verdict_backoff_s: float = Field(5.0, ge=0)
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.EXACTLY_ONCE


class VllmSettings(BaseModel):
    """The local vLLM (CPU) server `webgym infra up --with-vllm` starts."""

    model_config = ConfigDict(frozen=True)

    port: int = Field(18000, ge=1, le=65535)
    vllm_version: str = "0.32.0"
    torch_version: str = "2.13.0"
    max_model_len: int = Field(4096, ge=256)
    kv_cache_gib: int = Field(1, ge=1)
    start_timeout_s: float = Field(600.0, gt=0)
    # Which cores vLLM's CPU worker binds its OpenMP threads to: "all" = every core this
    # process may use; "auto" = vLLM's own choice, which on a 2-core machine binds one core
    # and reserves the other (half the speed, bench/vllm_cpu_fit.py); "nobind"; or "0-3".
    cpu_threads_bind: str = Field("all", pattern=r"^(all|auto|nobind|[0-9,\-|]+)$")
    # The weights' dtype: "cpu" = bfloat16 where the CPU has native bf16, else float32
    # (infra/vllm_server.server_dtype); or any of vLLM's --dtype values.
    dtype: str = Field("cpu", pattern=r"^(cpu|auto|float32|bfloat16|float16|half|float)$")
    # When set, the server requires it (`--api-key`) on every /v1 route, runtime LoRA
    # loading included, and the policy, the LLM judge and the model loader send it unless
    # given a key of their own (policy.api_key, evaluator.api_key).
    api_key: str | None = None


class ReplaySettings(BaseModel):
    """The replay processor's filters (WebGym's) and the trainer's recency-biased draw."""

    model_config = ConfigDict(frozen=True)

    success_only: bool = True  # only steps of episodes whose reward is 1
    # Failures kept too, labelled (success=false), for KTO/DPO; success_only still decides SFT.
    include_failures: bool = False
    filter_same_screenshot: bool = True  # drop a step whose next screenshot is the same
    capacity: int = Field(10_000, ge=1, description="most recent eligible samples drawn from")
    window_iterations: int = Field(4, ge=1, description="the trainer draws from the last N")
    recency_power: float = Field(2.0, ge=0, description="weights (position+1)^p; 1 = uniform")
    samples_per_run: int = Field(1800, ge=1, description="drawn per training run (WebGym: 1800)")


class TrainerSettings(BaseModel):
    """The trainer consumer (LLaMA-Factory runs in their own venv) and the model loader."""

    model_config = ConfigDict(frozen=True)

    trigger: TrainTrigger = TrainTrigger.SYNC
    every_samples: int = Field(64, ge=1, description="async trigger: new samples per run")
    mode: TrainMode = TrainMode.LORA_SFT
    # Rollouts of version v may be trained on while current - v <= max_staleness; the
    # controller starts iteration i once version >= i - max_staleness is served.
    # 0 = WebGym's synchronous loop; k > 0 = the asynchronous loop of AReaL / AsyncWebRL.
    max_staleness: int = Field(0, ge=0)
    llamafactory_version: str = "0.9.5"
    torch_version: str = "2.13.0"
    template: str = "smollm2"  # LLaMA-Factory's chat template for the base model
    base_model: str = ""  # a directory or hub id; unset: the local vLLM's model
    model_name: str = "webgym-policy"  # webgym.models key; version N is served as <name>-vN
    # LoRA: the rate and rank of the measured learning curve (docs/learning-curve); WebGym's
    # full fine-tuning uses 1e-6.
    learning_rate: float = Field(5e-4, gt=0)
    epochs: float = Field(2.0, gt=0)
    max_steps: int = Field(-1, ge=-1, description="caps the run (-1: epochs decide)")
    batch_size: int = Field(2, ge=1)
    gradient_accumulation: int = Field(1, ge=1)
    cutoff_len: int = Field(1024, ge=64)
    lora_rank: int = Field(16, ge=1, le=64)
    # The recipe (WebGym's filtered behaviour cloning after a supervised start): the first
    # run from the base model trains on the whole demonstration bank (`webgym demos build`)
    # beside its draw; every later run mixes bank rows into the policy's own successes so
    # that they make up this share of its rows (0: later runs learn from the policy only).
    warm_start: bool = True
    demonstration_share: float = Field(0.25, ge=0, lt=1)
    use_cpu: bool = True  # False on a GPU box
    threads: int = Field(0, ge=0, description="OMP_NUM_THREADS for the run (0: all cores)")
    run_timeout_s: float = Field(3600.0, gt=0)
    # How long after an iteration closes the trainer waits for the replay processor to
    # have read every scored episode before drawing (sync trigger).
    replay_wait_s: float = Field(300.0, gt=0)
    load_timeout_s: float = Field(120.0, gt=0, description="loading an adapter into vLLM")
    # The replay set to train on: empty = webgym.replay; else the full name of a topic
    # `webgym reprocess refilter` wrote (a training set rebuilt from the scored history).
    replay_topic: str = ""


class RolloutSettings(BaseModel):
    """The controller: sampling, timeouts, completion threshold and grace period."""

    model_config = ConfigDict(frozen=True)

    strategy: SamplingStrategy = SamplingStrategy.ATTEMPT
    # Shares per difficulty band for the ratio strategy.
    ratios: dict[Band, float] = Field(
        default_factory=lambda: {Band.EASY: 0.4, Band.MEDIUM: 0.4, Band.HARD: 0.2}
    )
    task_timeout_minutes: float = Field(20.0, gt=0)
    completion_threshold: float = Field(0.95, gt=0, le=1)
    grace_period_s: float = Field(60.0, ge=0)
    # A cancelled straggler gets this long to report before the iteration closes without it.
    cancel_wait_s: float = Field(60.0, ge=0)
    # How long to wait for the evaluator's scores before closing an iteration.
    score_wait_s: float = Field(120.0, ge=0)
    seed: int | None = None
    interaction_mode: InteractionMode = InteractionMode.SET_OF_MARKS
    # This share of training episodes whose task has reference actions runs teacher-forced:
    # demonstrations the trainer learns from beside the policy's own successes (a small model
    # on the CPU rarely succeeds on its own at first). 0: the policy runs every episode.
    demonstration_share: float = Field(0.0, ge=0, le=1)
    # The first training iteration also runs this many teacher-forced episodes on training
    # tasks with reference actions (`webgym run --demos N`): the first training draws have
    # demonstrations to learn from whatever the base model manages.
    demonstrations: int = Field(0, ge=0)
    # The loop evaluates every k-th served version (the base model first) on the test and ood
    # splits of each suite with such tasks, before the iteration that runs on it; 0: never.
    eval_every: int = Field(0, ge=0)
    eval_limit: int | None = Field(None, ge=1, description="tasks per suite and split")
    # The fixed, stratified held-out set instead of a draw: this many tasks of every
    # MiniWoB++ environment / sandbox template (producers.controller.heldout).
    eval_per_group: int | None = Field(None, ge=1)
    # Evaluation and demonstration-bank episodes in flight at once (the rest wait unrequested,
    # so each one's task_timeout_minutes starts when it is requested, not behind the others).
    request_window: int = Field(16, ge=1)
    eval_suite: Suite = Suite.ALL
    eval_splits: tuple[Split, ...] = (Split.TEST, Split.OOD)
    # The scripted baseline (click the marks in order, then answer) on the same set, once.
    eval_baseline: bool = True
    eval_max_steps: int | None = Field(None, ge=1, description="caps evaluation episodes")
    # The loop trains: iteration i starts once the model server serves version
    # i - trainer.max_staleness (producers.controller.iteration.version_needed).
    train: bool = False


class MonitorSettings(BaseModel):
    """`webgym monitor`: the read-only web app that follows the topics (consumers/monitor/)."""

    model_config = ConfigDict(frozen=True)

    # Loopback by default: the pages show task text, model output and screenshots.
    host: str = "127.0.0.1"
    port: int = Field(18780, ge=1, le=65535)
    # The scored topic the trajectory viewer and the grid's rewards read: empty = the
    # registry's <prefix>.episodes.scored; a full topic name picks a re-scored history.
    scored_topic: str = ""
    # Episodes kept with their steps (the oldest are forgotten first); bounds memory.
    max_episodes: int = Field(2000, ge=10)
    dead_letters: int = Field(500, ge=1, description="the newest N dead letters shown")
    lag_interval_s: float = Field(2.0, gt=0, description="how often consumer lag is read")
    # Each browser tab's queue of live updates; a tab that falls this far behind is
    # disconnected (its EventSource reconnects and the page reloads).
    client_queue: int = Field(1000, ge=10)
    # TensorBoard event files of the metrics, evaluations and training losses; unset:
    # <data_dir>/tensorboard. Rewritten from the log at each start.
    tensorboard: bool = True
    tensorboard_dir: Path | None = None
    # Weights & Biases: the same scalars to this project when set (a new run each start),
    # under <data_dir>/wandb; offline by default (`wandb sync` uploads later).
    wandb_project: str = ""
    wandb_mode: WandbMode = WandbMode.OFFLINE


class EnvServerSettings(BaseModel):
    """`webgym envserver`: AgentGym's environment-server API over the pipeline
    (producers/envserver/)."""

    model_config = ConfigDict(frozen=True)

    # Loopback by default: whoever reaches it can drive browsers.
    host: str = "127.0.0.1"
    port: int = Field(18790, ge=1, le=65535)
    max_envs: int = Field(256, ge=1, le=4096, description="envs open at once (/create: 503)")
    # An env no request touched for this long is closed (its episode cancelled).
    idle_timeout_s: float = Field(900.0, gt=0)
    reap_interval_s: float = Field(5.0, gt=0, description="how often idle envs are looked for")
    # An episode ends as timeout this long after its reset, used or not.
    episode_timeout_s: float = Field(3600.0, gt=0)
    reset_timeout_s: float = Field(60.0, gt=0, description="wait for the start page's step")
    step_timeout_s: float = Field(60.0, gt=0, description="wait for an action's observation")
    score_timeout_s: float = Field(60.0, gt=0, description="wait for the evaluator's reward")
    max_steps: int | None = Field(None, ge=1, description="per episode; unset: the task's")
    catalog_refresh_s: float = Field(30.0, ge=0, description="the task list is read again")
    max_observation_chars: int = Field(16000, ge=200, description="the tree is cut beyond")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="WEBGYM_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
        frozen=True,
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    s3: S3Settings = Field(default_factory=S3Settings)
    infra: InfraSettings = Field(default_factory=InfraSettings)
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    evaluator: EvaluatorSettings = Field(default_factory=EvaluatorSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    monitor: MonitorSettings = Field(default_factory=MonitorSettings)
    envserver: EnvServerSettings = Field(default_factory=EnvServerSettings)

    @model_validator(mode="before")
    @classmethod
    def _default_to_embedded_stack(cls, data: Any) -> Any:
        # The embedded stack's ports are the one place these addresses are written. Filled
        # into the input, before validation, because the validated model is frozen.
        if not isinstance(data, dict):
            return data
        try:
            infra = InfraSettings.model_validate(data.get("infra") or {})
            vllm = VllmSettings.model_validate(data.get("vllm") or {})
        except ValidationError:
            return data  # validation proper reports it, with the setting's full name
        data = dict(data)
        for section, name, value in (
            ("kafka", "bootstrap_servers", infra.kafka_bootstrap),
            ("s3", "endpoint", f"{infra.host}:{infra.minio_port}"),
            ("policy", "base_url", f"http://{infra.host}:{vllm.port}/v1"),
        ):
            data[section] = _with_default(data.get(section), name, value)
        # The local vLLM's key is the key its clients (policy, LLM judge, model loader) send,
        # unless they were given one of their own.
        if vllm.api_key:
            for section in ("policy", "evaluator"):
                data[section] = _with_key(data.get(section), vllm.api_key)
        # Unset: as many replicas as the embedded stack has brokers, up to 3.
        if isinstance(data.get("kafka"), dict) and "replication_factor" not in data["kafka"]:
            data["kafka"] = {**data["kafka"], "replication_factor": min(infra.brokers, 3)}
        return data

    @property
    def sandbox_url(self) -> str:
        return f"http://{self.infra.host}:{self.infra.sandbox_port}"

    def resolve_url(self, url: str) -> str:
        """Task URLs may say `{sandbox}` for wherever the sandbox web is served."""
        return url.replace("{sandbox}", self.sandbox_url)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        yaml_path = os.environ.get("WEBGYM_CONFIG")
        if yaml_path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_path))
        return tuple(sources)


def _with_default(section: Any, name: str, value: str) -> Any:
    """`section` (a dict, a model or None) with `name` set to `value` where it is empty."""
    if isinstance(section, BaseModel):
        return section if getattr(section, name) else section.model_copy(update={name: value})
    if section is None:
        return {name: value}
    if isinstance(section, dict) and not section.get(name):
        return {**section, name: value}
    return section


def _with_key(section: Any, key: str) -> Any:
    """`section` with `api_key` set to `key` where it is left at the no-key default."""
    no_key = ("", "EMPTY", None)
    if isinstance(section, BaseModel):
        keyless = getattr(section, "api_key", None) in no_key
        return section.model_copy(update={"api_key": key}) if keyless else section
    if section is None:
        return {"api_key": key}
    if isinstance(section, dict) and section.get("api_key") in no_key:
        return {**section, "api_key": key}
    return section


def settings_env(settings: Settings) -> dict[str, str]:
    """The same settings as WEBGYM_* environment variables, for a child process."""
    env = {}
    for section in Settings.model_fields:
        for name, value in getattr(settings, section).model_dump(mode="json").items():
            if value is None:
                continue
            text = json.dumps(value) if isinstance(value, list | dict) else str(value)
            env[f"WEBGYM_{section.upper()}__{name.upper()}"] = text
    return env


class SettingsError(ValueError):
    """A setting has a bad value; the message names it and what is allowed."""


def describe_validation_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        name = "WEBGYM_" + "__".join(str(p).upper() for p in e["loc"])
        lines.append(f"setting {name} = {e.get('input')!r}: {e['msg']}")
    return "; ".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning pydantic's error into one line per bad setting."""
    yaml_path = os.environ.get("WEBGYM_CONFIG")
    if yaml_path and not Path(yaml_path).is_file():
        raise SettingsError(f"setting WEBGYM_CONFIG = {yaml_path!r}: no such YAML file")
    try:
        return Settings(**overrides)
    except ValidationError as err:
        raise SettingsError(describe_validation_error(err)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings from the environment, loaded once (frozen: share it freely)."""
    return load_settings()
