"""The topic registry: every topic's name, partitions, cleanup policy and retention.

Names are "<prefix>.<suffix>" (prefix `webgym` by default; tests use their own).
Episode-keyed topics share one partition count so that a consumer group over
episodes and actions assigns an episode's partitions in both to the same worker.
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
    CONTROL = "control"
    METRICS = "metrics"
    BLOCKLIST = "blocklist"
    DLQ = "dlq"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    cleanup_policy: str  # "compact" or "delete"
    retention_ms: int  # -1 keeps forever
    value_types: tuple[str, ...]  # event types published on it (schema names)
    configs: dict[str, str] = field(default_factory=dict)

    def kafka_configs(self) -> dict[str, str]:
        out = {"cleanup.policy": self.cleanup_policy, "retention.ms": str(self.retention_ms)}
        if self.cleanup_policy == "compact":
            # Compact soon after writes so the log stays one record per key.
            out.update({"min.cleanable.dirty.ratio": "0.1", "segment.ms": "600000"})
        out.update(self.configs)
        return out


def topic_specs(kafka: KafkaSettings) -> dict[Topic, TopicSpec]:
    p, keep = kafka.partitions, kafka.default_retention_ms

    def spec(
        t: Topic, parts: int, cleanup: str, retention: int, *types: str
    ) -> tuple[Topic, TopicSpec]:
        return t, TopicSpec(topic_name(kafka, t), parts, cleanup, retention, types)

    specs = [
        spec(Topic.TASKS, p, "compact", -1, "Task"),
        spec(Topic.TASK_HISTORY, p, "compact", -1, "TaskHistory"),
        spec(Topic.EPISODES, p, "delete", keep, "EpisodeRequested"),
        spec(Topic.OBSERVATIONS, p, "delete", keep, "StepObserved"),
        spec(Topic.ACTIONS, p, "delete", keep, "ActionChosen"),
        spec(Topic.EPISODES_COMPLETED, p, "delete", keep, "EpisodeCompleted"),
        spec(Topic.EPISODES_SCORED, p, "delete", kafka.scored_retention_ms, "EpisodeScored"),
        spec(Topic.REPLAY, p, "delete", kafka.replay_retention_ms, "ReplaySample"),
        spec(Topic.MODELS, 1, "compact", -1, "ModelVersion"),
        spec(
            Topic.CONTROL, 1, "delete", keep, "IterationStarted", "IterationClosed", "CancelEpisode"
        ),
        spec(Topic.METRICS, 1, "compact", -1, "RolloutMetrics"),
        # Blocked domains (key: domain); compacted so every sampler sees the current list.
        spec(Topic.BLOCKLIST, 1, "compact", -1, "DomainBlocked"),
        spec(Topic.DLQ, 1, "delete", keep, "DeadLetter"),
    ]
    return dict(specs)


def topic_name(kafka: KafkaSettings, topic: Topic) -> str:
    return f"{kafka.topic_prefix}.{topic.value}"


class Group(StrEnum):
    """Consumer groups (and faust app ids); `.value` is the suffix after the prefix."""

    BROWSERS = "browsers"
    POLICY = "policy"
    EVALUATOR = "evaluator"
    HISTORY = "history"
    METRICS = "metrics"


def group_id(kafka: KafkaSettings, group: Group) -> str:
    """"<prefix>-<suffix>": each topic prefix (each test) has groups of its own."""
    return f"{kafka.topic_prefix}-{group.value}"
