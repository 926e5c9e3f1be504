"""The online-mixing controller interface: per-domain losses of a window in, the next weights out.

A controller is pure (numpy only, no torch, no I/O). Every ``update`` receives what every rank
knows after ONE all-reduce of the per-domain loss sums (``[2, D]`` floats: each domain's summed
token losses and its token count over the window since the last update) plus the per-domain
sequences the stream has delivered so far (exact, from the stream itself), and returns the weights
of the next segment. Its whole state, random generators included, is ``state_dict()`` (plain JSON
values), so a resumed run proposes the same weights as the uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Controller", "Window", "check_proposal", "check_state"]


@dataclass(frozen=True)
class Window:
    """What a controller sees at an update.

    Attributes:
        step: the training step of the update (optimizer steps done so far).
        update: 1 for the first update, 2 for the next, ...
        loss_sums: per-domain sums of token losses over the window (``[D]``, float64).
        tokens: per-domain loss tokens over the window (``[D]``, float64; 0 for a domain absent from it).
        seen: per-domain sequences the stream has delivered before this update (``[D]``, int64).
    """

    step: int
    update: int
    loss_sums: np.ndarray
    tokens: np.ndarray
    seen: np.ndarray

    def __post_init__(self) -> None:
        for name in ("loss_sums", "tokens"):
            arr = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "seen", np.asarray(self.seen, dtype=np.int64).reshape(-1))
        if not self.loss_sums.shape == self.tokens.shape == self.seen.shape:
            raise ValueError(f"step {self.step}: loss_sums {self.loss_sums.shape}, tokens "
                             f"{self.tokens.shape} and seen {self.seen.shape} must have one entry per domain")
        if not (np.all(np.isfinite(self.loss_sums)) and np.all(np.isfinite(self.tokens))):
            raise ValueError(f"step {self.step}: non-finite per-domain losses {self.loss_sums.tolist()} / "
                             f"tokens {self.tokens.tolist()} (a diverged loss?)")
        if np.any(self.tokens < 0) or np.any(self.seen < 0):
            raise ValueError(f"step {self.step}: negative token counts {self.tokens.tolist()} or sequence "
                             f"counts {self.seen.tolist()}")

    @property
    def means(self) -> np.ndarray:
        """Per-domain mean token loss of the window (NaN for a domain without tokens in it)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.tokens > 0, self.loss_sums / np.where(self.tokens > 0, self.tokens, 1.0),
                            np.nan)


@runtime_checkable
class Controller(Protocol):
    """What an online stream follows (implementations: :mod:`autoscale_data.online`)."""

    domain_names: tuple[str, ...]
    """The domains, in the stream's order (``ds.domain_names``); every controller's first argument."""

    def initial_weights(self) -> dict[str, float]:
        """The weights of the stream's first segments, before any update."""

    def update(self, window: Window) -> dict[str, float]:
        """The weights of the next segment, from the window's per-domain losses."""

    def state_dict(self) -> dict[str, Any]:
        """The whole state (plain JSON values; a random generator's state too, if it draws any)."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""


def check_proposal(step: int, weights: Any, names: Sequence[str], *, atol: float = 1e-6) -> np.ndarray:
    """A controller's proposal as a weight vector in ``names`` order, or ``ValueError`` naming the step and
    value.

    Accepts a mapping name -> weight (every domain named, none unknown) or a vector of ``len(names)``;
    every weight must be finite and ``>= 0`` and they must sum to 1 within ``atol``.
    """
    names = list(names)
    if isinstance(weights, Mapping):
        unknown = sorted(set(map(str, weights)) - set(names))
        if unknown:
            raise ValueError(f"step {step}: the controller named unknown domain(s) {unknown} in "
                             f"{dict(weights)}; the domains are {names}")
        missing = [n for n in names if n not in weights]
        if missing:
            raise ValueError(f"step {step}: the controller gave no weight for domain(s) {missing} in "
                             f"{dict(weights)}")
        vec = [weights[n] for n in names]
    else:
        vec = list(np.asarray(weights, dtype=object).reshape(-1)) if weights is not None else []
        if len(vec) != len(names):
            raise ValueError(f"step {step}: the controller returned {weights!r}, expected {len(names)} "
                             f"weights for {names}")
    out = np.empty(len(names), dtype=np.float64)
    for i, (name, v) in enumerate(zip(names, vec, strict=True)):
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"step {step}: weight {v!r} of domain {name!r} is not a number") from None
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"step {step}: weight {v!r} of domain {name!r} is not a finite non-negative "
                             "number")
        out[i] = x
    total = float(out.sum())
    if abs(total - 1.0) > atol:
        raise ValueError(f"step {step}: the weights {dict(zip(names, out.tolist(), strict=True))} sum to "
                         f"{total!r}, not 1")
    return out / total


def check_state(state: Any, name: str, domains: Sequence[str]) -> None:
    """Raise ``ValueError`` unless ``state`` is a saved state of controller ``name`` over ``domains``."""
    if not isinstance(state, Mapping) or state.get("controller") != name:
        got = state.get("controller") if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"not a state of the {name!r} controller: {got!r}")
    if list(state.get("domains") or []) != list(domains):
        raise ValueError(f"the saved {name!r} controller state is over the domains {state.get('domains')}, "
                         f"this controller over {list(domains)}")
