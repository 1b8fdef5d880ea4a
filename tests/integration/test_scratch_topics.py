"""`make bench` deletes the topics each bench made, and never the pipeline's own."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest

from harness.scratch import scratch_topics_left
from webgym_common.config import Settings
from webgym_common.stream.admin import create_topic, create_topics, topic_names
from webgym_common.topics import Topic, all_topic_specs, topic_specs

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_a_bench_leaves_no_topic_behind_and_the_pipeline_keeps_its_own(
        settings: Settings) -> None:
    before = await topic_names(settings)
    bench = settings.model_copy(update={"kafka": settings.kafka.model_copy(
        update={"topic_prefix": f"bench{uuid.uuid4().hex[:6]}"})})
    await create_topics(bench)  # what a bench makes under its own prefix
    made = {s.name for s in all_topic_specs(bench.kafka)}
    # A topic of the pipeline's own prefix made while the bench ran (a replay's target).
    late = f"{settings.kafka.topic_prefix}.replay.late"
    await create_topic(settings, replace(topic_specs(settings.kafka)[Topic.REPLAY], name=late))

    deleted = await scratch_topics_left(settings, before)

    assert deleted == made
    for _ in range(50):  # the controller applies a deletion shortly after it answers
        left = await topic_names(settings)
        if not left & made:
            break
        await asyncio.sleep(0.2)
    assert not left & made
    assert late in left and before <= left
