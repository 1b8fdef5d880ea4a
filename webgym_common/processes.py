"""The process registry: every pipeline process, one row each, holding what launches it,
what it reads and writes, and where it runs.

Derived from the rows: the supervisor's list (`webgym pipeline up`, infra/pipeline.py) and
its `--with-<name>` options (webgym_cli/pipeline.py), the `webgym worker <name>` commands
with their options (webgym_cli/worker.py), the faust apps and who owns each state table
(webgym_common.topics.faust_apps, table_owners), the Ray actors of `webgym cluster up`
(infra/cluster.py, each needing its row's `resource`) and the process table of
docs/architecture.md (`process_table()`). Checked against the rows by unit tests: the
compose services (command, profile, object-store credentials), the entry points and what
each process's code really reads and writes (tests/unit/webgym_common/test_process_topics.py).

Entry points are named as "module:function" so that this ground-floor module imports
nothing above it; the function takes the settings and is a coroutine function when
`asynchronous`.

Adding a process touches three files: its module, its row here and a paragraph in the
docs (docs/architecture.md, whose process table the tests compare with `process_table()`).
From the row it gets its worker command, its place under the supervisor and its line in
the docs' table; the row says `compose=False` until docker-compose.yml has a service for
it. A process with a consumer group of its own also names it in `Group`, one with a faust
table in `StateTable` (both in webgym_common/topics.py), and one that uses the object store
gets a MinIO user (infra/minio_users.py); the tests name whatever is missing.
docs/development.md ("Adding a process") shows the diff of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from webgym_common.choices import JudgeKind, PolicyKind
from webgym_common.topics import Group, StateTable, Topic


class Process(StrEnum):
    BROWSER = "browser"
    POLICY = "policy"
    EVALUATOR = "evaluator"
    HISTORY = "history"
    METRICS = "metrics"
    REPLAY = "replay"
    TRAINER = "trainer"
    MODEL_LOADER = "model-loader"
    ENVSERVER = "envserver"


class ClusterResource(StrEnum):
    """The Ray custom resource a process's actor needs (`webgym cluster up`, infra/cluster.py):
    a node offers it with `ray start --resources='{"browser": 4}'`."""

    BROWSER = "browser"  # Chromium: memory per context
    INFERENCE = "inference"  # beside the model server (vLLM)
    TRAINER = "trainer"  # LLaMA-Factory's venv, the accelerator
    STREAM = "stream"  # a stream processor: Kafka and a little CPU


@dataclass(frozen=True)
class Option:
    """One option of a process's `webgym worker` command.

    Its default is None, "not given": then nothing is overridden and the setting (or the
    entry's own default) applies. Given, it is laid over the settings as they load, never
    written into them (webgym_cli.common.settings_with)."""

    name: str  # the parameter; its flag is --<name, "_" as "-"> unless `flag` says otherwise
    type: type  # int, float, str, Path or a choice enum (webgym_common.choices)
    help: str
    setting: str | None = None  # "section.field" it overrides; None: an entry keyword
    flag: str | None = None  # "--csv" for csv_path

    @property
    def flags(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class ProcessSpec:
    """One process: what launches it, what it reads and writes, where it runs."""

    name: Process
    entry: str  # "module:function(settings, **keywords)"
    summary: str  # one short line: the worker command's help, the docs' table
    group: Group | None  # its consumer group (a faust app's id); None: reads without one
    # Every topic its code reads (its own output too, where it restores its state from it)
    # and writes; the dead-letter topic aside, which every process may write.
    reads: tuple[Topic, ...]
    writes: tuple[Topic, ...]
    # The worker command: its options, and the line it prints as it starts, a format string
    # over `s` (the settings), `name`, `group` (the consumer group's id, "-" without one)
    # and the entry's keywords.
    options: tuple[Option, ...] = ()
    banner: str = "{name}: group {group}, broker {s.kafka.bootstrap_servers}"
    # "module:function(settings) -> dict": what the launcher runs first, for more keywords
    # of the entry (the trainer: LLaMA-Factory's venv and the model it fine-tunes).
    prepare: str | None = None
    training: bool = False  # runs only when the loop trains (LLaMA-Factory, vLLM)
    faust: bool = False  # a faust app (tables with changelogs) rather than webgym_common.stream.bus
    # Its faust tables, each with the input topic whose partitions its changelog mirrors.
    tables: tuple[tuple[StateTable, Topic], ...] = ()
    asynchronous: bool = True  # entry is a coroutine function (a faust worker runs its own loop)
    scalable: bool = False  # run several: the group shares the partitions among them
    # Optional: `up` starts it only when this bool setting ("section.field") is on, and
    # `up --with-<name>` turns it on.
    opt_in: str | None = None
    object_store: bool = False  # reads or writes blobs: a MinIO user of its own
    compose: bool = True  # a docker-compose.yml service runs it (`webgym worker <name>`)
    profile: str | None = None  # the compose profile its service needs ("gpu")
    resource: ClusterResource = ClusterResource.STREAM  # its actor's Ray resource (cluster up)

    @property
    def optional(self) -> bool:
        return self.opt_in is not None

    @property
    def module(self) -> str:
        return self.entry.split(":")[0]

    @property
    def function(self) -> str:
        return self.entry.split(":")[1]


EPISODE_TOPICS = (Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_COMPLETED)

PROCESSES: dict[Process, ProcessSpec] = {s.name: s for s in (
    ProcessSpec(Process.BROWSER, "producers.browser.worker:run_browser_worker",
                "drives Chromium: one episode per context, one event per step",
                Group.BROWSERS, (Topic.EPISODES, Topic.ACTIONS, Topic.CONTROL,
                                 Topic.EPISODES_COMPLETED),
                (Topic.OBSERVATIONS, Topic.EPISODES_COMPLETED),
                options=(Option("contexts", int, "Episodes at once (default: "
                                "WEBGYM_BROWSER__CONTEXTS).", "browser.contexts"),),
                banner="browser worker: {s.browser.contexts} contexts, group {group}, "
                       "broker {s.kafka.bootstrap_servers}",
                scalable=True, object_store=True, resource=ClusterResource.BROWSER),
    ProcessSpec(Process.POLICY, "processors.policy.app:run_policy_worker",
                "decides an action per observation (vLLM, teacher or baseline)",
                Group.POLICY, (Topic.EPISODES, Topic.EPISODES_COMPLETED, Topic.OBSERVATIONS,
                               Topic.MODELS_SERVED, Topic.ACTIONS),
                (Topic.ACTIONS,),
                options=(Option("kind", PolicyKind, "Policy (default: WEBGYM_POLICY__KIND).",
                                "policy.kind"),),
                banner="policy processor: {s.policy.kind} at {s.policy.base_url}, "
                       "{s.policy.max_inflight} in flight",
                faust=True, tables=((StateTable.POLICY_CONTEXTS, Topic.EPISODES),),
                asynchronous=False, scalable=True, object_store=True,
                resource=ClusterResource.INFERENCE),
    ProcessSpec(Process.EVALUATOR, "processors.evaluator.app:run_evaluator_worker",
                "scores each completed episode exactly once (rules, LLM judge)",
                Group.EVALUATOR, EPISODE_TOPICS, (Topic.EPISODES_SCORED, Topic.BLOCKLIST),
                options=(Option("judge", JudgeKind, "Judge (default: WEBGYM_EVALUATOR__JUDGE).",
                                "evaluator.judge"),),
                banner="evaluator: {s.evaluator.judge} judge, "
                       "{s.evaluator.processing_guarantee}, "
                       "{s.evaluator.max_inflight} episodes in flight",
                faust=True, tables=((StateTable.REQUESTS, Topic.EPISODES),
                                    (StateTable.OBSERVATIONS, Topic.OBSERVATIONS),
                                    (StateTable.ACTIONS, Topic.ACTIONS),
                                    (StateTable.SCORED, Topic.EPISODES_COMPLETED)),
                asynchronous=False, scalable=True, object_store=True),
    ProcessSpec(Process.HISTORY, "processors.history:run_history_worker",
                "folds scores into each task's attempts and successes",
                Group.HISTORY, (Topic.EPISODES_SCORED, Topic.TASKS, Topic.TASK_HISTORY),
                (Topic.TASK_HISTORY,),
                banner="history worker: group {group}, broker {s.kafka.bootstrap_servers}",
                scalable=True),
    ProcessSpec(Process.METRICS, "processors.metrics:run_metrics_worker",
                "one RolloutMetrics per closed iteration, a CSV and a plot",
                None, (Topic.EPISODES_SCORED, Topic.CONTROL, Topic.METRICS), (Topic.METRICS,),
                options=(Option("csv_path", Path, "CSV to rewrite; the PNG goes beside it "
                                "(default: <infra.data_dir>/metrics/metrics.csv).",
                                flag="--csv"),),
                banner="metrics worker: broker {s.kafka.bootstrap_servers}"),
    ProcessSpec(Process.REPLAY, "processors.replay_buffer.app:run_replay_worker",
                "the replay buffer: scored episodes into training samples",
                Group.REPLAY, (Topic.EPISODES_SCORED, Topic.TASKS), (Topic.REPLAY,),
                banner="replay processor: group {group}, success_only={s.replay.success_only}, "
                       "same-screenshot filter {s.replay.filter_same_screenshot}, "
                       "failures kept {s.replay.include_failures}",
                scalable=True, object_store=True),
    ProcessSpec(Process.TRAINER, "consumers.trainer.app:run_trainer",
                "replay samples into LLaMA-Factory runs, one ModelVersion each",
                None, (Topic.REPLAY, Topic.CONTROL, Topic.MODELS, Topic.EPISODES_SCORED,
                       Topic.TASKS),
                (Topic.MODELS, Topic.TRAINING),
                banner="trainer: {s.trainer.mode} ({s.trainer.trigger}) of {base_model}, "
                       "max staleness {s.trainer.max_staleness}, "
                       "broker {s.kafka.bootstrap_servers}",
                prepare="infra.trainer_env:entry_keywords",
                training=True, object_store=True, profile="gpu",
                resource=ClusterResource.TRAINER),
    ProcessSpec(Process.MODEL_LOADER, "consumers.model_loader:run_model_loader",
                "loads each new version into vLLM, then announces it",
                None, (Topic.MODELS, Topic.MODELS_SERVED), (Topic.MODELS_SERVED,),
                banner="model loader: vLLM at {s.policy.base_url}, "
                       "broker {s.kafka.bootstrap_servers}",
                training=True, object_store=True, resource=ClusterResource.INFERENCE),
    # No group: it reads the three topics from their end and the catalog from the start,
    # commits nothing; a restarted server has no envs (clients create them again).
    ProcessSpec(Process.ENVSERVER, "producers.envserver.app:run_envserver",
                "serves AgentGym's env-server API to HTTP clients",
                None, (Topic.TASKS, Topic.OBSERVATIONS, Topic.EPISODES_COMPLETED,
                       Topic.EPISODES_SCORED),
                (Topic.EPISODES, Topic.ACTIONS, Topic.CONTROL),
                options=(
                    Option("host", str, "Address to bind (default: WEBGYM_ENVSERVER__HOST, "
                           "127.0.0.1).", "envserver.host"),
                    Option("port", int, "Port (default: WEBGYM_ENVSERVER__PORT, 18790).",
                           "envserver.port"),
                    Option("idle_timeout", float, "Close envs no request touched for this "
                           "many seconds (default: WEBGYM_ENVSERVER__IDLE_TIMEOUT_S, 900).",
                           "envserver.idle_timeout_s"),
                ),
                banner="env server: http://{s.envserver.host}:{s.envserver.port}/ (broker "
                       "{s.kafka.bootstrap_servers}, prefix {s.kafka.topic_prefix}; idle "
                       "envs closed after {s.envserver.idle_timeout_s:g} s)",
                opt_in="envserver.supervised"),
)}


def process_table() -> str:
    """The docs' process table (markdown), derived from PROCESSES."""
    def topics(ts: tuple[Topic, ...]) -> str:
        return ", ".join(f"`{t.value}`" for t in ts)

    rows = ["| process | what it does | group | reads | writes | notes |",
            "|---|---|---|---|---|---|"]
    for s in PROCESSES.values():
        notes = ", ".join(n for n, on in (("faust app", s.faust), ("scale out", s.scalable),
                                           ("training only", s.training),
                                           ("opt-in", s.optional)) if on)
        rows.append(f"| `{s.name.value}` | {s.summary} | {s.group.value if s.group else '-'} "
                    f"| {topics(s.reads)} | {topics(s.writes)} | {notes} |")
    return "\n".join(rows)
