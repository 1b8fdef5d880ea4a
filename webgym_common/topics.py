"""The topic registry: every topic's name, partitions, cleanup policy and retention.

Names are "<prefix>.<suffix>" (prefix `webgym` by default; tests use their own).
Episode-keyed topics share one partition count so that a consumer group over
episodes and actions assigns an episode's partitions in both to the same worker.
webgym.episodes.scored has that count too but is keyed by task_id (see the evaluator).
Faust's internal topics (table changelogs, leader election) are derived here as well,
so the registry creates every topic before any process starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from webgym_common.config import KafkaSettings


class Topic(StrEnum):
    """Logical topics; `.value` is the suffix after the prefix."""

    TASKS = "tasks"
    TASK_HISTORY = "task-history"
    EPISODES = "episodes"
    OBSERVATIONS = "observations"
    ACTIONS = "actions"
    EPISODES_COMPLETED = "episodes.completed"
    EPISODES_SCORED = "episodes.scored"
    REPLAY = "replay"
    MODELS = "models"
    MODELS_SERVED = "models.served"
    TRAINING = "training"
    CONTROL = "control"
    METRICS = "metrics"
    EVALUATIONS = "evaluations"
    BLOCKLIST = "blocklist"
    DLQ = "dlq"


class Cleanup(StrEnum):
    COMPACT = "compact"  # the latest record per key, kept forever: a table
    DELETE = "delete"  # a log, dropped after its retention


class Retention(StrEnum):
    """How long a delete-topic keeps its records: which KafkaSettings field says."""

    FOREVER = "forever"
    DEFAULT = "default_retention_ms"
    SCORED = "scored_retention_ms"
    REPLAY = "replay_retention_ms"

    def ms(self, kafka: KafkaSettings) -> int:
        return -1 if self is Retention.FOREVER else int(getattr(kafka, self.value))


@dataclass(frozen=True)
class TopicRow:
    """Everything the registry knows about one topic; the lookups below derive from these."""

    topic: Topic
    events: tuple[str, ...]  # the event types published on it (schema names)
    key: str  # what its records are keyed by: records of one key share a partition, in order
    per_episode: bool  # kafka.partitions partitions (True) or one
    cleanup: Cleanup
    retention: Retention


# One row per topic. The four episode topics share the key and the partition count, so one
# worker owns an episode on all of them; the scores are keyed by task so that one history
# worker owns a task. Anything on a topic not among its events is dead-lettered.
_C, _D, _F = Cleanup.COMPACT, Cleanup.DELETE, Retention.FOREVER
TOPICS: tuple[TopicRow, ...] = (
    TopicRow(Topic.TASKS, ("Task",), "task_id", True, _C, _F),
    TopicRow(Topic.TASK_HISTORY, ("TaskHistory",), "task_id", True, _C, _F),
    TopicRow(Topic.EPISODES, ("EpisodeRequested",), "episode_id", True, _D, Retention.DEFAULT),
    TopicRow(Topic.OBSERVATIONS, ("StepObserved",), "episode_id", True, _D, Retention.DEFAULT),
    TopicRow(Topic.ACTIONS, ("ActionChosen",), "episode_id", True, _D, Retention.DEFAULT),
    TopicRow(Topic.EPISODES_COMPLETED, ("EpisodeCompleted",), "episode_id", True, _D,
             Retention.DEFAULT),
    TopicRow(Topic.EPISODES_SCORED, ("EpisodeScored",), "task_id", True, _D, Retention.SCORED),
    TopicRow(Topic.REPLAY, ("ReplaySample",), "sample_id", True, _D, Retention.REPLAY),
    TopicRow(Topic.MODELS, ("ModelVersion",), "model name", False, _C, _F),
    # What the model server serves now: the policy switches on it, only after the loader
    # has seen the new name listed by the server.
    TopicRow(Topic.MODELS_SERVED, ("ModelServed",), "model name", False, _C, _F),
    TopicRow(Topic.TRAINING, ("TrainingProgress",), "run id", False, _D, Retention.DEFAULT),
    TopicRow(Topic.CONTROL, ("IterationStarted", "IterationClosed", "CancelEpisode"),
             "iteration", False, _D, Retention.DEFAULT),
    TopicRow(Topic.METRICS, ("RolloutMetrics",), "iteration", False, _C, _F),
    # Held-out success per model version, suite and split (webgym eval).
    TopicRow(Topic.EVALUATIONS, ("EvaluationResult",),
             "evaluation key (version, suite, split)", False, _C, _F),
    # Blocked domains, compacted so that every sampler sees the current list.
    TopicRow(Topic.BLOCKLIST, ("DomainBlocked",), "domain", False, _C, _F),
    TopicRow(Topic.DLQ, ("DeadLetter",), "source topic", False, _D, Retention.DEFAULT),
)
VALUE_TYPES: dict[Topic, tuple[str, ...]] = {row.topic: row.events for row in TOPICS}
KEYS: dict[Topic, str] = {row.topic: row.key for row in TOPICS}


@dataclass(frozen=True)
class TopicSpec:
    """A topic as the broker makes it (a row resolved against the Kafka settings, or one of
    faust's internal topics)."""

    name: str
    partitions: int
    cleanup_policy: str  # "compact" or "delete"
    retention_ms: int  # -1 keeps forever
    value_types: tuple[str, ...]  # event types published on it (schema names)
    configs: dict[str, str] = field(default_factory=dict)
    key: str = ""  # what its records are keyed by; "" for faust's internal topics

    def kafka_configs(self) -> dict[str, str]:
        out = {"cleanup.policy": self.cleanup_policy, "retention.ms": str(self.retention_ms)}
        if self.cleanup_policy == "compact":
            # Compact soon after writes so the log stays one record per key.
            out.update({"min.cleanable.dirty.ratio": "0.1", "segment.ms": "600000"})
        out.update(self.configs)
        return out


def topic_specs(kafka: KafkaSettings) -> dict[Topic, TopicSpec]:
    return {row.topic: TopicSpec(topic_name(kafka, row.topic),
                                 kafka.partitions if row.per_episode else 1,
                                 row.cleanup.value, row.retention.ms(kafka), row.events,
                                 key=row.key)
            for row in TOPICS}


def misplaced(topic: str, event_type: str) -> str | None:
    """Why an event of this type does not belong on the topic named `topic` (any prefix);
    None if it does, or if the topic is not one of the registry's."""
    ours = [t for t in Topic if topic.endswith("." + t.value)]
    if not ours:
        return None
    home = max(ours, key=lambda t: len(t.value))  # "….episodes.completed", not "….completed"
    if event_type in VALUE_TYPES[home]:
        return None
    return (f"{event_type} does not belong on {topic} "
            f"(it carries {', '.join(VALUE_TYPES[home])})")


def min_insync_replicas(replication_factor: int) -> int:
    """Replicas that must have a write before acks=all succeeds: one broker may be down.

    1 replica: 1; 2: 1 (2 would stop every write while one broker is down); 3 or more: 2.
    """
    return max(1, min(2, replication_factor - 1))


def topic_name(kafka: KafkaSettings, topic: Topic) -> str:
    return f"{kafka.topic_prefix}.{topic.value}"


# -- faust's internal topics ----------------------------------------------------------
# A faust app (its id is its consumer group: `group_id(kafka, Group.X)`) keeps each table
# in a compacted changelog "<app id>-<table>-changelog" and elects a leader on
# "<app id>-__assignor-__leader". The registry creates these with every other topic, and
# the apps create none: a faust app that creates its changelog as it starts can read it
# back as having 0 partitions and crash-loop on PartitionsMismatch.


class StateTable(StrEnum):
    """Faust tables (keyed state, restored from a changelog); `.value` is the table's name."""

    POLICY_CONTEXTS = "policy-contexts"  # episode_id -> the policy's EpisodeContext
    REQUESTS = "requests"  # evaluator: episode_id -> the task and request facts
    OBSERVATIONS = "observations"  # evaluator: "episode_id/step" -> the first observation
    ACTIONS = "actions"  # evaluator: "episode_id/step" -> the first action
    SCORED = "scored"  # evaluator: episode_id -> when it was scored (ms)


def table_owners() -> dict[StateTable, tuple[Group, Topic]]:
    """Each table's faust app, and the input topic whose partitions its changelog mirrors:
    the process rows' `tables` (webgym_common.processes).

    A table is written while handling an event of that topic, on the event's partition,
    so the changelog has exactly that topic's partition count.
    """
    from webgym_common.processes import PROCESSES  # it imports this module: read when called

    return {table: (spec.group, source) for spec in PROCESSES.values() if spec.group
            for table, source in spec.tables}


def faust_apps() -> tuple[Group, ...]:
    """The groups that are faust apps (the others use webgym_common.stream.bus): the process
    rows that say `faust`."""
    from webgym_common.processes import PROCESSES  # it imports this module: read when called

    return tuple(spec.group for spec in PROCESSES.values() if spec.faust and spec.group)


def changelog_topic_name(kafka: KafkaSettings, table: StateTable) -> str:
    app, _ = table_owners()[table]
    return f"{group_id(kafka, app)}-{table.value}-changelog"


def leader_topic_name(kafka: KafkaSettings, app: Group) -> str:
    return f"{group_id(kafka, app)}-__assignor-__leader"


def table_partitions(kafka: KafkaSettings, table: StateTable) -> int:
    _, source = table_owners()[table]
    return topic_specs(kafka)[source].partitions


def internal_topic_specs(kafka: KafkaSettings) -> list[TopicSpec]:
    """The faust apps' changelogs (compacted, kept forever) and leader topics (1 partition)."""
    changelogs = [
        TopicSpec(changelog_topic_name(kafka, t), table_partitions(kafka, t), "compact", -1, ())
        for t in StateTable
    ]
    leaders = [
        TopicSpec(leader_topic_name(kafka, app), 1, "delete", kafka.default_retention_ms, ())
        for app in faust_apps()
    ]
    return [*changelogs, *leaders]


def all_topic_specs(kafka: KafkaSettings) -> list[TopicSpec]:
    """Every topic `webgym topics create` makes: the registry's and faust's internal ones."""
    return [*topic_specs(kafka).values(), *internal_topic_specs(kafka)]


class Group(StrEnum):
    """Consumer groups (and faust app ids); `.value` is the suffix after the prefix."""

    BROWSERS = "browsers"
    POLICY = "policy"
    EVALUATOR = "evaluator"
    HISTORY = "history"
    REPLAY = "replay"  # the replay buffer; the trainer reads how far it has got


def group_id(kafka: KafkaSettings, group: Group) -> str:
    """"<prefix>-<suffix>": each topic prefix (each test) has groups of its own."""
    return f"{kafka.topic_prefix}-{group.value}"


def topic_table(kafka: KafkaSettings) -> str:
    """The docs' topic table (markdown), derived from the registry."""
    rows = ["| topic | key | events | partitions | cleanup |", "|---|---|---|---|---|"]
    for spec in topic_specs(kafka).values():
        rows.append(f"| `{spec.name}` | {spec.key} | {', '.join(spec.value_types)} "
                    f"| {spec.partitions} | {spec.cleanup_policy} |")
    return "\n".join(rows)
