"""The project's choices: every setting (and event field) with a fixed set of values is one
of these enums, so a wrong value is refused where it is read, naming the allowed ones."""

from __future__ import annotations

from enum import StrEnum


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


class TrainPool(StrEnum):
    """Which train tasks a training iteration draws."""

    ALL = "all"  # every train task the leak guard lets train
    ROLLOUT = "rollout"  # only the rollout pool: fresh tasks the bank never holds


class InteractionMode(StrEnum):
    SET_OF_MARKS = "set_of_marks"
    COORDINATES = "coordinates"


class Split(StrEnum):
    """A task's split (Task.split; a task without one is never drawn). Values hold no "-":
    episode ids join on it."""

    TRAIN = "train"
    TEST = "test"  # held out by entity (sandbox) or by seed (MiniWoB++)
    OOD = "ood"  # held-out templates / environments: WebGym's out-of-distribution test set
    VALIDATION = "validation"  # its own seeds / entities: for choosing recipes, never reported


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


class SettleMode(StrEnum):
    """How a browser worker waits for the page after an action."""

    PAGE = "page"  # until the network and the DOM have been quiet a moment (capped)
    FIXED = "fixed"  # a fixed sleep (settle_s) after every action


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


class TrainPrecision(StrEnum):
    AUTO = "auto"  # bf16 on a GPU or a CPU with native bf16 (AVX512-BF16, AMX), else float32
    FLOAT32 = "float32"
    BF16 = "bf16"  # mixed precision: float32 weights, bf16 matmuls


class Compression(StrEnum):
    ZSTD = "zstd"
    GZIP = "gzip"
    LZ4 = "lz4"
    SNAPPY = "snappy"
    NONE = "none"


class KafkaSecurityProtocol(StrEnum):
    """How clients talk to the brokers (Kafka's security.protocol)."""

    PLAINTEXT = "PLAINTEXT"  # no TLS, no authentication: the embedded broker's only one
    SSL = "SSL"  # TLS, the broker's certificate checked against kafka.ssl_cafile
    SASL_PLAINTEXT = "SASL_PLAINTEXT"  # a user and password, sent without TLS
    SASL_SSL = "SASL_SSL"  # a user and password over TLS

    @property
    def uses_sasl(self) -> bool:
        return self in (KafkaSecurityProtocol.SASL_PLAINTEXT, KafkaSecurityProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (KafkaSecurityProtocol.SSL, KafkaSecurityProtocol.SASL_SSL)


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
