"""Grouped LoRA operators for vLLM's CPU backend (a vLLM general plugin).

vLLM's CPU LoRA path (`vllm.lora.ops.torch_ops`) gathers each token's adapter matrix
(`weights[indices]`, one [out, in] copy per token) and contracts it with an einsum. For a
prefill of 1,500 tokens through a 1,536 x 16 projection that copies ~74 MB per operator,
for each of the ~210 adapted layers of every forward pass: on 2 cores a trained version
answered 6x slower than the base model on ~570-token prompts (bench/lora_serving.py).
Tokens of a batch use one or two adapters, so these operators group the tokens by adapter
and apply each adapter with one matmul: the same numbers (the same rows through the same
matrices, negative indices picking the last slot as the originals do) at the cost of a
dense matmul.

vLLM calls `register()` in every process it starts (API server, engine core, workers);
it is idempotent.
"""

from __future__ import annotations

import torch

PATCHED = "_webgym_grouped"


def _apply_grouped(inputs: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor,
                   dtype: torch.dtype) -> torch.Tensor:
    """inputs [T, in] through weights[indices[t]] ([slots, (1,) out, in]) -> [T, out]."""
    if weights.dim() == 4:
        weights = weights.squeeze(1)
    inputs = inputs.to(dtype=dtype)
    if indices.numel() == 1 and inputs.shape[0] != 1:
        # One index for a whole batch: the originals broadcast it the same way.
        indices = indices.expand(inputs.shape[0])
    out = torch.empty(inputs.shape[0], weights.shape[1], dtype=dtype, device=inputs.device)
    slots = torch.unique(indices)
    if slots.numel() == 1:
        return torch.matmul(inputs, weights[int(slots)].to(dtype=dtype).t(), out=out)
    for slot in slots.tolist():
        rows = (indices == slot).nonzero().squeeze(1)
        out[rows] = inputs[rows] @ weights[slot].to(dtype=dtype).t()
    return out


def bgmv_expand(inputs: torch.Tensor, lora_b_weights: torch.Tensor,
                output_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                add_inputs: bool = True) -> None:
    outputs = _apply_grouped(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    limit = output_tensor.shape[0]
    if outputs.shape[0] == 1 and output_tensor.shape[0] != 1:
        limit = 1
    common = min(outputs.shape[1], output_tensor.shape[1])
    if add_inputs:
        output_tensor[:, :common] += outputs[:limit, :common]
    else:
        output_tensor[:, :common] = outputs[:limit, :common]


def bgmv_shrink(inputs: torch.Tensor, lora_b_weights: torch.Tensor,
                output_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                scaling: float = 1.0) -> None:
    outputs = _apply_grouped(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs


def bgmv_expand_slice(inputs: torch.Tensor, lora_b_weights: torch.Tensor,
                      output_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                      slice_offset: int, slice_size: int, add_inputs: bool = True) -> None:
    outputs = _apply_grouped(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset: slice_offset + slice_size] += outputs
    else:
        output_tensor[:, slice_offset: slice_offset + slice_size] = outputs


def sgmv_expand(inputs: torch.Tensor, lora_b_weights: torch.Tensor,
                output_tensor: torch.Tensor, b_seq_start_loc: torch.Tensor,
                seq_len_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                batches: int, max_seq_length: int, token_nums: int,
                add_inputs: bool = False) -> None:
    per_token = torch.repeat_interleave(lora_indices_tensor, seq_len_tensor)
    bgmv_expand(inputs, lora_b_weights, output_tensor, per_token, add_inputs)


def sgmv_shrink(inputs: torch.Tensor, lora_a_weights: torch.Tensor,
                output_tensor: torch.Tensor, b_seq_start_loc: torch.Tensor,
                seq_len_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                batches: int, max_seq_length: int, token_nums: int,
                scaling: float) -> None:
    per_token = torch.repeat_interleave(lora_indices_tensor, seq_len_tensor)
    bgmv_shrink(inputs, lora_a_weights, output_tensor, per_token, scaling)


def sgmv_expand_slice(inputs: torch.Tensor, lora_b_weights: torch.Tensor,
                      output_tensor: torch.Tensor, b_seq_start_loc: torch.Tensor,
                      seq_len_tensor: torch.Tensor, lora_indices_tensor: torch.Tensor,
                      batches: int, max_seq_length: int, token_nums: int,
                      slice_offset: int, slice_size: int, add_inputs: bool = False) -> None:
    per_token = torch.repeat_interleave(lora_indices_tensor, seq_len_tensor)
    bgmv_expand_slice(inputs, lora_b_weights, output_tensor, per_token, slice_offset,
                      slice_size, add_inputs)


OPERATORS = {f.__name__: f for f in (bgmv_expand, bgmv_shrink, bgmv_expand_slice,
                                      sgmv_expand, sgmv_shrink, sgmv_expand_slice)}


def register() -> None:
    """Replace the operators where vLLM's CPU punica wrapper looks them up."""
    from vllm.logger import init_logger
    from vllm.lora.ops import torch_ops
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    patched = []
    for module in (lora_ops, torch_ops, punica_cpu):
        if getattr(module, PATCHED, False):
            continue
        for name, op in OPERATORS.items():
            if hasattr(module, name):
                setattr(module, name, op)
        setattr(module, PATCHED, True)
        patched.append(module.__name__)
    if patched:
        # Under "vllm.": vLLM's logging configuration handles that tree only.
        init_logger(f"vllm.{__name__}").info("webgym_cpu_lora: grouped LoRA operators in %s",
                                             ", ".join(patched))
