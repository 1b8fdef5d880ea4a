"""MiniWoB++ as a task suite: one task per (environment, seed); the page scores itself.

Regenerate ``miniwob_tasks.jsonl``: ``python -m environments.tasks.miniwob_tasks``.

Each line is a Task with `environment` {kind: miniwob, name, seed}: the browser worker
starts the page's episode with that seed, the page writes the instruction (reported in the
first observation; `task_name` is only a placeholder) and the page's reward scores the
episode, so there is no evaluator_reference and no answer. Splits by seed: seeds 0-19 are
train, 100-119 train too but the rollout pool (`"pool": "rollout"`: fresh seeds for the
policy's own episodes, never in the demonstration bank nor teacher-forced), 2000-2009
validation (for choosing recipes), 1000-1009 test; the OOD environments are
held out whole (their seeds 1000-1009 are ood). An environment whose every seed has the same
solution (ONE_SOLUTION: its page never changes what it asks) has seeds 0-19 only: a held-out
seed of it would be a training task under another id, so it is held out nowhere and the
reports name it apart; nor is it in the rollout pool, where the policy would only succeed
again at what the bank already holds. Environments the action grammar cannot express are
in UNSUPPORTED, with the reason, and never in the file.

Reference actions (for teacher-forced demonstrations, `--demos`) come from
`miniwob_references.json`, which `python -m environments.tasks.miniwob_references` builds
with scripted solvers and verifies in Chromium (coverage per environment: that module's
docstring); a task without a verified sequence has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from environments.miniwob import page_path
from webgym_common.tasks import ROLLOUT_POOL

OUTPUT = Path(__file__).with_name("miniwob_tasks.jsonl")
# Verified reference sequences, {task_id: [ReferenceAction, ...]}, built in Chromium by
# miniwob_references.py; merged into the lines here so that this generator stays pure.
REFERENCES = Path(__file__).with_name("miniwob_references.json")
BENCHMARK = "miniwob"
TRAIN_SEEDS = range(0, 20)
TEST_SEEDS = range(1000, 1010)
VALIDATION_SEEDS = range(2000, 2010)
ROLLOUT_SEEDS = range(100, 120)

# Supported environments and their difficulty (WebGym's easy band: 1 a single click,
# 2 two actions or a choice among options, 3 several fields or reading the page).
SUPPORTED: dict[str, int] = {
    "click-test": 1, "click-test-2": 1, "click-button": 1, "click-dialog": 1,
    "focus-text": 1, "click-tab": 1,
    "click-button-sequence": 2, "click-dialog-2": 2, "focus-text-2": 2, "enter-text": 2,
    "enter-text-2": 2, "click-option": 2, "click-checkboxes": 2, "click-collapsible": 2,
    "click-widget": 2,
    "enter-password": 3, "login-user": 3, "click-tab-2": 3, "multi-layouts": 3,
    "read-table": 3, "find-word": 3, "simple-arithmetic": 3, "copy-paste": 3,
    "search-engine": 3, "navigate-tree": 3, "odd-or-even": 3, "use-spinner": 3,
}
# One solution for every seed (every verified reference of the 30 seeds once built is the
# same; a unit test keeps this list equal to what miniwob_references.json shows): train only.
ONE_SOLUTION = frozenset({"click-test", "click-test-2", "click-dialog", "focus-text",
                          "click-button-sequence"})
# Held out whole: close relatives of supported environments, never trained on.
OOD: dict[str, int] = {
    "enter-text-dynamic": 2, "click-collapsible-2": 3, "click-checkboxes-large": 3,
    "login-user-popup": 3, "multi-orderings": 3,
}
_DRAG = "drag and drop: the grammar has no drag action"
_POINT = ("a click at a computed point of an SVG or canvas drawing: set-of-marks has no "
          "element to number")
_UNMARKED = ("its targets are unnamed drawings or <span>s without a role: the accessibility "
             "snapshot gives them no element, so set-of-marks cannot number them")
_REAL_TIME = "moving or timed targets that must be hit within a second; a policy step takes ~8 s"
UNSUPPORTED: dict[str, str] = {
    **{env: _DRAG for env in (
        "drag-box", "drag-circle", "drag-cube", "drag-items", "drag-items-grid",
        "drag-shapes", "drag-shapes-2", "drag-single-shape", "drag-sort-numbers")},
    "draw-circle": "free-form drawing on a canvas",
    "draw-line": "free-form drawing on a canvas",
    "highlight-text": "selecting text by dragging over it",
    "highlight-text-2": "selecting text by dragging over it",
    "resize-textarea": "dragging a resize handle",
    "use-slider": "dragging a slider handle",
    "use-slider-2": "dragging slider handles",
    "form-sequence": "one of its steps drags a slider handle",
    "use-colorwheel": "picking a point on a canvas colour wheel",
    "use-colorwheel-2": "picking a point on a canvas colour wheel",
    **{env: _POINT for env in ("bisect-angle", "circle-center", "right-angle",
                               "find-midpoint", "grid-coordinate", "hot-cold")},
    **{env: _UNMARKED for env in ("click-link", "click-color", "click-shades", "click-shape",
                                  "hover-shape", "social-media", "social-media-all",
                                  "social-media-some")},
    **{env: _REAL_TIME for env in ("chase-circle", "moving-items", "simon-says")},
    "click-scroll-list": "selecting several options of a multi-select list (Ctrl+click)",
    "choose-list": "choosing an <option> of a native <select>: no action does",
}


def task(env: str, seed: int, difficulty: int, split: str, pool: str | None = None
         ) -> dict[str, Any]:
    """One JSONL record. task_name names the seed: WebGym deduplicates lines by
    (subdomain, website, difficulty, task_name), and the seeds share the rest."""
    return {**({"pool": pool} if pool else {}),
        "task_id": f"miniwob-{env}-{seed}",
        "task_name": f"MiniWoB++ {env}, seed {seed} (the page states the task)",
        "domain": "miniwob",
        "subdomain": env,
        "website": "{sandbox}" + page_path(env),
        "difficulty": difficulty,
        "evaluator_reference": [],
        "attempt_level": 0,
        "max_steps": 5 if difficulty == 1 else 8 if difficulty == 2 else 10,
        "benchmark_name": BENCHMARK,
        "split": split,
        "environment": {"kind": "miniwob", "name": env, "seed": seed},
    }


def load_references(path: Path = REFERENCES) -> dict[str, list[dict[str, Any]]]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def with_references(tasks: list[dict[str, Any]], references: dict[str, list[dict[str, Any]]]
                    ) -> list[dict[str, Any]]:
    """The tasks, each with its verified reference sequence if it has one."""
    return [{**t, "reference_actions": references[t["task_id"]]}
            if references.get(t["task_id"]) else t for t in tasks]


def all_tasks(references: dict[str, list[dict[str, Any]]] | None = None
              ) -> list[dict[str, Any]]:
    overlap = (set(SUPPORTED) | set(OOD)) & set(UNSUPPORTED)
    assert not overlap and not set(SUPPORTED) & set(OOD), overlap
    assert ONE_SOLUTION <= set(SUPPORTED), ONE_SOLUTION - set(SUPPORTED)
    held_out = {env: d for env, d in SUPPORTED.items() if env not in ONE_SOLUTION}
    tasks = [task(env, seed, d, "train") for env, d in SUPPORTED.items() for seed in TRAIN_SEEDS]
    tasks += [task(env, seed, d, "train", ROLLOUT_POOL) for env, d in held_out.items()
              for seed in ROLLOUT_SEEDS]
    tasks += [task(env, seed, d, "validation") for env, d in held_out.items()
              for seed in VALIDATION_SEEDS]
    tasks += [task(env, seed, d, "test") for env, d in held_out.items() for seed in TEST_SEEDS]
    tasks += [task(env, seed, d, "ood") for env, d in OOD.items() for seed in TEST_SEEDS]
    return with_references(tasks, load_references() if references is None else references)


def main(path: Path = OUTPUT) -> int:
    tasks = all_tasks()
    with path.open("w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(json.dumps(t, ensure_ascii=False) + "\n")
    print(f"wrote {len(tasks)} tasks to {path}")
    return len(tasks)


if __name__ == "__main__":
    main()
