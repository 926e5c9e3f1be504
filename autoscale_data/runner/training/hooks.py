"""Step hooks: code the trainer runs inside the training steps of a run whose spec names one.

A run's :class:`~autoscale_data.runner.planning.specs.RunSpec` may carry a ``hook``: a
:class:`~autoscale_data.runner.registry.HookSpec` of the hook's kind (its whole config; it enters the run id).
The trainer (:mod:`.train`) then builds the hook with :func:`make_step_hook` and calls it; a run without one
trains with no hook call. The protocol (:class:`StepHook`), in the order the trainer calls it:

- ``bind(ctx)``: once, after the model is built and before a checkpoint is restored; ``ctx`` is a
  :class:`HookContext` (the spec, config, domains in the dataset's order, process group, device, run
  folder, the model being trained and the training dataset, whose mix an online controller may change).
- ``load_state_dict(state)``: when the run resumes, with what ``state_dict()`` returned at that checkpoint.
- ``loss(batch)``: every micro-batch, a :class:`HookBatch` (inputs, labels, the forward pass's logits
  and the trainer's per-token losses with their graph, each sequence's domain, which micro-batch of the
  step); returns the loss to
  backpropagate instead of the model's mean loss, or ``None`` to keep it. The logged training loss
  stays the model's own mean loss.
- ``observe_losses(losses, domain, mask)`` (optional): every micro-batch, the per-token training losses
  the trainer computes for its per-domain training loss (no gradient), each sequence's domain and the
  token mask; a hook that only needs per-domain losses (an online controller) reads them here.
- ``after_step(step)``: after every optimizer step (``step``: the steps this run has done; a hook that
  acts every k steps tests ``step % k``).
- ``state_dict()``: JSON-able state saved in every checkpoint (under ``"step_hook"``), so a run killed
  at any moment resumes to the same state.
- ``summary()``: JSON-able record written into the run's ``result.json`` under ``"step_hook"``.

A kind is what a mixing method declares (its :class:`~autoscale_data.runner.registry.MethodDeclaration`'s
``hook_kind`` and ``hook`` class); the hooks live with their methods, which the trainer does not import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from .. import registry

__all__ = ["HookBatch", "HookContext", "StepHook", "make_step_hook"]


@dataclass(frozen=True)
class HookContext:
    """What a hook may use of the run it joins (see the module docstring)."""

    spec: Any
    config: Any
    domains: Any
    names: tuple[str, ...]
    info: Any
    run_dir: Path
    model: torch.nn.Module
    dataset: Any


@dataclass(frozen=True)
class HookBatch:
    """One micro-batch as the trainer saw it: ``domain`` holds each sequence's index into ``names``;
    ``losses`` and ``mask`` are the trainer's per-token losses (with the logits' graph) and their token
    mask from :func:`~autoscale_data.runner.models.token_cross_entropy` (``None``: the hook computes them
    from ``logits``)."""

    inputs: torch.Tensor
    labels: torch.Tensor
    logits: torch.Tensor
    domain: torch.Tensor
    micro: int
    last_micro: bool
    losses: torch.Tensor | None = None
    mask: torch.Tensor | None = None


class StepHook(Protocol):
    """The step-hook protocol (see the module docstring)."""

    def bind(self, ctx: HookContext) -> None: ...

    def loss(self, batch: HookBatch) -> torch.Tensor | None: ...

    def after_step(self, step: int) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def summary(self) -> dict[str, Any]: ...


def make_step_hook(hook: registry.HookSpec | None) -> StepHook | None:
    """The hook a spec's ``hook`` config names (``None`` for none).

    Raises:
        ValueError: a kind no registered mixing method declares.
    """
    return None if hook is None else registry.hook_factory(hook.kind)(hook)
