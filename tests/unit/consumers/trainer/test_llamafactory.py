"""The LLaMA-Factory run folder (consumers/trainer/llamafactory.py): rows, dataset_info, YAML."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from consumers.trainer.llamafactory import (
    EmptyRunError,
    dpo_pairs,
    mixed_bf16,
    rows,
    run_id,
    total_steps,
    write_run,
)
from webgym_common.choices import TrainMode, TrainPrecision
from webgym_common.config import TrainerSettings
from webgym_common.events import ChatMessage, ReplaySample
from webgym_common.machine import cpu_flags, native_bf16

BASE = "/models/smollm2"


def sample(sid: str, task: str = "t1", step: int = 0, success: bool = True,
           response: str = "click(3)", images: list[str] | None = None) -> ReplaySample:
    return ReplaySample(
        sample_id=sid, episode_id=sid.split(":")[0], task_id=task, step=step,
        messages=[ChatMessage(role="system", content="You act on web pages."),
                  ChatMessage(role="user", content=f"Task {task} step {step}",
                              images=images or [])],
        response=response, reward=1.0 if success else 0.0, iteration=0,
        policy_version="base", success=success)


def cfg(mode: TrainMode = TrainMode.LORA_SFT, **kw: object) -> TrainerSettings:
    return TrainerSettings(mode=mode, **kw)


def read(files_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(files_dir.iterdir()) if p.is_file()}


def test_run_id_is_sha256_of_sorted_ids_parent_and_mode() -> None:
    expected = hashlib.sha256(b"a:0\nb:1\nparent=3\nmode=lora_sft").hexdigest()[:16]
    assert run_id(["b:1", "a:0"], 3, TrainMode.LORA_SFT) == expected
    assert run_id(["a:0", "b:1", "a:0"], 3, TrainMode.LORA_SFT) == expected
    assert run_id(["a:0", "b:1"], 4, TrainMode.LORA_SFT) != expected
    assert run_id(["a:0", "b:1"], 3, TrainMode.KTO) != expected


def test_rewriting_the_same_run_gives_byte_identical_files_whatever_the_order(
    tmp_path: Path,
) -> None:
    samples = [sample("e1:0"), sample("e2:1", step=1), sample("e3:0", task="t2")]
    first = write_run(tmp_path / "run", samples, cfg(), BASE)
    before = read(first.run_dir)
    again = write_run(tmp_path / "run", [samples[2], samples[0], samples[1], samples[0]],
                      cfg(), BASE)
    assert again == first
    assert read(again.run_dir) == before
    assert set(before) == {"data.json", "dataset_info.json", "train.yaml"}
    assert first.samples == 3


def test_sft_rows_end_with_the_response_and_train_on_the_last_turn_only(tmp_path: Path) -> None:
    files = write_run(tmp_path, [sample("e1:0", response="type(2, 'x')")], cfg(), BASE)
    data = json.loads(files.dataset_file.read_text())
    assert data == [{"messages": [
        {"role": "system", "content": "You act on web pages."},
        {"role": "user", "content": "Task t1 step 0"},
        {"role": "assistant", "content": "type(2, 'x')"},
    ]}]
    info = json.loads((files.run_dir / "dataset_info.json").read_text())
    assert info == {"webgym": {
        "file_name": "data.json", "formatting": "sharegpt",
        "columns": {"messages": "messages"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                 "assistant_tag": "assistant", "system_tag": "system"},
    }}
    conf = yaml.safe_load(files.config.read_text())
    assert conf["mask_history"] is True
    assert conf["dataset"] == "webgym" and conf["dataset_dir"] == str(files.run_dir)


def test_kto_rows_carry_the_episode_outcome_as_kto_tag(tmp_path: Path) -> None:
    files = write_run(tmp_path, [sample("e1:0"), sample("e2:0", success=False)],
                      cfg(TrainMode.KTO), BASE)
    data = json.loads(files.dataset_file.read_text())
    assert [r["kto_tag"] for r in data] == [True, False]
    info = json.loads((files.run_dir / "dataset_info.json").read_text())["webgym"]
    assert info["columns"] == {"messages": "messages", "kto_tag": "kto_tag"}
    conf = yaml.safe_load(files.config.read_text())
    assert conf["stage"] == "kto" and "mask_history" not in conf


def test_dpo_pairs_a_success_with_a_failure_of_the_same_task_and_step() -> None:
    s = [sample("a:0"), sample("b:0", success=False), sample("c:0", success=False),
         sample("d:1", step=1), sample("e:0", task="t2", success=False)]
    pairs = dpo_pairs(s)
    # (t1, 0): a with b (c has no partner); (t1, 1): only a success; (t2, 0): only a failure.
    assert [(w.sample_id, loss.sample_id) for w, loss in pairs] == [("a:0", "b:0")]


def test_dpo_rows_end_with_the_prompt_and_have_chosen_and_rejected(tmp_path: Path) -> None:
    s = [sample("a:0", response="click(1)"), sample("b:0", success=False, response="scroll")]
    files = write_run(tmp_path, s, cfg(TrainMode.DPO), BASE)
    (row,) = json.loads(files.dataset_file.read_text())
    assert row["messages"][-1]["role"] == "user"
    assert row["chosen"] == {"role": "assistant", "content": "click(1)"}
    assert row["rejected"] == {"role": "assistant", "content": "scroll"}
    info = json.loads((files.run_dir / "dataset_info.json").read_text())["webgym"]
    assert info["ranking"] is True
    assert info["columns"] == {"messages": "messages", "chosen": "chosen",
                               "rejected": "rejected"}


def test_a_draw_without_any_dpo_pair_is_an_empty_run(tmp_path: Path) -> None:
    with pytest.raises(EmptyRunError):
        write_run(tmp_path, [sample("a:0"), sample("b:1", step=1, success=False)],
                  cfg(TrainMode.DPO), BASE)
    with pytest.raises(EmptyRunError):
        write_run(tmp_path, [], cfg(), BASE)


def test_a_sample_still_by_reference_is_refused_never_a_reply_without_its_prompt(
        tmp_path: Path) -> None:
    unresolved = sample("b:0").model_copy(update={
        "messages": [], "prompt_uri": "s3://webgym/sha256/aa/aaaa.json"})
    with pytest.raises(ValueError, match="b:0"):
        write_run(tmp_path / "run", [sample("a:0"), unresolved], cfg(), BASE)
    assert not (tmp_path / "run").exists()


def test_images_stay_references_with_one_placeholder_each(tmp_path: Path) -> None:
    shot = "s3://webgym/screens/e1/0.png"
    s = [sample("e1:0", images=[shot]), sample("e2:0")]
    files = write_run(tmp_path, s, cfg(), BASE,
                      resolve_image=lambda ref: "images/" + ref.rsplit("/", 2)[-2] + ".png")
    data = json.loads(files.dataset_file.read_text())
    assert data[0]["messages"][1]["content"] == "Task t1 step 0<image>"
    assert data[0]["images"] == ["images/e1.png"]
    assert data[1]["images"] == [] and "<image>" not in data[1]["messages"][1]["content"]
    info = json.loads((files.run_dir / "dataset_info.json").read_text())["webgym"]
    assert info["columns"]["images"] == "images"
    # Without a resolver the reference itself is written.
    assert rows([s[0]], TrainMode.LORA_SFT)[0]["images"] == [shot]


@pytest.mark.parametrize(("mode", "stage", "finetuning"), [
    (TrainMode.LORA_SFT, "sft", "lora"), (TrainMode.FULL_SFT, "sft", "full"),
    (TrainMode.KTO, "kto", "lora"), (TrainMode.DPO, "dpo", "lora"),
])
def test_the_yaml_per_mode(tmp_path: Path, mode: TrainMode, stage: str, finetuning: str) -> None:
    s = [sample("a:0"), sample("b:0", success=False)]
    files = write_run(tmp_path, s, cfg(mode, max_steps=3, threads=1), BASE)
    conf = yaml.safe_load(files.config.read_text())
    assert conf["stage"] == stage and conf["finetuning_type"] == finetuning
    assert conf["model_name_or_path"] == BASE
    assert conf["output_dir"] == str(tmp_path / "output") == str(files.output_dir)
    assert conf["use_cpu"] is True and conf["fp16"] is False
    assert conf["bf16"] is native_bf16(cpu_flags())  # precision auto
    assert conf["report_to"] == "none" and conf["overwrite_output_dir"] is False
    assert conf["preprocessing_num_workers"] == 1 and conf["dataloader_num_workers"] == 0
    assert conf["logging_steps"] == 1 and conf["max_steps"] == 3
    assert conf["template"] == "smollm2" and conf["cutoff_len"] == 1024
    assert conf["per_device_train_batch_size"] == 2 and conf["gradient_accumulation_steps"] == 1
    assert conf["learning_rate"] == 5e-4 and conf["num_train_epochs"] == 2.0
    assert ("lora_rank" in conf) is (finetuning == "lora")
    assert ("mask_history" in conf) is (stage == "sft")


def test_no_max_steps_when_epochs_decide(tmp_path: Path) -> None:
    conf = yaml.safe_load(write_run(tmp_path, [sample("a:0")], cfg(), BASE).config.read_text())
    assert "max_steps" not in conf


def test_a_parent_continues_the_lora_or_replaces_the_full_model(tmp_path: Path) -> None:
    parent = Path("/runs/v1/output")
    lora = yaml.safe_load(write_run(tmp_path / "l", [sample("a:0")], cfg(), BASE,
                                    parent_adapter=parent).config.read_text())
    assert lora["adapter_name_or_path"] == str(parent) and lora["model_name_or_path"] == BASE
    full = yaml.safe_load(write_run(tmp_path / "f", [sample("a:0")], cfg(TrainMode.FULL_SFT),
                                    BASE, parent_adapter=parent).config.read_text())
    assert full["model_name_or_path"] == str(parent) and "adapter_name_or_path" not in full


def test_a_hub_base_model_is_trained_at_its_pinned_revision(tmp_path: Path) -> None:
    pinned = TrainerSettings(base_model_revision="6628" * 10)
    conf = yaml.safe_load(write_run(tmp_path / "p", [sample("a:0")], pinned,
                                    "Qwen/Qwen2.5-VL-3B-Instruct").config.read_text())
    assert conf["model_revision"] == "6628" * 10
    unpinned = yaml.safe_load(write_run(tmp_path / "u", [sample("a:0")], cfg(), BASE)
                              .config.read_text())
    assert "model_revision" not in unpinned
    full = pinned.model_copy(update={"mode": TrainMode.FULL_SFT})
    from_parent = yaml.safe_load(write_run(tmp_path / "f", [sample("a:0")], full, BASE,
                                           parent_adapter=Path("/runs/v1/output"))
                                 .config.read_text())
    assert "model_revision" not in from_parent  # the parent's own files, not the hub's


def test_total_steps_and_checkpoint_spacing(tmp_path: Path) -> None:
    # 5 rows, batch 2 -> 3 batches per epoch; accumulation 1; 2 epochs -> 6 steps.
    assert total_steps(5, cfg()) == 6
    # accumulation 2 -> 3 // 2 = 1 step per epoch; 2.5 epochs -> ceil(2.5) = 3.
    assert total_steps(5, cfg(gradient_accumulation=2, epochs=2.5)) == 3
    assert total_steps(5, cfg(max_steps=4)) == 4
    s = [sample(f"e{i}:0") for i in range(5)]
    conf = yaml.safe_load(write_run(tmp_path, s, cfg(), BASE).config.read_text())
    assert conf["save_steps"] == 2  # ceil(6 / 4)


@pytest.mark.parametrize(("precision", "use_cpu", "flags", "bf16"), [
    (TrainPrecision.AUTO, True, {"avx2", "fma"}, False),  # emulated bf16: float32
    (TrainPrecision.AUTO, True, {"avx512f", "avx512_bf16"}, True),
    (TrainPrecision.AUTO, True, {"amx_bf16"}, True),
    (TrainPrecision.AUTO, False, set(), True),  # a GPU
    (TrainPrecision.FLOAT32, False, set(), False),  # an explicit choice wins
    (TrainPrecision.BF16, True, {"avx2"}, True),
])
def test_bf16_where_it_is_native_unless_chosen(precision: TrainPrecision, use_cpu: bool,
                                               flags: set[str], bf16: bool) -> None:
    cfg = TrainerSettings(precision=precision, use_cpu=use_cpu)
    assert mixed_bf16(cfg, flags) is bf16


def test_a_runs_seed_is_the_settings_so_a_curves_second_seed_trains_differently(
        tmp_path: Path) -> None:
    confs = [yaml.safe_load(write_run(tmp_path / str(seed), [sample("e1:0")],
                                      cfg(seed=seed), BASE).config.read_text())
             for seed in (42, 7)]
    assert [c["seed"] for c in confs] == [42, 7]
