"""Settings of the pipeline's processes: browser workers, policy, evaluator, replay buffer,
trainer and the rollout controller."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from webgym_common.choices import (
    Band,
    ImageTransport,
    InteractionMode,
    JudgeKind,
    PolicyKind,
    ProcessingGuarantee,
    SamplingStrategy,
    ScreenshotFormat,
    SettleMode,
    Split,
    Suite,
    TrainMode,
    TrainPool,
    TrainPrecision,
    TrainTrigger,
)
from webgym_common.config.stack import PROJECT_ROOT
from webgym_common.versions import MODEL_NAME

MAX_MARKS = 500
# The task suites that ship with the project (environments/tasks), each line with its split.
TASKS_DIR = PROJECT_ROOT / "environments" / "tasks"
SANDBOX_TASKS = TASKS_DIR / "sandbox_tasks.jsonl"


class BrowserSettings(BaseModel):
    """Browser workers: one Chromium per process, `contexts` episodes at a time."""

    model_config = ConfigDict(frozen=True)

    executable_path: Path = Field(
        Path("/usr/lib/chromium/chromium-headless-shell"),
        description="the Chromium binary (Debian's chromium-headless-shell)")
    # Chromium's own sandbox for its renderers (a user namespace and seccomp-bpf each). It
    # refuses root, so a root process launches the browser as `sandbox_user` (created by
    # infra/bootstrap.sh; webgym_common/chromium.py). false = `--no-sandbox`: only where no
    # sandbox can run, e.g. in a container whose seccomp profile forbids user namespaces.
    sandbox: bool = True
    sandbox_user: str = Field(
        "webgym-browser", description="the user a root process runs Chromium as")
    contexts: int = Field(
        4, ge=1, le=64, description="episodes a worker runs at once, a browser context each")
    viewport_width: int = Field(1280, ge=320, le=4096, description="the page's width in pixels")
    viewport_height: int = Field(720, ge=240, le=4096, description="the page's height in pixels")
    screenshot_format: ScreenshotFormat = Field(
        ScreenshotFormat.JPEG, description="the screenshots' image format")
    screenshot_quality: int = Field(
        80, ge=1, le=100, description="the screenshots' JPEG or WebP quality")
    action_timeout_s: float = Field(
        10.0, gt=0, description="Playwright's timeout for one action on the page")
    navigation_timeout_s: float = Field(
        15.0, gt=0, description="Playwright's timeout for a page load")
    observe_timeout_s: float = Field(
        15.0, gt=0, description="the longest an observation (screenshot, page tree) takes")
    # After an action: wait until no request is in flight and the DOM has not changed for
    # settle_quiet_s, at most settle_max_s (page); or sleep settle_s (fixed).
    settle: SettleMode = SettleMode.PAGE
    settle_quiet_s: float = Field(0.1, ge=0, description="quiet time that counts as settled")
    settle_max_s: float = Field(2.0, ge=0, description="the longest page-driven settle")
    settle_s: float = Field(0.3, ge=0, description="the fixed settle's sleep")
    wait_action_s: float = Field(5.0, ge=0, description="how long the Wait action waits")
    action_resend_s: float = Field(
        60.0, ge=0, description="an observation the policy has not answered in this long is "
        "published again (the policy answers a step once; 0: never)")
    # Bounded so that an observation with every mark's name at its cap still fits Kafka's
    # request size (a unit test adds up that worst case at this bound).
    max_marks: int = Field(300, ge=1, le=MAX_MARKS)
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

    kind: PolicyKind = Field(
        PolicyKind.VLLM, description="who decides: a model server, or the tasks' reference actions")
    # Any OpenAI-compatible endpoint: the local vLLM, compose's vLLM service, a GPU box.
    # Unset: the local vLLM that `webgym infra up --with-vllm` starts.
    base_url: str = ""
    # Several model servers (vLLM replicas of one base model), each an OpenAI /v1 root: the
    # policy spreads its decisions over them and the model loader loads every version into
    # each (docs/policy.md). Unset: base_url alone. They share api_key and tls_verify.
    replicas: tuple[str, ...] = ()
    # A replica that failed a request (connection error, timeout, 5xx, a 404 for the model)
    # gets no decision for this long while another one can take it.
    replica_cooldown_s: float = Field(5.0, gt=0)
    api_key: str = Field(
        "EMPTY", description="the model server's API key; the local vLLM's own key is sent to it")
    # TLS certificates of an https base_url are verified (the model loader's calls to the
    # same server too); false only for a test server with a self-signed certificate.
    tls_verify: bool = True
    model: str = "webgym-policy"  # served model name until a ModelVersion says otherwise
    version: str = Field(
        "base", description="the version decisions name until a trained version is served")
    max_inflight: int = Field(8, ge=1, le=256, description="episodes deciding at once")
    timeout_s: float = Field(120.0, gt=0, description="per model request")
    retries: int = Field(
        3, ge=0, le=10, description="a failed model request is tried again this many times")
    max_tokens: int = Field(160, ge=16, description="the longest reply, in tokens")
    temperature: float = Field(
        0.0, ge=0, le=2, description="the sampling temperature of training episodes")
    # Test/ood episodes (webgym eval) sample at this temperature with this seed, whatever the
    # training temperature: a version's success is measured the same way every time.
    eval_temperature: float = Field(0.0, ge=0, le=2)
    eval_seed: int = Field(0, description="the sampling seed of test and ood episodes")
    structured_output: bool = True  # constrain replies to the action grammar (regex)
    thinking: bool = False  # the model reasons in <think>...</think> first
    vision: bool = False  # attach the screenshot as an image part
    image_transport: ImageTransport = Field(
        ImageTransport.DATA_URL,
        description="how a screenshot reaches a vision model: inline as a data URL, or a "
                    "presigned S3 URL")
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

    @field_validator("replicas")
    @classmethod
    def _distinct_urls(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        urls = tuple(u.strip().rstrip("/") for u in urls)
        if any(not u for u in urls) or len(set(urls)) < len(urls):
            raise ValueError("each replica is a distinct, non-empty base URL")
        return urls

    @property
    def replica_urls(self) -> tuple[str, ...]:
        """The model servers: `replicas`, else `base_url` alone (one server)."""
        return self.replicas or (self.base_url,)


class EvaluatorSettings(BaseModel):
    """The evaluator processor: the verifiable reward of every completed episode."""

    model_config = ConfigDict(frozen=True)

    # "rules": normalized match of the ANSWER against the task's definite answer.
    # "llm": WebGym's judge (blocking check, criterion B, criterion A per fact group).
    judge: JudgeKind = JudgeKind.RULES
    # Any OpenAI-compatible endpoint. Unset: the policy's model servers (its replicas, asked
    # in turn, else its base_url) and model.
    base_url: str = ""
    api_key: str = Field(
        "EMPTY", description="the judge server's API key; the local vLLM's own key is sent to it")
    tls_verify: bool = True  # as policy.tls_verify, for the judge's endpoint
    model: str = Field("", description="the judge's model; unset: the policy's")
    timeout_s: float = Field(60.0, gt=0, description="per judge request")
    retries: int = Field(
        2, ge=0, le=10, description="a failed judge request is tried again this many times")
    max_concurrency: int = Field(4, ge=1, le=256, description="judge requests at once")
    max_inflight: int = Field(4, ge=1, le=64, description="episodes being scored at once")
    max_tokens: int = Field(384, ge=16, description="the longest judge reply, in tokens")
    temperature: float = Field(0.0, ge=0, le=2, description="the judge's sampling temperature")
    structured_output: bool = False  # constrain the reply to analysis + verdict (vLLM only)
    vision: bool = False  # attach the screenshots as image parts (Qwen-VL-class judges)
    max_screenshots: int = Field(48, ge=1, le=256, description="the last N steps judged")
    blocking_sample: int = Field(20, ge=1, le=256, description="steps the blocking check sees")
    page_text_chars: int = Field(1500, ge=0, description="page text kept per step")
    evidence_chars: int = Field(6000, ge=200, description="page text per judge prompt")
    blocklist_hours: float = Field(
        12.0, gt=0, description="how long training skips a domain the judge found blocked")
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
    verdict_backoff_s: float = Field(
        5.0, ge=0, description="the first pause between tries of a failed question")
    processing_guarantee: ProcessingGuarantee = Field(
        ProcessingGuarantee.EXACTLY_ONCE,
        description="faust's guarantee: transactions (exactly_once) or at_least_once")



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

    trigger: TrainTrigger = Field(
        TrainTrigger.SYNC,
        description="when a run starts: after each iteration closes (sync) or every every_samples"
                    " new samples (async)")
    every_samples: int = Field(64, ge=1, description="async trigger: new samples per run")
    mode: TrainMode = Field(
        TrainMode.LORA_SFT, description="what a run trains: LoRA or full SFT, KTO or DPO")
    # Rollouts of version v may be trained on while current - v <= max_staleness; the
    # controller starts iteration i once version >= i - max_staleness is served.
    # 0 = WebGym's synchronous loop; k > 0 = the asynchronous loop of AReaL / AsyncWebRL.
    max_staleness: int = Field(0, ge=0)
    llamafactory_version: str = Field("0.9.5", description="the LLaMA-Factory release in its venv")
    torch_version: str = "2.13.0"  # LLaMA-Factory's venv (vLLM's has its own: vllm.torch_version)
    template: str = "smollm2"  # LLaMA-Factory's chat template for the base model
    base_model: str = ""  # a directory or hub id; unset: the local vLLM's model
    # A hub model's commit (a branch or tag can be moved to other weights); unset: its
    # default branch. Ignored for a directory.
    base_model_revision: str = ""
    # webgym.models key; version N is served as <name>-vN. A name is a path component and a
    # key prefix, so it must match webgym_common.versions.MODEL_NAME.
    model_name: str = Field("webgym-policy", pattern=MODEL_NAME)
    # LoRA: the rate and rank of the learning curve (docs/experiments/learning-curve.md); WebGym's
    # full fine-tuning uses 1e-6.
    learning_rate: float = Field(5e-4, gt=0)
    epochs: float = Field(2.0, gt=0, description="passes over a run's rows (max_steps caps them)")
    max_steps: int = Field(-1, ge=-1, description="caps the run (-1: epochs decide)")
    batch_size: int = Field(2, ge=1, description="rows per device step")
    gradient_accumulation: int = Field(1, ge=1, description="device steps per optimizer step")
    cutoff_len: int = Field(
        1024, ge=64,
        description="a row's longest prompt and reply, in tokens (longer rows are cut)")
    lora_rank: int = Field(16, ge=1, le=64, description="the LoRA adapters' rank")
    seed: int = Field(42, description="a LoRA run's seed (initialisation, shuffling, dropout)")
    # The recipe (WebGym's filtered behaviour cloning after a supervised start): the first
    # run from the base model trains on the whole demonstration bank (`webgym demos build`)
    # beside its draw; every later run mixes bank rows into the policy's own successes so
    # that they make up this share of its rows (0: later runs learn from the policy only).
    warm_start: bool = True
    demonstration_share: float = Field(
        0.25, ge=0, lt=1,
        description="the share of a later run's rows drawn from the bank (see warm_start)")
    use_cpu: bool = True  # False on a GPU box
    # bf16 matmuls over float32 weights: 1.5x the steps/s of float32 on a 2-core CPU with
    # AVX512-BF16 at the same losses (docs/benchmarks.md).
    precision: TrainPrecision = TrainPrecision.AUTO
    threads: int = Field(0, ge=0, description="OMP_NUM_THREADS for the run (0: all cores)")
    run_timeout_s: float = Field(
        3600.0, gt=0, description="a run still going after this long is stopped and fails")
    # How long after an iteration closes the trainer waits for the replay processor to
    # have read every scored episode before drawing (sync trigger).
    replay_wait_s: float = Field(300.0, gt=0)
    # The replay set to train on: empty = webgym.replay; else the full name of a topic
    # `webgym reprocess refilter` wrote (a training set rebuilt from the scored history).
    replay_topic: str = ""


class RolloutSettings(BaseModel):
    """The controller: sampling, timeouts, completion threshold and grace period."""

    model_config = ConfigDict(frozen=True)

    strategy: SamplingStrategy = Field(
        SamplingStrategy.ATTEMPT,
        description="how training tasks are drawn: uniformly, by ratio per difficulty band, or "
                    "weighted by each task's attempt level")
    # What `webgym run` and `webgym curve` load: the hand-written sandbox tasks, the
    # generated ones and MiniWoB++.
    task_files: tuple[Path, ...] = (SANDBOX_TASKS, TASKS_DIR / "generated_tasks.jsonl",
                                    TASKS_DIR / "miniwob_tasks.jsonl")
    # Group sampling (GRPO-style): each drawn training task runs this many times in one
    # iteration, so the reward filter sees successes and failures of the same task.
    attempts_per_task: int = Field(1, ge=1, le=64)
    # all: any train task the leak guard lets train; rollout: only fresh tasks the
    # demonstration bank never holds (MiniWoB++'s rollout seeds), so what the policy learns
    # there is its own experience, not a bank solution seen again.
    train_pool: TrainPool = TrainPool.ALL
    # Iteration 0 runs no policy episode: its close trains the warm start (v1) on the
    # demonstration bank alone, so every later version is what the policy's own experience
    # adds to it (else v1 also learns iteration 0's successes, made by the base model).
    warm_start_first: bool = False
    # Shares per difficulty band for the ratio strategy.
    ratios: dict[Band, float] = Field(
        default_factory=lambda: {Band.EASY: 0.4, Band.MEDIUM: 0.4, Band.HARD: 0.2}
    )
    task_timeout_minutes: float = Field(20.0, gt=0, description="a training episode's deadline")
    # A policy episode that loops without answering runs to its step limit (30 for a hard
    # task) or its deadline, and its iteration waits for it: a cap ends it sooner. Not for
    # demonstrations, which replay every reference action.
    train_max_steps: int | None = Field(None, ge=1, description="caps policy episodes' steps")
    completion_threshold: float = Field(
        0.95, gt=0, le=1,
        description="the share of an iteration's episodes done that starts its grace period")
    grace_period_s: float = Field(
        60.0, ge=0,
        description="how long the stragglers get after the completion threshold; then they are "
                    "cancelled")
    # A cancelled straggler gets this long to report before the iteration closes without it.
    cancel_wait_s: float = Field(60.0, ge=0)
    # How long to wait for the evaluator's scores before closing an iteration.
    score_wait_s: float = Field(120.0, ge=0)
    seed: int | None = Field(None, description="the task draw's seed; unset: a new draw each run")
    interaction_mode: InteractionMode = Field(
        InteractionMode.SET_OF_MARKS,
        description="how the policy points at the page: numbered marks or coordinates")
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
    # A training iteration's episodes in flight at once, each deadline counted from its own
    # request; unset: every episode requested when the iteration starts, all deadlines
    # counted from then (WebGym's dispatch). A window the size of the browsers' contexts
    # gives each episode its whole timeout on a machine that runs them a few at a time.
    iteration_window: int | None = Field(None, ge=1)
    eval_suite: Suite = Field(Suite.ALL, description="the suites the loop's evaluations cover")
    eval_splits: tuple[Split, ...] = Field(
        (Split.TEST, Split.OOD), description="the held-out splits the loop's evaluations cover")
    # The scripted baseline (click the marks in order, then answer) on the same set, once.
    eval_baseline: bool = True
    eval_max_steps: int | None = Field(None, ge=1, description="caps evaluation episodes")
    # A held-out episode is capped by its steps; its deadline only ends a hung one: a deadline
    # as short as a training episode's would score the machine's speed (a busy CPU, a LoRA
    # path without fast kernels), not the version's skill.
    eval_timeout_minutes: float = Field(30.0, gt=0)
    # The loop trains: iteration i starts once the model server serves version
    # i - trainer.max_staleness (producers.controller.iteration.version_needed).
    train: bool = False


class ModelLoaderSettings(BaseModel):
    """The model loader: each new version loaded into every vLLM replica
    (consumers/model_loader.py)."""

    model_config = ConfigDict(frozen=True)

    load_timeout_s: float = Field(120.0, gt=0, description="loading an adapter into vLLM")
    # How often every replica's /v1/models is checked and what it lacks of the served versions
    # loaded (a replica that started or restarted since: vLLM forgets runtime adapters).
    check_every_s: float = Field(30.0, gt=0)
    # A version published without file digests (ModelVersion.file_sha256, before the trainer
    # published them) is refused; false loads such a version unchecked, with a warning.
    require_digests: bool = True
