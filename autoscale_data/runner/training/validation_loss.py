"""Per-domain validation loss on the held-out sequences of every domain."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ...solver.vocabulary import MEAN_PPL
from ..models import mask_tokens, token_cross_entropy
from .dist import DistInfo, all_reduce_sum

__all__ = ["EVAL_MASK_SEED", "mean_objective", "validation_losses"]

#: Fixed seed of the evaluation masks of masked-LM models, so every evaluation sees the same masks.
EVAL_MASK_SEED = 20_240_611


@torch.no_grad()
def validation_losses(forward: Callable[..., Any], loader: Any, domain_names: Sequence[str], info: DistInfo,
                      *,
                      family: str, mask: dict[str, Any] | None = None, passes: int = 1,
                      vocab_size: int | None = None) -> dict[str, float]:
    """Mean token loss per domain over every held-out sequence (summed over ranks).

    Args:
        forward: the model or DeepSpeed engine, already in eval mode, called as ``forward(input_ids=...)``.
        loader: iterable of batches ``{"input_ids", "domain"}`` (this rank's slice; ``domain`` indexes
            ``domain_names``).
        family: ``"gpt2"`` (next-token loss) or ``"bert"`` (masked-token loss).
        mask: for BERT, ``mask_tokens`` keyword arguments (``vocab_size``, ``mask_id``, ``probability``).
        passes: for a masked LM, read the held-out set this many times, each under new (seeded) masks, so
            about ``passes x probability`` of its tokens are scored; ignored for a causal LM (one pass
            already scores every token).
        vocab_size: the real vocabulary of a model whose vocabulary is padded (the rest of the logits is
            left out).
    """
    m = len(domain_names)
    sums = torch.zeros(m, dtype=torch.float64)
    counts = torch.zeros(m, dtype=torch.float64)
    generator = None
    if family == "bert":
        if mask is None:
            raise ValueError("masked-LM evaluation needs the mask settings")
        generator = torch.Generator(device=info.device).manual_seed(EVAL_MASK_SEED + info.rank)
    for _ in range(passes if family == "bert" else 1):
        for batch in loader:
            ids = batch["input_ids"].to(info.device, non_blocking=True).long()
            inputs, labels = (mask_tokens(ids, generator=generator, **mask)  # type: ignore[arg-type]
                              if family == "bert"
                              else (ids, ids))
            loss, valid = token_cross_entropy(forward(input_ids=inputs).logits, labels, family,
                                              vocab_size=vocab_size)
            dom = torch.as_tensor(batch["domain"]).long()
            sums.index_add_(0, dom, (loss * valid).sum(dim=1).double().cpu())
            counts.index_add_(0, dom, valid.sum(dim=1).double().cpu())
    both = torch.cat([sums, counts]).to(info.device if info.device.type == "cuda" else "cpu")
    both = all_reduce_sum(both, info).cpu()
    sums, counts = both[:m], both[m:]
    return {d: (float(sums[i] / counts[i]) if counts[i] > 0 else math.nan)
            for i, d in enumerate(domain_names)}


def mean_objective(losses: Mapping[str, float], objective: str) -> float:
    """The scalar the fit and the report use: mean loss, or mean per-domain perplexity."""
    values = [float(v) for v in losses.values()]
    if objective == MEAN_PPL:
        return sum(math.exp(min(v, 700.0)) for v in values) / len(values)
    return sum(values) / len(values)
