"""``MixtureOptions``: the settings of :class:`~autoscale_data.dataset.ScaleAwareMixtureDataset`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._checks import check_int
from ..mixing import FIXED_SCHEDULE, SCHEDULES
from ..store import Verify, check_verify

__all__ = ["OUTPUTS", "SCHEDULES", "MixtureOptions", "check_output", "epoch_caps"]

#: What a sample's tokens are: int64 tensors, int64 numpy arrays, or tensors of the store dtype.
OUTPUTS = ("torch", "numpy", "compact")


def check_output(output: Any) -> None:
    """Raise ``ValueError`` unless ``output`` is one of :data:`OUTPUTS`."""
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")


def epoch_caps(max_epochs: float | Mapping[str, float] | None, names: list[str]) -> dict[str, float | None]:
    """``max_epochs`` as a cap (or None) per domain name; checked against the domains."""
    if max_epochs is None:
        return dict.fromkeys(names)
    if isinstance(max_epochs, Mapping):
        unknown = sorted(set(max_epochs) - set(names))
        if unknown:
            raise ValueError(f"max_epochs names unknown domain(s) {unknown}; the domains are {names}")
        caps = {n: max_epochs.get(n) for n in names}
    else:
        caps = dict.fromkeys(names, max_epochs)
    for name, cap in caps.items():
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float))
                                or not cap > 0 or math.isnan(cap)):
            raise ValueError(f"max_epochs for domain {name!r} must be a positive number, got {cap!r}")
    return {n: (None if c is None else float(c)) for n, c in caps.items()}


@dataclass(frozen=True)
class MixtureOptions:
    """How a mixture stream is cut, ordered and delivered (validated on creation).

    Args:
        max_epochs: allow a domain to repeat up to this many epochs (a number for every domain, or
            a mapping name -> cap). By default a domain too small for its share is an error.
        shuffle_window: if > 1, shuffle positions inside consecutive windows of this many positions
            (the prefix bound then holds at window boundaries, and within the window size between).
        rank, world_size: this process's slice; default from ``torch.distributed`` when initialized.
        output: ``"torch"`` (int64 tensors), ``"numpy"`` (int64 arrays) or ``"compact"`` (tensors
            of the store dtype: ``uint16``, or ``int32`` for 32-bit vocabularies; convert on device).
        batch_size: if set, yield stacked batches of this many samples (the last may be shorter);
            use with ``DataLoader(ds, batch_size=None, num_workers=N)``: workers then take whole
            batches in turn, so the loader delivers this rank's stream in exact order.
        schedule: ``"fixed"`` (constant shares) or ``"anytime"`` (the cumulative counts follow the
            plan's ``allocation_for_budget`` path; needs such a plan as ``weights``).
        verify: shard check of stores given as paths or URLs: ``"checksum"``, ``"size"`` or ``"none"``.
        continue_from: a state saved under another configuration of the same stores, ``seq_len``,
            ``seed`` and ``shuffle_window``: the stream keeps that state's consumed prefix and
            continues from its cursor under this configuration (new weights or phases after the
            cursor, or a larger budget); nothing repeats or is skipped. The supply check then
            counts the prefix's draws. (``load_state_dict(state, continue_run=True)`` does the same
            on a built dataset.)
        pool: name -> a fraction of the domain's sequences (float in ``(0, 1]``) or a token count
            (int): the domain draws from a seeded subset of that many of its sequences, in epochs
            over the subset (:mod:`autoscale_data.mixing.pool`); ``max_epochs`` then counts epochs
            of the pool. The pool is part of the config (fingerprint and state). Used to give a
            small run the repetition a larger run will see.
    """

    max_epochs: float | Mapping[str, float] | None = None
    shuffle_window: int = 0
    rank: int | None = None
    world_size: int | None = None
    output: str = "torch"
    batch_size: int | None = None
    schedule: str = FIXED_SCHEDULE
    verify: Verify = "checksum"
    continue_from: Mapping[str, Any] | None = None
    pool: Mapping[str, float | int] | None = None

    def __post_init__(self) -> None:
        check_output(self.output)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        check_int("shuffle_window", self.shuffle_window, minimum=0)
        check_int("batch_size", self.batch_size, allow_none=True)
        check_verify(self.verify)
        if self.continue_from is not None and not isinstance(self.continue_from, Mapping):
            raise ValueError(f"continue_from must be a state dict, got {type(self.continue_from).__name__}")
        if self.pool is not None and not isinstance(self.pool, Mapping):
            raise ValueError("pool must be a mapping domain -> fraction or tokens, got "
                             f"{type(self.pool).__name__}")
        for name in ("shuffle_window", "batch_size"):  # plain ints (numpy ints would not go to JSON)
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, int(value))
