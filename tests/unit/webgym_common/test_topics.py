"""The topic registry and consumer-group names."""

from __future__ import annotations

from webgym_common.config import load_settings
from webgym_common.events import EVENT_TYPES
from webgym_common.topics import (
    VALUE_TYPES,
    Group,
    StateTable,
    Topic,
    all_topic_specs,
    changelog_topic_name,
    faust_apps,
    group_id,
    internal_topic_specs,
    leader_topic_name,
    misplaced,
    table_owners,
    topic_specs,
)


def test_registry_names_only_known_event_types_and_copartitions_episode_topics() -> None:
    specs = topic_specs(load_settings(kafka={"partitions": 6}).kafka)
    assert set(specs) == set(Topic)
    for spec in specs.values():
        assert set(spec.value_types) <= set(EVENT_TYPES), spec.name
    copartitioned = [Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS,
                        Topic.EPISODES_COMPLETED, Topic.EPISODES_SCORED]
    assert {specs[t].partitions for t in copartitioned} == {6}
    assert specs[Topic.EPISODES].name == "webgym.episodes"
    assert specs[Topic.EPISODES_COMPLETED].name == "webgym.episodes.completed"
    compacted = {t for t, s in specs.items() if s.cleanup_policy == "compact"}
    assert compacted == {Topic.TASKS, Topic.TASK_HISTORY, Topic.MODELS, Topic.MODELS_SERVED,
                         Topic.METRICS, Topic.EVALUATIONS, Topic.BLOCKLIST}


def test_group_ids_follow_the_topic_prefix() -> None:
    assert group_id(load_settings().kafka, Group.BROWSERS) == "webgym-browsers"
    kafka = load_settings(kafka={"topic_prefix": "t123"}).kafka
    assert {group_id(kafka, g) for g in Group} == {
        "t123-browsers", "t123-policy", "t123-evaluator", "t123-history", "t123-replay"}


def test_every_topic_declares_its_key_and_the_episode_topics_share_one() -> None:
    specs = topic_specs(load_settings().kafka)
    assert all(spec.key for spec in specs.values())
    episode_keyed = {t for t, spec in specs.items() if spec.key == "episode_id"}
    assert episode_keyed == {Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS,
                             Topic.EPISODES_COMPLETED}
    assert len({specs[t].partitions for t in episode_keyed}) == 1


def test_faust_internal_topics_are_derived_from_app_ids_and_table_names() -> None:
    kafka = load_settings(kafka={"topic_prefix": "t5", "partitions": 6}).kafka
    specs = {s.name: s for s in internal_topic_specs(kafka)}
    assert set(specs) == {
        "t5-policy-policy-contexts-changelog", "t5-evaluator-requests-changelog",
        "t5-evaluator-observations-changelog", "t5-evaluator-actions-changelog",
        "t5-evaluator-scored-changelog",
        "t5-policy-__assignor-__leader", "t5-evaluator-__assignor-__leader"}
    for table in StateTable:
        changelog = specs[changelog_topic_name(kafka, table)]
        # Co-partitioned with the input it is written from; one record per key, forever.
        assert (changelog.partitions, changelog.cleanup_policy, changelog.retention_ms) == (
            6, "compact", -1)
        assert changelog.kafka_configs()["cleanup.policy"] == "compact"
    for app in faust_apps():
        assert specs[leader_topic_name(kafka, app)].partitions == 1
    assert {app for app, _ in table_owners().values()} == set(faust_apps())


def test_topics_create_makes_the_registrys_topics_and_fausts() -> None:
    kafka = load_settings(kafka={"partitions": 2}).kafka
    names = [s.name for s in all_topic_specs(kafka)]
    assert len(names) == len(set(names)) == len(Topic) + len(StateTable) + len(faust_apps())
    assert {s.name for s in topic_specs(kafka).values()} < set(names)


def test_an_event_off_its_topic_is_misplaced_whatever_the_prefix() -> None:
    assert misplaced("p1.observations", "StepObserved") is None
    assert misplaced("a.b.control", "CancelEpisode") is None  # one of the topic's three
    why = misplaced("p1.episodes.completed", "TaskHistory")
    assert why is not None and "EpisodeCompleted" in why and "TaskHistory" in why
    assert misplaced("p1.episodes", "EpisodeCompleted") is not None
    assert misplaced("p1-evaluator-scored-changelog", "TaskHistory") is None  # not ours


def test_every_event_type_has_a_home_topic() -> None:
    homes = {name for types in VALUE_TYPES.values() for name in types}
    assert homes == set(EVENT_TYPES)  # a new event type needs its topic in the registry


def test_the_registry_has_one_row_per_topic_and_retention_comes_from_the_settings() -> None:
    from webgym_common.topics import TOPICS

    assert [row.topic for row in TOPICS] == list(Topic)
    specs = topic_specs(load_settings(kafka={"replay_retention_ms": 123_456}).kafka)
    assert specs[Topic.REPLAY].retention_ms == 123_456
    assert specs[Topic.TASKS].retention_ms == -1
