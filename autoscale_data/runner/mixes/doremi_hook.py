"""DoReMi's step hook: Group DRO on its proxy run (the step-hook protocol is
:mod:`autoscale_data.runner.training.hooks`; the hook kind ``doremi`` is declared in
:mod:`autoscale_data.runner.registry`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..._runner_names import GPT2
from .. import layout, registry
from ..models import token_cross_entropy
from ..training.checkpoint import final_model
from ..training.hooks import HookBatch, HookContext

__all__ = ["DoReMiHook", "DoReMiHookSpec", "doremi_update", "load_reference_model"]


@dataclass(frozen=True)
class DoReMiHookSpec(registry.HookSpec):
    """The config of DoReMi's step hook (kind ``doremi``, the ``hook`` of its proxy run's spec)."""

    step_size: float
    """DoReMi's eta."""
    smoothing: float
    """The weights' smoothing c (mixed with uniform)."""
    reference_run: str = ""
    """The run id of the reference run, whose final model the proxy reads."""
    initial: dict[str, float] = field(default_factory=dict)
    """The starting weights (the reference mix; uniform when empty)."""


def doremi_update(weights: Sequence[float], scores: Sequence[float], step_size: float,
                  smoothing: float) -> list[float]:
    """One step of DoReMi's domain weights (``doremiv1`` of the official code):
    ``(1 - c) softmax(log w + eta * scores) + c / k``, where ``scores`` are the clipped per-domain excess
    losses."""
    w = torch.tensor(list(weights), dtype=torch.float64)
    s = torch.tensor(list(scores), dtype=torch.float64)
    new = torch.softmax(torch.log(w) + float(step_size) * s, dim=0)
    return ((1.0 - float(smoothing)) * new + float(smoothing) / len(w)).tolist()


def _all_reduce(t: torch.Tensor, info: Any) -> torch.Tensor:
    if info is None or info.world_size <= 1:
        return t
    import torch.distributed as dist

    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def load_reference_model(spec: Any, domains: Any, ref_dir: Path, device: torch.device) -> torch.nn.Module:
    """The final model of DoReMi's reference run ``ref_dir`` (``final_ckpt/``), frozen, in eval mode: the
    model of the proxy run ``spec`` (both train the proxy model, ``ddo.proxy_model``, or the target's).

    Raises:
        FileNotFoundError: the reference run kept no final checkpoint.
    """
    try:
        model = final_model(spec, ref_dir, domains.eos_id)
    except ValueError:  # an unreadable pointer: no complete checkpoint
        model = None
    if model is None:
        raise FileNotFoundError(f"run {spec.run_id} needs the final model of DoReMi's reference run "
                                f"{ref_dir.name}, but {os.fspath(ref_dir / layout.FINAL_CHECKPOINT_DIR)!r} "
                                "holds no complete checkpoint: train the reference first")
    model.to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


