"""A LLaMA-Factory run folder from replay samples: ShareGPT data, dataset_info.json, one YAML.

Delivery: pure and idempotent. The same samples (in any order, duplicates ignored), settings,
base model and parent give byte-identical files, and the run id depends only on the sample
ids, the parent version and the mode; so a trainer killed mid-run rewrites the same folder
and LLaMA-Factory resumes from the checkpoint it left there (`overwrite_output_dir: false`).

Data shapes (LLaMA-Factory 0.9.5, sharegpt formatting with OpenAI role/content tags):
- SFT: each sample's messages, then its `response` as the last assistant turn. With
  `mask_history` only that last turn is trained on.
- KTO: the same rows plus a boolean `kto_tag` column from `sample.success`.
- DPO: a success and a failure of the same task at the same step make a pair (the success's
  prompt, its response chosen, the failure's rejected), paired in sample id order; samples
  without a partner are skipped, and a draw without any pair is an EmptyRunError.
- Images stay references (`images` column, one `<image>` placeholder per image, as LLaMA-Factory
  counts them); only a vision model's prompts carry images. `resolve_image` maps a reference
  (s3://...) to what LLaMA-Factory opens: a path (relative paths resolve in the run folder) or
  an http URL.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webgym_common.choices import TrainMode, TrainPrecision
from webgym_common.config import TrainerSettings
from webgym_common.events import ChatMessage, ReplaySample
from webgym_common.machine import cpu_flags, native_bf16

DATASET = "webgym"
DATA_FILE = "data.json"
CONFIG_FILE = "train.yaml"
OUTPUT_DIR = "output"
IMAGE_TOKEN = "<image>"  # LLaMA-Factory's placeholder, one per image
TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user",
        "assistant_tag": "assistant", "system_tag": "system"}
CHECKPOINTS_PER_RUN = 4  # a killed run loses at most a quarter of its steps


class EmptyRunError(ValueError):
    """Nothing to train on (no samples, or no success/failure pair for DPO)."""


@dataclass(frozen=True)
class RunFiles:
    run_dir: Path
    config: Path
    output_dir: Path
    dataset_file: Path
    samples: int  # rows written (pairs for DPO)


def run_id(sample_ids: Sequence[str], parent_version: int, mode: TrainMode) -> str:
    """16 hex digits naming a run: the same draw on the same parent in the same mode."""
    key = "\n".join([*sorted(set(sample_ids)), f"parent={parent_version}", f"mode={mode.value}"])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def unique_sorted(samples: Sequence[ReplaySample]) -> list[ReplaySample]:
    """One sample per id (the first seen), in sample id order: the files ignore draw order."""
    by_id: dict[str, ReplaySample] = {}
    for s in samples:
        by_id.setdefault(s.sample_id, s)
    return [by_id[k] for k in sorted(by_id)]


def has_images(samples: Sequence[ReplaySample]) -> bool:
    return any(m.images for s in samples for m in s.messages)


def chat(messages: Sequence[ChatMessage], with_images: bool) -> list[dict[str, str]]:
    def content(m: ChatMessage) -> str:
        if not with_images or not m.images or IMAGE_TOKEN in m.content:
            return m.content
        # The policy's prompt puts the image after the text.
        return m.content + IMAGE_TOKEN * len(m.images)

    return [{"role": m.role, "content": content(m)} for m in messages]


def images_of(sample: ReplaySample, resolve: Callable[[str], str]) -> list[str]:
    return [resolve(ref) for m in sample.messages for ref in m.images]


def dpo_pairs(samples: Sequence[ReplaySample]) -> list[tuple[ReplaySample, ReplaySample]]:
    """(success, failure) of the same task and step, the k-th success with the k-th failure in
    sample id order; the rest have no partner and are skipped."""
    groups: dict[tuple[str, int], tuple[list[ReplaySample], list[ReplaySample]]] = {}
    for s in unique_sorted(samples):
        wins, losses = groups.setdefault((s.task_id, s.step), ([], []))
        (wins if s.success else losses).append(s)
    pairs: list[tuple[ReplaySample, ReplaySample]] = []
    for key in sorted(groups):
        wins, losses = groups[key]
        pairs.extend(zip(wins, losses, strict=False))
    return pairs


def rows(samples: Sequence[ReplaySample], mode: TrainMode,
         resolve_image: Callable[[str], str] = str) -> list[dict[str, Any]]:
    """The dataset's rows for `mode` (see the module docstring)."""
    vision = has_images(samples)
    out: list[dict[str, Any]] = []
    if mode is TrainMode.DPO:
        for win, loss in dpo_pairs(samples):
            row: dict[str, Any] = {
                "messages": chat(win.messages, vision),
                "chosen": {"role": "assistant", "content": win.response},
                "rejected": {"role": "assistant", "content": loss.response},
            }
            if vision:
                row["images"] = images_of(win, resolve_image)
            out.append(row)
        return out
    for s in unique_sorted(samples):
        row = {"messages": [*chat(s.messages, vision),
                            {"role": "assistant", "content": s.response}]}
        if vision:
            row["images"] = images_of(s, resolve_image)
        if mode is TrainMode.KTO:
            row["kto_tag"] = s.success
        out.append(row)
    return out


