"""The trajectory archiver: one iteration's scored episodes into an Avro container file.

`webgym export --iteration N` reads webgym.episodes.scored from the beginning to
its current end without a consumer group (an export changes no one's offsets),
keeps the first record of each of that iteration's episodes (the evaluator emits
one per episode, but at-least-once delivery can repeat it), and writes them with
the zstandard codec to `<out>/iteration{N}.avro` — WebGym's per-iteration
trajectory name, `iteration{N}_rank_{R}.avro` when a rank is given (multi-node).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webgym_common.codec import write_container
from webgym_common.config import Settings
from webgym_common.events import EpisodeScored
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import batches_to_end
from webgym_common.topics import Topic


@dataclass(frozen=True)
class Export:
    path: Path
    episodes: int


def export_path(out_dir: Path, iteration: int, rank: int | None = None) -> Path:
    name = f"iteration{iteration}" if rank is None else f"iteration{iteration}_rank_{rank}"
    return out_dir / f"{name}.avro"


def default_out_dir(settings: Settings) -> Path:
    return Path(settings.infra.data_dir) / "trajectories"


async def scored_episodes(
    settings: Settings, iteration: int, producer: EventProducer
) -> list[EpisodeScored]:
    """The iteration's scored episodes in log order, one per episode id."""
    first: dict[str, EpisodeScored] = {}
    consumer = EventConsumer(settings, [Topic.EPISODES_SCORED], None, producer,
                             client_id="archiver")
    async with consumer:
        async for batch in batches_to_end(consumer):
            for received in batch:
                e = received.event
                if isinstance(e, EpisodeScored) and e.iteration == iteration:
                    first.setdefault(e.episode_id, e)
    return list(first.values())


async def export_iteration(
    settings: Settings, iteration: int, out_dir: Path | None = None, rank: int | None = None
) -> Export:
    async with EventProducer(settings, client_id="archiver") as producer:
        episodes = await scored_episodes(settings, iteration, producer)
    path = export_path(out_dir or default_out_dir(settings), iteration, rank)
    # Written even when empty, so a pipeline step that expects the file finds it.
    count = write_container(path, episodes, EpisodeScored)
    return Export(path, count)
