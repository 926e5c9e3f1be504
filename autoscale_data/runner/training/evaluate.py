"""Per-domain validation loss on the held-out sequences of every domain."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ...solver.vocabulary import MEAN_PPL
from ..models import mask_tokens, token_cross_entropy
from .dist import DistInfo, all_reduce_sum

__all__ = ["EVAL_MASK_SEED", "evaluate", "mean_objective", "token_losses"]

#: Fixed seed of the evaluation masks of masked-LM models, so every evaluation sees the same masks.
EVAL_MASK_SEED = 20_240_611


def token_losses(forward: Callable[..., Any], input_ids: torch.Tensor, *, family: str,
                 mask: dict[str, Any] | None = None, generator: torch.Generator | None = None,
                 vocab_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence summed token loss and predicted-token count.

    Args:
        forward: the model (or DeepSpeed engine) called as ``forward(input_ids=...)``.
        input_ids: ``[batch, seq]`` int64 ids on the model's device.
        family: ``"gpt2"`` (next-token loss) or ``"bert"`` (masked-token loss).
        mask: for BERT, ``mask_tokens`` keyword arguments (``vocab_size``, ``mask_id``, ``probability``).
        generator: random source for BERT masks.
        vocab_size: the real vocabulary of a model whose vocabulary is padded (the rest of the logits is
            left out).
    """
    if family == "bert":
        if mask is None:
            raise ValueError("masked-LM evaluation needs the mask settings")
        inputs, labels = mask_tokens(input_ids, generator=generator, **mask)
    else:
        inputs, labels = input_ids, input_ids
    loss, valid = token_cross_entropy(forward(input_ids=inputs).logits, labels, family, vocab_size=vocab_size)
    return (loss * valid).sum(dim=1), valid.sum(dim=1)


@torch.no_grad()
def evaluate(forward: Callable[..., Any], loader: Any, domain_names: Sequence[str], info: DistInfo, *,
             family: str, mask: dict[str, Any] | None = None, passes: int = 1,
             vocab_size: int | None = None) -> dict[str, float]:
    """Mean token loss per domain over every held-out sequence (summed over ranks).

    Args:
        forward: the model or engine, already in eval mode.
        loader: iterable of batches ``{"input_ids", "domain"}`` (this rank's slice).
        domain_names: domain order of the ``domain`` ids.
        info: the process group (losses and counts are summed over ranks).
        family: ``"gpt2"`` or ``"bert"``.
        mask: masked-LM settings (see :func:`token_losses`).
        passes: for a masked LM, read the held-out set this many times, each under new (seeded) masks, so
            about ``passes x probability`` of its tokens are scored; ignored for a causal LM (one pass
            already scores every token).
        vocab_size: the real vocabulary of a padded model (see :func:`token_losses`).
    """
    m = len(domain_names)
    sums = torch.zeros(m, dtype=torch.float64)
    counts = torch.zeros(m, dtype=torch.float64)
    generator = None
    if family == "bert":
        generator = torch.Generator(device=info.device).manual_seed(EVAL_MASK_SEED + info.rank)
    for _ in range(passes if family == "bert" else 1):
        for batch in loader:
            ids = batch["input_ids"].to(info.device, non_blocking=True).long()
            loss, n = token_losses(forward, ids, family=family, mask=mask, generator=generator,
                                   vocab_size=vocab_size)
            dom = torch.as_tensor(batch["domain"]).long()
            sums.index_add_(0, dom, loss.double().cpu())
            counts.index_add_(0, dom, n.double().cpu())
    both = torch.cat([sums, counts]).to(info.device if info.device.type == "cuda" else "cpu")
    both = all_reduce_sum(both, info).cpu()
    sums, counts = both[:m], both[m:]
    return {d: (float(sums[i] / counts[i]) if counts[i] > 0 else math.nan) for i, d in enumerate(domain_names)}


def mean_objective(losses: Mapping[str, float], objective: str) -> float:
    """The scalar the fit and the report use: mean loss, or mean per-domain perplexity."""
    values = [float(v) for v in losses.values()]
    if objective == MEAN_PPL:
        return sum(math.exp(min(v, 700.0)) for v in values) / len(values)
    return sum(values) / len(values)
