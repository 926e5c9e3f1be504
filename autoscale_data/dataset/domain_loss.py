"""Per-domain training loss in the user's own loop: per-token losses + the batch's ``domain`` ids.

A mixture batch carries ``domain`` (one id per row, an index into the dataset's ``domain_names``).
:class:`DomainLossMeter` turns the per-token losses of each step into running, token-weighted
per-domain means (``sum of its tokens' losses / its token count`` since the last
:meth:`~DomainLossMeter.reset`) with two ``index_add_`` calls, no Python loop over rows or tokens
and no host synchronisation in :meth:`~DomainLossMeter.update`; on request it sums them over the
ranks of a ``torch.distributed`` group with ONE ``all_reduce`` of a ``[2, num_domains]`` tensor.
docs/dataset.md ("Per-domain training loss in your loop") shows it in a training loop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = ["DomainLossMeter", "domain_loss_sums"]


def _rows(token_losses: torch.Tensor, domain: torch.Tensor, mask: torch.Tensor | None,
          num_domains: int, check_ids: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids, row loss sums, row token counts)`` of a batch, float64 on the losses' device."""
    if token_losses.dim() == 0 or domain.dim() != 1 or token_losses.shape[0] != domain.shape[0]:
        raise ValueError(f"token_losses {tuple(token_losses.shape)} must have one row per entry of domain "
                         f"{tuple(domain.shape)} (a [B] tensor of ids)")
    if mask is not None and mask.shape != token_losses.shape:
        raise ValueError(f"mask {tuple(mask.shape)} must have the shape of token_losses "
                         f"{tuple(token_losses.shape)}")
    if domain.dtype.is_floating_point or domain.dtype == torch.bool:
        raise ValueError(f"domain must hold integer ids, got dtype {domain.dtype}")
    device = token_losses.device
    rows = token_losses.detach().reshape(domain.shape[0], -1).to(torch.float64)
    if check_ids and domain.numel():  # on the ids' own device: a loader's CPU ids cost no device sync
        low, high = int(domain.min()), int(domain.max())
        if low < 0 or high >= num_domains:
            raise ValueError(f"domain ids must lie in [0, {num_domains}), got values from {low} to {high}")
    ids = domain.to(device=device, dtype=torch.long)
    if mask is None:
        return ids, rows.sum(dim=1), torch.full_like(rows[:, 0], float(rows.shape[1]))
    keep = mask.reshape(rows.shape).to(device=device, dtype=torch.bool)
    return ids, torch.where(keep, rows, torch.zeros((), dtype=rows.dtype, device=device)).sum(dim=1), \
        keep.sum(dim=1, dtype=torch.float64)


