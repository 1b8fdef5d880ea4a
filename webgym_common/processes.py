"""The process registry: every pipeline process, what runs it, what it reads and writes.

One table (PROCESSES) from which the rest is derived and checked: the supervisor's list
(`webgym pipeline up`, infra/pipeline.py), the `webgym worker <name>` commands
(webgym_cli/worker.py: a test checks that the two name the same processes), the
compose services' commands (tests/unit/test_compose.py) and the process table of
docs/architecture.md (`process_table()`, checked by a test). Entry points are named as
"module:function" so this ground-floor module imports nothing above it; the function
takes the settings and is a coroutine function when `asynchronous`.

An optional process (`opt_in`) is started by `webgym pipeline up` only when its
setting asks for it (the env server: `envserver.supervised`, `up --with-envserver`);
its worker command and compose service are there all the same.

Adding a process: a row here, its module, its `webgym worker` command, a compose
service; the tests say what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from webgym_common.topics import Group, Topic


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


@dataclass(frozen=True)
class ProcessSpec:
    name: Process
    entry: str  # "module:function(settings)"
    summary: str  # one line: the worker command's help, the docs' table
    group: Group | None  # its consumer group (a faust app's id); None: reads without one
    reads: tuple[Topic, ...]
    writes: tuple[Topic, ...]
    training: bool = False  # runs only when the loop trains (LLaMA-Factory, vLLM)
    faust: bool = False  # a faust app (tables with changelogs) rather than webgym_common.stream.bus
    asynchronous: bool = True  # entry is a coroutine function (a faust worker runs its own loop)
    scalable: bool = False  # run several: the group shares the partitions among them
    # Optional: `up` starts it only when this bool setting ("section.field") is on.
    opt_in: str | None = None

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
                "drives Chromium: one episode per context, a StepObserved per step",
                Group.BROWSERS, (Topic.EPISODES, Topic.ACTIONS, Topic.CONTROL),
                (Topic.OBSERVATIONS, Topic.EPISODES_COMPLETED), scalable=True),
    ProcessSpec(Process.POLICY, "processors.policy.app:run_policy_worker",
                "decides an action for every observation (vLLM, teacher or baseline)",
                Group.POLICY, (Topic.EPISODES, Topic.EPISODES_COMPLETED, Topic.OBSERVATIONS,
                               Topic.MODELS_SERVED),
                (Topic.ACTIONS,), faust=True, asynchronous=False, scalable=True),
    ProcessSpec(Process.EVALUATOR, "processors.evaluator.app:run_evaluator_worker",
                "scores every completed episode exactly once (rules, LLM judge, page reward)",
                Group.EVALUATOR, EPISODE_TOPICS, (Topic.EPISODES_SCORED, Topic.BLOCKLIST),
                faust=True, asynchronous=False, scalable=True),
    ProcessSpec(Process.HISTORY, "processors.history:run_history_worker",
                "folds scores into each task's attempts and successes",
                Group.HISTORY, (Topic.EPISODES_SCORED, Topic.TASKS), (Topic.TASK_HISTORY,),
                scalable=True),
    ProcessSpec(Process.METRICS, "processors.metrics:run_metrics_worker",
                "one RolloutMetrics per closed iteration, a CSV and a plot",
                None, (Topic.EPISODES_SCORED, Topic.CONTROL, Topic.METRICS), (Topic.METRICS,)),
    ProcessSpec(Process.REPLAY, "processors.replay_buffer.app:run_replay_worker",
                "the replay buffer: scored episodes into training samples",
                Group.REPLAY, (Topic.EPISODES_SCORED, Topic.TASKS), (Topic.REPLAY,),
                scalable=True),
    ProcessSpec(Process.TRAINER, "consumers.trainer.app:run_trainer",
                "replay samples into LLaMA-Factory runs, one ModelVersion each",
                None, (Topic.REPLAY, Topic.CONTROL, Topic.MODELS, Topic.EPISODES_SCORED,
                       Topic.TASKS),
                (Topic.MODELS, Topic.TRAINING), training=True),
    ProcessSpec(Process.MODEL_LOADER, "consumers.model_loader:run_model_loader",
                "loads each new version into vLLM, then announces it",
                None, (Topic.MODELS,), (Topic.MODELS_SERVED,), training=True),
    # No group: it reads the three topics from their end and the catalog from the start,
    # commits nothing; a restarted server has no envs (clients create them again).
    ProcessSpec(Process.ENVSERVER, "producers.envserver.app:run_envserver",
                "serves AgentGym's env-server API: HTTP clients drive the episodes",
                None, (Topic.TASKS, Topic.OBSERVATIONS, Topic.EPISODES_COMPLETED,
                       Topic.EPISODES_SCORED),
                (Topic.EPISODES, Topic.ACTIONS, Topic.CONTROL),
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
