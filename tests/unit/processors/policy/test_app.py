"""The policy app's wiring, built but not started: registry topics, tables, internal topics."""

from __future__ import annotations

from processors.policy.app import build_app
from webgym_common.config import load_settings
from webgym_common.topics import Group, Topic, group_id, internal_topic_specs, topic_specs


def test_the_policy_app_uses_the_registrys_topics_and_the_internal_topics_it_creates() -> None:
    settings = load_settings(kafka={"topic_prefix": "t9", "partitions": 3})
    kafka = settings.kafka
    app = build_app(settings)
    assert app.conf.id == group_id(kafka, Group.POLICY) and not app.conf.topic_allow_declare
    specs = topic_specs(kafka)
    inputs = {a.channel.get_topic_name(): a.channel.partitions for a in app.agents.values()}
    assert inputs == {specs[t].name: specs[t].partitions
                      for t in (Topic.EPISODES, Topic.EPISODES_COMPLETED, Topic.OBSERVATIONS)}
    # What faust derives for its changelogs and leader topic is what the registry creates.
    internal = {s.name: s for s in internal_topic_specs(kafka)}
    for table in app.tables.values():
        changelog = table.changelog_topic
        spec = internal[changelog.get_topic_name()]
        assert (changelog.partitions, spec.cleanup_policy) == (spec.partitions, "compact")
        assert changelog.compacting and not changelog.deleting
    assert internal[app._leader_assignor._leader_topic_name].partitions == 1
