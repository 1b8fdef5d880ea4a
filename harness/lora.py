"""A real LoRA adapter (PEFT's format) for the local base model, made without a trainer.

It writes adapter_config.json and adapter_model.safetensors with seeded random
lora_A/lora_B matrices on q_proj and v_proj of every layer (or on every linear layer, as
the trainer's `lora_target: all` adapts them), shaped from the model's config.json, so
vLLM loads it as it would a LLaMA-Factory adapter and greedy replies differ from the base
model's. safetensors is written by hand (an 8-byte header length, a JSON header, the
little-endian data): no torch in the main venv.
"""

from __future__ import annotations

import array
import io
import json
import random
import struct
import sys
from pathlib import Path

from minio import Minio

from consumers.checkpoints import sha256_hex

RANK = 8


QV = ("q_proj", "v_proj")
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def linear_shapes(config: dict) -> dict[str, tuple[str, int, int]]:
    """Module -> (its block, in features, out features) in a Llama-type decoder layer."""
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    kv, mlp = config["num_key_value_heads"] * head_dim, config["intermediate_size"]
    return {"q_proj": ("self_attn", hidden, heads * head_dim), "k_proj": ("self_attn", hidden, kv),
            "v_proj": ("self_attn", hidden, kv), "o_proj": ("self_attn", heads * head_dim, hidden),
            "gate_proj": ("mlp", hidden, mlp), "up_proj": ("mlp", hidden, mlp),
            "down_proj": ("mlp", mlp, hidden)}


def adapter_tensors(config: dict, seed: int, rank: int = RANK, scale: float = 0.08,
                    modules: tuple[str, ...] = QV) -> dict[str, tuple[list[int], array.array]]:
    """Name -> (shape, float32 values), as PEFT names them for a Llama-type model."""
    shapes = linear_shapes(config)
    rng = random.Random(seed)
    tensors = {}
    for layer in range(config["num_hidden_layers"]):
        for module in modules:
            block, in_dim, out_dim = shapes[module]
            name = f"base_model.model.model.layers.{layer}.{block}.{module}"
            for part, shape in (("lora_A", [rank, in_dim]), ("lora_B", [out_dim, rank])):
                values = array.array("f", (rng.gauss(0.0, scale)
                                           for _ in range(shape[0] * shape[1])))
                tensors[f"{name}.{part}.weight"] = (shape, values)
    return tensors


def safetensors_bytes(tensors: dict[str, tuple[list[int], array.array]]) -> bytes:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    data = io.BytesIO()
    for name, (shape, values) in sorted(tensors.items()):
        if sys.byteorder != "little":
            values = array.array("f", values)
            values.byteswap()
        start = data.tell()
        data.write(values.tobytes())
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [start, data.tell()]}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    return struct.pack("<Q", len(raw)) + raw + data.getvalue()


def adapter_files(model_dir: Path, seed: int, rank: int = RANK,
                  modules: tuple[str, ...] = QV) -> dict[str, bytes]:
    """adapter_config.json and adapter_model.safetensors for the model in `model_dir`."""
    config = json.loads((model_dir / "config.json").read_text())
    adapter_config = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank,
        "lora_dropout": 0.0, "target_modules": list(modules), "bias": "none",
        "base_model_name_or_path": str(model_dir), "fan_in_fan_out": False,
        "inference_mode": True, "modules_to_save": None, "use_rslora": False,
        "use_dora": False,
    }
    return {"adapter_config.json": json.dumps(adapter_config, indent=2).encode(),
            "adapter_model.safetensors": safetensors_bytes(
                adapter_tensors(config, seed, rank, modules=modules))}


def digests(files: dict[str, bytes]) -> dict[str, str]:
    """ModelVersion.file_sha256 of these files (the model loader loads nothing else)."""
    return {name: sha256_hex(data) for name, data in files.items()}


def upload(client: Minio, bucket: str, prefix: str, files: dict[str, bytes]) -> str:
    """Put the files under s3://bucket/prefix/ (blocking: call it in a thread); the URI."""
    for name, data in files.items():
        client.put_object(bucket, f"{prefix}/{name}", io.BytesIO(data), len(data))
    return f"s3://{bucket}/{prefix}"
