"""``MixtureValidationDataset``: every domain's held-out sequences, for per-domain validation loss."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from .._checks import check_int
from ..store import check_verify
from ._mixture_options import check_output
from ._source import DomainsArg, DomainSplits, open_domains, resolve_distributed
from ._state import to_output

__all__ = ["MixtureValidationDataset"]


class MixtureValidationDataset(IterableDataset):
    """The held-out (``val``) sequences of each domain, domain by domain, in store order.

    Domain ids match :class:`ScaleAwareMixtureDataset` over the same domains (both order domains by
    name). Ranks and DataLoader workers take strided slices; together they yield every held-out
    sequence exactly once, so summing losses per ``domain`` gives per-domain validation loss.

    Args:
        domains: as for :class:`ScaleAwareMixtureDataset`.
        seq_len: tokens per sequence.
        max_sequences_per_domain: use at most this many held-out sequences of each domain.
        rank, world_size: this process's slice; default from ``torch.distributed`` when initialized.
        output: ``"torch"``, ``"numpy"`` or ``"compact"`` (see the training dataset).
        verify: shard check on open.

    Raises:
        ValueError: a domain without a single held-out sequence of ``seq_len`` tokens.
    """

    def __init__(
        self,
        domains: DomainsArg,
        seq_len: int,
        *,
        max_sequences_per_domain: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        output: str = "torch",
        verify: str = "checksum",
    ) -> None:
        super().__init__()
        check_int("seq_len", seq_len)
        check_int("max_sequences_per_domain", max_sequences_per_domain, allow_none=True)
        check_output(output)
        check_verify(verify)
        self.rank, self.world_size = resolve_distributed(rank, world_size)
        stores = open_domains(domains, verify)
        self.domain_names: list[str] = list(stores)
        self.seq_len = seq_len
        self.output = output
        self._reader = DomainSplits(stores, "val", seq_len)
        cap = max_sequences_per_domain
        counts = [n if cap is None else min(n, cap) for n in self._reader.num_sequences]
        empty = [name for name, n in zip(self.domain_names, counts, strict=False) if n == 0]
        if empty:
            raise ValueError(f"domain(s) {empty} have no held-out sequence of {seq_len} tokens "
                             "(prepare them with a holdout, or use a shorter seq_len)")
        self.sequences_per_domain: dict[str, int] = dict(zip(self.domain_names, counts, strict=False))
        self._domains = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        self._sequences = np.concatenate([np.arange(n, dtype=np.int64) for n in counts])
        self.total_sequences = int(self._domains.size)

    def __len__(self) -> int:
        """Sequences this rank yields."""
        return len(range(self.rank, self.total_sequences, self.world_size))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        num_workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        start = self.rank + worker * self.world_size
        stride = self.world_size * num_workers
        view, output = self._reader.view, self.output
        for d, s in zip(self._domains[start::stride].tolist(), self._sequences[start::stride].tolist(),
                        strict=False):
            ids = to_output(view(d, s), output)
            yield {"input_ids": ids, "labels": ids, "domain": d, "seq_index": s}
