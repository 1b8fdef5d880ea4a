"""`webgym reprocess export`: iteration files as Avro containers and in WebGym's own layout.

Delivery: a file export; nothing is committed, nothing is written to Kafka. Reading is
group-less (committed records only): the completions in the range, each episode's request,
steps, actions and first score (webgym_common.logrange.episodes); an episode with no score yet is
left out. Files are written whole to a temporary name and renamed, so a killed export leaves
the previous file or none, never half of one; running it again rewrites the same files.

Per iteration N (and rank R, multi-node):
- `<out>/iteration{N}[_rank_{R}].avro`: the scored episodes (EpisodeScored), zstandard, as
  `webgym export` writes them (consumers.archiver).
- `<out>/{split}_trajectories/{split}_trajectories.iteration{N}[_rank_{R}].json`: WebGym's
  per-iteration file (`{"trajectories": [...], "metadata": {...}}`), one list of steps per
  episode, each step with WebGym's field names (`webgym_step`; the README lists them).
  With `blobs`, screenshots are copied to `<out>/images/<episode>/<step>.<ext>` (the step's
  image_path) and each step's prompt is inlined as raw_prompt (JSON chat messages, as
  WebGym's replay buffer reads it); without, image_path is the s3:// reference and
  raw_prompt is empty.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consumers.archiver import export_path
from webgym_common.codec import write_container
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    EpisodeRequested,
    EpisodeScored,
    StepObserved,
    Task,
)
from webgym_common.logrange.bounds import LogRange
from webgym_common.logrange.episodes import EpisodeLog, read_episodes
from webgym_common.objectstore import BlobMismatch, ObjectStore, ObjectStoreError
from webgym_common.stream.bus import EventProducer

logger = logging.getLogger(__name__)

Keypoints = Callable[[Sequence[StepObserved]], Collection[int]]  # steps a judge would see


@dataclass(frozen=True)
class ExportedIteration:
    iteration: int
    episodes: int
    steps: int
    avro: Path
    webgym: list[Path]  # one file per split


# -- WebGym's field names (pure) ------------------------------------------------------


def webgym_task(task: Task, max_steps: int | None) -> dict[str, Any]:
    """WebGym's Task: fact groups flattened as its loader does ("[Group id: description]
    fact"), the definite answer as reference_answer."""
    reference = [{"description": f"[Group {g.id}: {g.description}] {fact}", "difficulty": 1}
                 for g in task.evaluator_reference for fact in g.facts]
    return {"task_name": task.task_name, "domain": task.domain, "subdomain": task.subdomain,
            "website": task.website, "difficulty": task.difficulty,
            "evaluator_reference": reference,
            "reference_answer": task.definite_answer or task.reference_answer,
            "attempt_level": task.attempt_level or 0, "task_id": task.task_id,
            "max_steps": max_steps, "trajectory_index": None}


def reward_record(scored: EpisodeScored | None, last: bool, submit: bool) -> dict[str, Any]:
    """WebGym's Reward: the episode's verdict on its last step (WebGym reads the trajectory's
    reward there); `submit` marks the screenshots the judge looked at (WebGym's keypoints)."""
    if scored is None or not last:
        return {"reward": 0.0, "evaluation": None, "is_blocked": False, "submit": submit,
                "submission_judgment": None}
    return {"reward": scored.reward, "evaluation": scored.evaluation,
            "is_blocked": scored.is_blocked, "submit": submit,
            "submission_judgment": scored.submission_judgment}


def same_as_next(obs: StepObserved | None, after: StepObserved | None) -> bool:
    """WebGym's same_as_next_screenshot (the replay filter's rule: equal screenshot hashes)."""
    return (obs is not None and after is not None and obs.screenshot_sha256 is not None
            and obs.screenshot_sha256 == after.screenshot_sha256)


def webgym_step(request: EpisodeRequested | None, obs: StepObserved | None,
                act: ActionChosen | None, scored: EpisodeScored | None, *, last: bool,
                same_next: bool, submit: bool, image_path: str | None = None,
                raw_prompt: str = "") -> dict[str, Any]:
    """One step as WebGym saves it: observation, action, response, reward,
    same_as_next_screenshot."""
    observation = None
    if obs is not None:
        observation = {
            "task": webgym_task(request.task, request.max_steps) if request else None,
            "image_path": image_path if image_path is not None else (obs.screenshot_uri or ""),
            "ac_tree": obs.accessibility_tree,
            "page_metadata": {"url": obs.url, "title": obs.title,
                              "viewport": {"width": obs.viewport.width,
                                           "height": obs.viewport.height}},
        }
    action = response = None
    if act is not None:
        action = {"action": act.action.model_dump(mode="json"),
                  "action_string": act.action_string}
        response = {"raw_response": act.raw_response,
                    "answering_tokens": {"thought": act.thought, "action": act.action_string,
                                         "memory": act.memory_json},
                    "raw_prompt": raw_prompt}
    return {"observation": observation, "action": action, "response": response,
            "reward": reward_record(scored, last, submit), "same_as_next_screenshot": same_next}