class DoReMiHook:
    """DoReMi's Group DRO on a proxy run (Xie et al. 2023; ``doremi/trainer.py`` of the official code).

    Every micro-batch: per-token losses of the proxy (from its forward pass) and of the frozen reference
    model (one extra forward pass), the excess ``max(l_proxy - l_ref, 0)`` per token, summed per domain.
    At the last micro-batch of a step the per-domain scores (mean excess over the step's tokens of each
    domain, all ranks together; a domain absent from the step keeps its last score) update the weights
    by :func:`doremi_update`, and the running average of the weights after each update is kept. The
    proxy's loss is the weighted per-token loss ``sum_t w[d(t)] l_t / sum_t w[d(t)]`` (as the official
    code, with the weights of the step's update on its last micro-batch); its sampler stays at the
    reference mix. The state (weights, average, scores, updates) is in every checkpoint.
    """

    spec = DoReMiHookSpec

    def __init__(self, hook: DoReMiHookSpec, *, reference: torch.nn.Module | None = None,
                 family: str = GPT2) -> None:
        self.reference_run, self.step_size, self.smoothing = hook.reference_run, float(hook.step_size), float(hook.smoothing)
        self.initial = {str(d): float(v) for d, v in hook.initial.items()}
        self.reference = reference
        self.family = family
        self.info: Any = None
        self.names: tuple[str, ...] = ()
        self.autocast = False
        self.vocab: int | None = None  # the real vocabulary of a padded model

    def bind(self, ctx: HookContext) -> None:
        self.info, self.names = ctx.info, tuple(ctx.names)
        self.family = ctx.config.model.family
        self.autocast = ctx.config.precision == "bf16"
        self.vocab = ctx.spec.training.model.vocab_size
        if self.reference is None:
            self.reference = load_reference_model(ctx.spec, ctx.domains,
                                                  ctx.run_dir.parent / self.reference_run, ctx.info.device)
        self.start(self.names)

    def start(self, names: Sequence[str]) -> None:
        """Initial state over ``names``: the ``initial`` weights of the config (the reference mix, as the
        official code starts from its domain config's weights; uniform without them), zero scores, no
        update."""
        self.names = tuple(names)
        k = len(self.names)
        raw = [self.initial.get(d, 0.0) for d in self.names] if self.initial else [1.0] * k
        self.weights = [v / sum(raw) for v in raw]
        self.average = list(self.weights)
        self.scores = [0.0] * k
        self.updates = 0
        self._sums = torch.zeros(k, dtype=torch.float64)
        self._counts = torch.zeros(k, dtype=torch.float64)

    def _reference_losses(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        assert self.reference is not None
        device_type = inputs.device.type
        with torch.no_grad(), torch.autocast(device_type=device_type, dtype=torch.bfloat16,
                                             enabled=self.autocast):
            logits = self.reference(input_ids=inputs).logits
        return token_cross_entropy(logits, labels, self.family, vocab_size=self.vocab)[0]

    def loss(self, batch: HookBatch) -> torch.Tensor:
        losses, mask = batch.losses, batch.mask
        if losses is None or mask is None:
            losses, mask = token_cross_entropy(batch.logits, batch.labels, self.family, vocab_size=self.vocab)
        excess = (losses.detach() - self._reference_losses(batch.inputs, batch.labels)).clamp(min=0)
        k = len(self.weights)
        tok_domain = batch.domain.to(losses.device).long().view(-1, 1).expand_as(losses)
        m = mask.to(torch.float64)
        both = torch.zeros(2, k, dtype=torch.float64, device=losses.device).index_add_(
            1, tok_domain.reshape(-1), torch.stack([excess.to(torch.float64) * m, m]).reshape(2, -1)).cpu()
        self._sums += both[0]
        self._counts += both[1]
        if batch.last_micro:
            self._update()
        w = torch.tensor(self.weights, dtype=losses.dtype, device=losses.device)[tok_domain] * mask
        world = 1 if self.info is None else self.info.world_size
        normalizer = _all_reduce(w.sum().detach().clone(), self.info) / world
        return (losses * w).sum() / normalizer

    def _update(self) -> None:
        device = self.info.device if self.info is not None and self.info.world_size > 1 else torch.device("cpu")
        both = _all_reduce(torch.stack([self._sums, self._counts]).to(device), self.info).cpu()
        sums, counts = both[0], both[1]
        self.scores = [float(s / n) if n > 0 else old
                       for s, n, old in zip(sums.tolist(), counts.tolist(), self.scores, strict=True)]
        self.weights = doremi_update(self.weights, self.scores, self.step_size, self.smoothing)
        self.updates += 1
        self.average = [(a * (self.updates - 1) + w) / self.updates
                        for a, w in zip(self.average, self.weights, strict=True)]
        self._sums.zero_()
        self._counts.zero_()

    def after_step(self, step: int) -> None:
        """Nothing: the weights moved at the step's last micro-batch."""

    def state_dict(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "average": list(self.average), "scores": list(self.scores),
                "updates": self.updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weights = [float(v) for v in state["weights"]]
        self.average = [float(v) for v in state["average"]]
        self.scores = [float(v) for v in state["scores"]]
        self.updates = int(state["updates"])

    def summary(self) -> dict[str, Any]:
        """``weights`` (the last), ``average_weights`` (DoReMi's output), ``scores`` (the last per-domain
        excess losses) by domain, and the number of ``updates``."""
        def named(values: Sequence[float]) -> dict[str, float]:
            return {d: float(v) for d, v in zip(self.names, values, strict=True)}

        return {"kind": registry.DOREMI, "reference_run": self.reference_run, "step_size": self.step_size,
                "smoothing": self.smoothing, "updates": self.updates, "weights": named(self.weights),
                "average_weights": named(self.average), "scores": named(self.scores),
                "finite": all(math.isfinite(v) for v in self.average)}