def dataset_info(mode: TrainMode, vision: bool) -> dict[str, Any]:
    columns = {"messages": "messages"}
    if vision:
        columns["images"] = "images"
    if mode is TrainMode.KTO:
        columns["kto_tag"] = "kto_tag"
    entry: dict[str, Any] = {"file_name": DATA_FILE, "formatting": "sharegpt"}
    if mode is TrainMode.DPO:
        columns |= {"chosen": "chosen", "rejected": "rejected"}
        entry["ranking"] = True
    return {DATASET: {**entry, "columns": columns, "tags": TAGS}}


def total_steps(n_rows: int, cfg: TrainerSettings) -> int:
    """Optimizer steps of the run, as transformers' Trainer counts them."""
    if cfg.max_steps > 0:
        return cfg.max_steps
    per_epoch = max(1, math.ceil(n_rows / cfg.batch_size) // cfg.gradient_accumulation)
    return max(1, math.ceil(cfg.epochs * per_epoch))


def mixed_bf16(cfg: TrainerSettings, flags: frozenset[str] | set[str]) -> bool:
    """Whether the run computes in bf16 (its weights stay float32: base_model's view).

    `auto`: on a GPU, and on a CPU that has bf16 natively, where it took 0.67 of float32's
    time at the same losses; an AVX2-only CPU emulates bf16, many times slower."""
    if cfg.precision is not TrainPrecision.AUTO:
        return cfg.precision is TrainPrecision.BF16
    return not cfg.use_cpu or native_bf16(flags)


def train_config(run_dir: Path, n_rows: int, cfg: TrainerSettings, base_model: str,
                 parent_adapter: Path | None = None) -> dict[str, Any]:
    """The one YAML template, filled in (key order is the file's order)."""
    mode = cfg.mode
    full = mode.finetuning_type == "full"
    model = str(parent_adapter) if full and parent_adapter is not None else base_model
    conf: dict[str, Any] = {"model_name_or_path": model}
    if model == base_model and cfg.base_model_revision:
        conf["model_revision"] = cfg.base_model_revision
    conf |= {
        "stage": mode.stage,
        "do_train": True,
        "finetuning_type": mode.finetuning_type,
    }
    if not full:
        conf |= {"lora_rank": cfg.lora_rank, "lora_target": "all"}
        if parent_adapter is not None:
            # The LoRA continues from the previous version (LLaMA-Factory resumes the last
            # adapter as trainable unless create_new_adapter).
            conf["adapter_name_or_path"] = str(parent_adapter)
    if mode.stage in ("kto", "dpo"):
        conf["pref_beta"] = 0.1
    conf |= {
        "dataset": DATASET,
        "dataset_dir": str(run_dir),
        "template": cfg.template,
        "cutoff_len": cfg.cutoff_len,
        "preprocessing_num_workers": 1,
        "dataloader_num_workers": 0,
    }
    if mode.stage == "sft":  # LLaMA-Factory refuses mask_history in the other stages
        conf["mask_history"] = True
    conf |= {
        "output_dir": str(run_dir / OUTPUT_DIR),
        "logging_steps": 1,
        "save_steps": max(1, math.ceil(total_steps(n_rows, cfg) / CHECKPOINTS_PER_RUN)),
        "save_total_limit": 1,  # resuming needs the last checkpoint only
        "overwrite_output_dir": False,  # a rerun resumes from the last checkpoint
        "report_to": "none",
        "per_device_train_batch_size": cfg.batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation,
        "learning_rate": cfg.learning_rate,
        "num_train_epochs": cfg.epochs,
        "lr_scheduler_type": "cosine",
        "seed": cfg.seed,
        "use_cpu": cfg.use_cpu,
        "bf16": mixed_bf16(cfg, cpu_flags()),
        "fp16": False,
    }
    if cfg.max_steps > 0:
        conf["max_steps"] = cfg.max_steps
    return conf


def _write(path: Path, text: str) -> None:
    # Unchanged files keep their mtime: LLaMA-Factory's dataset cache stays valid on a rerun.
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_run(run_dir: Path, samples: Sequence[ReplaySample], cfg: TrainerSettings,
              base_model: str, parent_adapter: Path | None = None,
              resolve_image: Callable[[str], str] = str) -> RunFiles:
    """Write (or rewrite identically) the run folder; EmptyRunError when nothing to train.
    Every sample must carry its messages (one by reference is resolved first:
    webgym_common.replay_prompts.resolve), or a row would be a reply without its prompt."""
    if unresolved := sorted(s.sample_id for s in samples if not s.messages):
        raise ValueError(f"samples without their prompt (resolve them first): "
                         f"{', '.join(unresolved[:5])}")
    data = rows(samples, cfg.mode, resolve_image)
    if not data:
        raise EmptyRunError(f"no {cfg.mode.value} training rows in {len(samples)} samples")
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    files = RunFiles(run_dir=run_dir, config=run_dir / CONFIG_FILE,
                     output_dir=run_dir / OUTPUT_DIR, dataset_file=run_dir / DATA_FILE,
                     samples=len(data))
    dump = json.dumps  # ensure_ascii and fixed separators: the same bytes everywhere
    _write(files.dataset_file, dump(data, indent=1) + "\n")
    _write(run_dir / "dataset_info.json",
           dump(dataset_info(cfg.mode, has_images(samples)), indent=1) + "\n")
    conf = train_config(run_dir, len(data), cfg, base_model, parent_adapter)
    _write(files.config, yaml.safe_dump(conf, sort_keys=False))
    return files