def webgym_trajectory(log: EpisodeLog, episode_id: str, keypoints: Keypoints | None = None,
                      images: dict[int, str] | None = None,
                      prompts: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """An episode's steps in WebGym's layout; the first carries trajectory_metadata."""
    observed, acted = log.observations.get(episode_id, {}), log.actions.get(episode_id, {})
    steps = sorted(set(observed) | set(acted))
    chosen = set(keypoints([observed[s] for s in sorted(observed)])) if keypoints else set()
    out = []
    for i, s in enumerate(steps):
        obs = observed.get(s)
        out.append(webgym_step(
            log.requests.get(episode_id), obs, acted.get(s), log.scores.get(episode_id),
            last=i == len(steps) - 1, same_next=same_as_next(obs, observed.get(s + 1)),
            submit=s in chosen, image_path=(images or {}).get(s),
            raw_prompt=(prompts or {}).get(s, "")))
    if out:
        scored = log.scores.get(episode_id)
        out[0]["trajectory_metadata"] = {
            "keypoint_step_ids": sorted(i for i, s in enumerate(steps) if s in chosen),
            "episode_id": episode_id, "policy_version": scored.policy_version if scored else None,
            "evaluator_version": scored.evaluator_version if scored else None}
    return out


def webgym_path(out_dir: Path, split: str, iteration: int, rank: int | None = None) -> Path:
    suffix = "" if rank is None else f"_rank_{rank}"
    name = f"{split}_trajectories.iteration{iteration}{suffix}.json"
    return out_dir / f"{split}_trajectories" / name


# -- the export ------------------------------------------------------------------------


def _write_atomic(path: Path, data: bytes | Callable[[Path], object]) -> None:
    """Bytes (or a writer of the file) to `path` via a temporary name: whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        data(tmp)
    os.replace(tmp, path)


def _container(episodes: list[EpisodeScored]) -> Callable[[Path], object]:
    return lambda path: write_container(path, episodes, EpisodeScored)


async def _blobs(store: ObjectStore, log: EpisodeLog, episode_id: str, out_dir: Path
                 ) -> tuple[dict[int, str], dict[int, str]]:
    images: dict[int, str] = {}
    prompts: dict[int, str] = {}
    for step, obs in log.observations.get(episode_id, {}).items():
        if obs.screenshot_uri:
            ext = (obs.screenshot_format or "png").replace("jpeg", "jpg")
            path = out_dir / "images" / episode_id / f"{step}.{ext}"
            if not path.exists():
                try:
                    data = await store.get_blob(obs.screenshot_uri)
                except BlobMismatch as err:  # altered in the store: left out, not copied
                    logger.warning("export: %s", err)
                    continue
                _write_atomic(path, data)
            images[step] = str(path.relative_to(out_dir))
    for step, act in log.actions.get(episode_id, {}).items():
        if act.prompt_uri:
            try:
                prompts[step] = (await store.get_blob(act.prompt_uri)).decode()
            except (ObjectStoreError, UnicodeDecodeError, OSError):
                prompts[step] = ""  # a prompt that cannot be read: WebGym's "no raw_prompt"
    return images, prompts


async def export_range(settings: Settings, rng: LogRange, out_dir: Path,
                       rank: int | None = None, webgym: bool = True, blobs: bool = False,
                       keypoints: Keypoints | None = None,
                       on_progress: Callable[[str, int, int], None] | None = None,
                       ) -> list[ExportedIteration]:
    async with EventProducer(settings, client_id="replay-export") as producer:
        log = await read_episodes(settings, producer, rng, on_read=on_progress)
    scored = [eid for eid in log.completions if eid in log.scores]
    by_iteration: dict[int, list[str]] = {}
    for eid in scored:
        by_iteration.setdefault(log.scores[eid].iteration, []).append(eid)
    store = ObjectStore(settings.s3) if blobs else None
    out: list[ExportedIteration] = []
    done = 0
    for iteration, ids in sorted(by_iteration.items()):
        avro = export_path(out_dir, iteration, rank)
        _write_atomic(avro, _container([log.scores[e] for e in ids]))
        paths: list[Path] = []
        for split in sorted({log.scores[e].split for e in ids} if webgym else ()):
            trajectories = []
            in_split = [e for e in ids if log.scores[e].split == split]
            for eid in in_split:
                images, prompts = (await _blobs(store, log, eid, out_dir) if store is not None
                                   else ({}, {}))
                trajectories.append(webgym_trajectory(log, eid, keypoints, images, prompts))
                done += 1
                if on_progress is not None:
                    on_progress("writing", done, len(scored))
            path = webgym_path(out_dir, split, iteration, rank)
            doc = {"trajectories": trajectories,
                   "metadata": {"iteration": iteration, "split": split,
                                "episodes": len(in_split), "source": "webgym reprocess export"}}
            _write_atomic(path, json.dumps(doc).encode())
            paths.append(path)
        out.append(ExportedIteration(iteration, len(ids), sum(log.steps(e) for e in ids),
                                     avro, paths))
    return out
