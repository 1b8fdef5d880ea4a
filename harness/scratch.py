"""Benches' scratch topics: what a bench made on the shared broker goes when it ends."""

from __future__ import annotations

from webgym_common.config import Settings
from webgym_common.stream.admin import delete_topics, topic_names


async def scratch_topics_left(settings: Settings, before: set[str]) -> set[str]:
    """Delete the topics a bench made (each makes its own under a fresh prefix) and return
    them. Left behind, they pile up by the thousand on the embedded broker, whose work for
    them then shows in every later bench's CPU per step. The pipeline's own topics are
    never touched, whenever they were made."""
    own = settings.kafka.topic_prefix
    made = {t for t in await topic_names(settings) - before
            if not t.startswith((f"{own}.", f"{own}-", "__"))}
    await delete_topics(settings, made)
    return made
