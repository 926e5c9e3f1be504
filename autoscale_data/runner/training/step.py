"""The training step's execution settings (``train:`` of the config): compile, TF32, micro-batch.

None of these change what a run trains (its id): they change how fast one step runs. On the CPU,
``train.micro_batch: auto`` keeps the configured micro-batch (memory rarely limits a CPU run, and a larger
micro-batch does not make a CPU step faster).
"""

from __future__ import annotations

from typing import Any

import torch

from ..models import token_cross_entropy

__all__ = ["ADAMW_STATES", "choose_micro_batch", "measure_micro_batch", "prepare_device"]

#: Float32 tensors AdamW keeps per parameter (first and second moments).
ADAMW_STATES = 2


def choose_micro_batch(per_process: int, configured: int, *, fixed_bytes: float, per_sequence_bytes: float,
                       budget_bytes: float) -> int:
    """The largest divisor ``m`` of ``per_process`` with ``fixed_bytes + m * per_sequence_bytes <=
    budget_bytes``.

    Args:
        per_process: sequences each process trains per optimizer step (global batch / processes).
        configured: the configured micro-batch (its measurement gave ``per_sequence_bytes``).
        fixed_bytes: memory that does not grow with the micro-batch (weights, gradients, optimizer states).
        per_sequence_bytes: memory one more sequence of the micro-batch takes (activations, logits).
        budget_bytes: the memory the run may use.

    Returns:
        That divisor; 1 when even one sequence does not fit by the estimate (the run will tell).

    Raises:
        ValueError: ``configured`` does not divide ``per_process``, or a size is negative.
    """
    if per_process < 1 or configured < 1 or per_process % configured:
        raise ValueError(f"micro-batch {configured} is invalid: expected a divisor of the per-process batch "
                         f"{per_process}")
    if min(fixed_bytes, per_sequence_bytes, budget_bytes) < 0:
        raise ValueError(f"memory sizes must be >= 0, got fixed {fixed_bytes}, per sequence "
                         f"{per_sequence_bytes}, budget {budget_bytes}")
    fits = [m for m in range(1, per_process + 1)
            if per_process % m == 0 and fixed_bytes + m * per_sequence_bytes <= budget_bytes]
    return max(fits, default=1)


def measure_micro_batch(model: torch.nn.Module, *, per_process: int, configured: int, seq_len: int,
                        vocab: int,
                        family: str, bf16: bool, fraction: float, device: torch.device) -> int:
    """The micro-batch of ``train.micro_batch: auto``: on CUDA from one dry step at ``configured``
    (see :func:`choose_micro_batch`; ``fraction`` of the GPU's memory is the budget), elsewhere
    ``configured``. The dry step's gradients are dropped and the RNG restored."""
    if device.type != "cuda":
        return configured
    params = list(model.parameters())
    weights = sum(p.numel() * p.element_size() for p in params)
    states = ADAMW_STATES * sum(p.numel() * 4 for p in params if p.requires_grad)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    with torch.random.fork_rng(devices=[device]):
        ids = torch.randint(0, vocab, (configured, seq_len), device=device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=ids).logits
            losses, _ = token_cross_entropy(logits, ids, family, vocab_size=vocab)
        losses.mean().backward()
        del logits, losses
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    model.zero_grad(set_to_none=True)
    grads = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    per_sequence = max(0.0, (peak - before - grads) / configured)
    total = torch.cuda.get_device_properties(device).total_memory
    return choose_micro_batch(per_process, configured, fixed_bytes=weights + grads + states,
                              per_sequence_bytes=per_sequence, budget_bytes=fraction * total)


def prepare_device(train: Any, device: torch.device) -> None:
    """Process-wide settings of the training step on ``device``: TF32 matmuls on CUDA if ``train.tf32``."""
    if device.type == "cuda" and train.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