def domain_loss_sums(token_losses: torch.Tensor, domain: torch.Tensor, num_domains: int,
                     mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-domain sums of token losses and token counts of one batch (float64, on the losses' device).

    Args:
        token_losses: ``[B, ...]`` per-token losses (``cross_entropy(..., reduction="none")``); row
            ``b`` belongs to domain ``domain[b]``. A ``[B]`` tensor counts as one token per row.
        domain: ``[B]`` integer domain ids in ``[0, num_domains)``.
        num_domains: the number of domains.
        mask: optional boolean ``[B, ...]`` (the shape of ``token_losses``): tokens to count (e.g.
            ``labels != -100``); masked-out tokens add neither loss nor count.

    Returns:
        ``(loss_sums, token_counts)``, each ``[num_domains]``.

    Raises:
        ValueError: shapes that do not fit, or a domain id outside ``[0, num_domains)``.
    """
    ids, row_sums, row_tokens = _rows(token_losses, domain, mask, num_domains, True)
    sums = torch.zeros(num_domains, dtype=torch.float64, device=row_sums.device).index_add_(0, ids, row_sums)
    tokens = torch.zeros(num_domains, dtype=torch.float64,
                         device=row_sums.device).index_add_(0, ids, row_tokens)
    return sums, tokens


class DomainLossMeter:
    """Running token-weighted mean training loss per domain, optionally summed over ranks.

    Args:
        domain_names: the dataset's ``domain_names`` (the order of the ``domain`` ids).
        check_ids: check every update's ids are in range, on the device the ids are on (pass
            ``batch["domain"]`` as the loader gives it, on the CPU, and this costs no device
            synchronisation); ``False`` skips the check (out-of-range ids then raise inside
            ``index_add_`` or, on some devices, go unnoticed).

    The sums live on the device of the first update's losses (float64), so an update never copies
    to the host; :meth:`compute` reads them once.
    """

    def __init__(self, domain_names: Sequence[str], *, check_ids: bool = True) -> None:
        names = list(domain_names)
        if not names or len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"domain_names must be distinct strings, at least one, got {names!r}")
        self.domain_names = names
        self.check_ids = bool(check_ids)
        self._totals = torch.zeros(2, len(names), dtype=torch.float64)  # row 0: loss sums, row 1: tokens

    def update(self, token_losses: torch.Tensor, domain: torch.Tensor,
               mask: torch.Tensor | None = None) -> None:
        """Add one batch: ``token_losses`` ``[B, ...]``, its ``domain`` ids ``[B]``, optional token ``mask``.

        See :func:`domain_loss_sums` for the shapes; gradients are not tracked (losses are detached).
        """
        ids, row_sums, row_tokens = _rows(token_losses, domain, mask, len(self.domain_names), self.check_ids)
        if self._totals.device != row_sums.device:
            self._totals = self._totals.to(row_sums.device)
        self._totals[0].index_add_(0, ids, row_sums)
        self._totals[1].index_add_(0, ids, row_tokens)

    def totals(self, *, all_reduce: bool = False, group: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss_sums, token_counts)`` per domain since the last reset (copies; float64).

        Args:
            all_reduce: sum over the ranks of ``group`` (one ``all_reduce``; every rank must call it).
            group: the ``torch.distributed`` process group (default: the world).

        Raises:
            RuntimeError: ``all_reduce=True`` without an initialized process group.
        """
        totals = self._totals.clone()
        if all_reduce:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                raise RuntimeError("DomainLossMeter: all_reduce=True needs an initialized torch.distributed "
                                   "process group")
            dist.all_reduce(totals, op=dist.ReduceOp.SUM, group=group)
        return totals[0], totals[1]

    def compute(self, *, all_reduce: bool = False, group: Any = None) -> dict[str, float]:
        """Per-domain mean loss per token since the last reset (``nan`` for a domain with no tokens).

        Args:
            all_reduce: combine every rank's tokens first (see :meth:`totals`).
            group: the process group for ``all_reduce``.
        """
        sums, tokens = self.totals(all_reduce=all_reduce, group=group)
        return {name: s / n if n > 0 else math.nan
                for name, s, n in zip(self.domain_names, sums.tolist(), tokens.tolist(), strict=True)}

    def tokens(self) -> dict[str, int]:
        """Tokens counted per domain on this rank since the last reset."""
        return {n: int(c) for n, c in zip(self.domain_names, self._totals[1].tolist(), strict=True)}

    def reset(self) -> None:
        """Start a new averaging window."""
        self._totals.zero_()

    def state_dict(self) -> dict[str, Any]:
        """The running sums (to keep a window across a checkpoint)."""
        sums, tokens = self._totals.cpu().tolist()
        return {"domain_names": list(self.domain_names), "loss_sums": sums, "tokens": tokens}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s sums.

        Raises:
            ValueError: the state was saved for other domains.
        """
        if list(state.get("domain_names", [])) != self.domain_names:
            raise ValueError(f"the state is for domains {state.get('domain_names')!r}, this meter has "
                             f"{self.domain_names!r}")
        values = torch.tensor([state["loss_sums"], state["tokens"]], dtype=torch.float64)
        self._totals = values.to(self._totals.device)
