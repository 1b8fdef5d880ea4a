"""Run in vLLM's venv by test_vllm_cpu_lora.py: load vLLM's general plugins as vLLM does,
then compare the operators the CPU punica wrapper now calls with vLLM's own on the same
inputs. Prints one JSON object."""

import json

import torch
from vllm.lora.ops.torch_ops import lora_ops

NAMES = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice",
         "sgmv_shrink", "sgmv_expand", "sgmv_expand_slice")
ORIGINAL = {name: getattr(lora_ops, name) for name in NAMES}

from vllm.lora.punica_wrapper import punica_cpu  # noqa: E402
from vllm.plugins import load_general_plugins  # noqa: E402

load_general_plugins()
SERVED = {name: getattr(punica_cpu, name) for name in NAMES}

torch.manual_seed(0)
SLOTS, IN, OUT, RANK = 3, 64, 96, 16
# Tokens of two sequences on adapters 0 and 2, a token without one (-1), and a batch of
# one sequence: the cases a batch mixes.
CASES = {
    "mixed": torch.tensor([0, 0, 1, 1, -1, 2, 0]),
    "one adapter": torch.zeros(5, dtype=torch.long),
    "one token": torch.tensor([1]),
}


def outputs(name, op, tokens, idx, dtype):
    x = torch.randn(tokens, IN, dtype=dtype, generator=torch.Generator().manual_seed(1))
    h = torch.randn(tokens, RANK, dtype=dtype, generator=torch.Generator().manual_seed(2))
    a = torch.randn(SLOTS, 1, RANK, IN, dtype=dtype, generator=torch.Generator().manual_seed(3))
    b = torch.randn(SLOTS, 1, OUT, RANK, dtype=dtype, generator=torch.Generator().manual_seed(4))
    seq = (torch.tensor([0, tokens]), torch.tensor([tokens]), idx[:1], 1, tokens, tokens)
    per_token = idx if idx.numel() == tokens else idx.expand(tokens)
    if name.endswith("shrink"):
        y = torch.ones(tokens, RANK, dtype=dtype)
        args = (x, a, y, *seq, 0.5) if name.startswith("sgmv") else (x, a, y, per_token, 0.5)
    elif name.endswith("slice"):
        y = torch.ones(tokens, OUT + 16, dtype=dtype)
        args = ((h, b, y, *seq, 8, OUT, True) if name.startswith("sgmv")
                else (h, b, y, per_token, 8, OUT, True))
    else:
        y = torch.ones(tokens, OUT, dtype=dtype)
        args = (h, b, y, *seq, True) if name.startswith("sgmv") else (h, b, y, per_token, True)
    op(*args)
    return y


diffs = {}
for name in NAMES:
    for case, idx in CASES.items():
        if name.startswith("sgmv") and case == "mixed":
            continue  # one sequence per call here: sgmv's per-sequence index is idx[:1]
        for dtype in (torch.float32, torch.bfloat16):
            want = outputs(name, ORIGINAL[name], len(idx), idx, dtype)
            got = outputs(name, SERVED[name], len(idx), idx, dtype)
            diffs[f"{name} {case} {dtype}"] = (want.float() - got.float()).abs().max().item()

print(json.dumps({
    "replaced": sorted(n for n in NAMES if SERVED[n] is not ORIGINAL[n]),
    "module": {n: SERVED[n].__module__ for n in NAMES},
    "max_abs_diff": diffs,
}))
