"""The config sections of the built-in mixing methods beside AutoScale (``regmix:``, ``doremi:``,
``online:``).

Each is optional: unset, a method named in ``target.baselines`` runs with the defaults. The registry names
each section's dataclass (``MethodDeclaration.config``), so the config builds, checks and documents it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._checks import is_int, is_number
from ...solver.regression import LINEAR, REGRESSORS
from ..registry import ADO, ODM
from .sections import build_section, check_choice, check_int_field, check_number_field, field_error

__all__ = ["DoReMiConfig", "ONLINE_OPTIONS", "OnlineMixingConfig", "RegMixConfig", "SwarmConfig"]

# : The settings each online controller takes (``online.ado`` / ``online.odm``; see
# :mod:`autoscale_data.online`).
ONLINE_OPTIONS = {ADO: ("warmup", "fit_after", "refit_every", "min_prob", "history_decay", "grid"),
                  ODM: ("reward_scale",)}


def _mapping(section: str, name: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise field_error(section, name, value, "a mapping")
    return {str(k): v for k, v in value.items()}


@dataclass(frozen=True)
class SwarmConfig:
    """RegMix's swarm: runs of random Dirichlet mixtures at a small budget, planned, trained and resumed like
    the proxies."""

    runs: int = 0
    """Runs of the swarm."""
    budget: int = 0
    """Tokens per run."""
    alpha: float = 1.0
    """The Dirichlet's concentration."""
    seed: int = 0
    """Draws the mixtures (the runs train with the config's first seed)."""
    preset: str | None = None
    """Train the swarm with another (smaller) model preset (``None``: the config's model)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """That model's overrides (as ``model.overrides``)."""

    def __post_init__(self) -> None:
        check_int_field("regmix.swarm", "runs", self.runs)
        check_int_field("regmix.swarm", "budget", self.budget)
        check_number_field("regmix.swarm", "alpha", self.alpha)
        check_int_field("regmix.swarm", "seed", self.seed, minimum=0)
        if self.preset is not None:
            from ..models import PRESETS

            if self.preset not in PRESETS:
                raise field_error("regmix.swarm", "preset", self.preset, f"null or one of {sorted(PRESETS)}")
        if not isinstance(self.overrides, dict):
            raise field_error("regmix.swarm", "overrides", self.overrides, "a mapping of model config fields")


@dataclass(frozen=True)
class RegMixConfig:
    """What RegMix and the data mixing law are fitted on, and RegMix's regression."""

    use_proxies: bool | None = None
    """Fit on the DDO proxies at N2, as the paper did (``None``: yes without a swarm, no with one, so runs of
    different budgets are pooled only when asked)."""
    swarm: SwarmConfig | None = None
    """An extra swarm of runs to fit on (RegMix's own recipe; ``None``: none)."""
    model: str = LINEAR
    """RegMix's regression: ``linear`` (least squares on the weights), ``lightgbm`` (RegMix's own, for large
    swarms; needs the optional package) or ``auto``."""
    candidates: int = 100_000
    """Random mixtures scored by the regression."""
    top_k: int = 100
    """RegMix's mix: the mean of the best ``top_k`` candidates."""

    def __post_init__(self) -> None:
        if self.use_proxies is not None and not isinstance(self.use_proxies, bool):
            raise field_error("regmix", "use_proxies", self.use_proxies, "true, false or null")
        if isinstance(self.swarm, Mapping) and not {"runs", "budget"} <= set(self.swarm):
            raise field_error("regmix", "swarm", self.swarm, "at least 'runs' and 'budget' (tokens per run)")
        if self.swarm is not None:
            object.__setattr__(self, "swarm", build_section(SwarmConfig, self.swarm, "regmix.swarm"))
        check_choice("regmix", "model", self.model, REGRESSORS)
        check_int_field("regmix", "candidates", self.candidates)
        check_int_field("regmix", "top_k", self.top_k)
        if self.top_k > self.candidates:
            raise field_error("regmix", "top_k", self.top_k, f"at most regmix.candidates = {self.candidates}")
        if self.use_proxies is False and self.swarm is None:
            raise field_error("regmix", "use_proxies", False, "true (or a regmix.swarm): nothing to fit on")

    @property
    def fits_on_proxies(self) -> bool:
        """Whether the DDO proxies at N2 enter the fit."""
        return self.swarm is None if self.use_proxies is None else bool(self.use_proxies)


@dataclass(frozen=True)
class DoReMiConfig:
    """DoReMi (Xie et al. 2023): a reference run, then a Group-DRO proxy whose average weights are the mix."""

    reference: str | dict[str, float] = "uniform"
    """The reference run's mix: ``uniform`` (as DoReMi), ``natural``, a preset of ``solver.PRESETS``
    (``llama1``) or a mapping domain -> weight."""
    reference_mapping: dict[str, str] | None = None
    """A preset's keys -> your domains."""
    budget: int | None = None
    """Tokens of the reference run and of the proxy run each (``None``: the DDO budget N2)."""
    step_size: float = 1.0
    """eta of the exponentiated-gradient update ``w <- (1 - c) softmax(log w + eta * excess) + c / k`` (the
    official default)."""
    smoothing: float = 1e-3
    """c of that update (the official default)."""
    seed: int | None = None
    """Seed of both runs (``None``: the config's first seed)."""

    def __post_init__(self) -> None:
        if isinstance(self.reference, Mapping):
            weights = dict(self.reference)
            if not weights or not all(is_number(w) and w >= 0
                                      for w in weights.values()) or sum(weights.values()) <= 0:
                raise field_error("doremi", "reference", self.reference,
                                  "a mapping domain -> weight >= 0 (sum > 0)")
            object.__setattr__(self, "reference", {str(k): float(v) for k, v in weights.items()})
        elif not isinstance(self.reference, str) or not self.reference:
            raise field_error("doremi", "reference", self.reference,
                              "'uniform', 'natural', a preset name ('llama1') or a mapping domain -> weight")
        object.__setattr__(self, "reference_mapping",
                           _mapping("doremi", "reference_mapping", self.reference_mapping))
        if self.budget is not None:
            check_int_field("doremi", "budget", self.budget)
        check_number_field("doremi", "step_size", self.step_size)
        if not is_number(self.smoothing) or not 0.0 <= float(self.smoothing) < 1.0:
            raise field_error("doremi", "smoothing", self.smoothing, "a number in [0, 1)")
        if self.seed is not None and not (is_int(self.seed) and self.seed >= 0):
            raise field_error("doremi", "seed", self.seed, "an integer >= 0 or null")


@dataclass(frozen=True)
class OnlineMixingConfig:
    """Online mixing: target runs whose mix a controller chooses as they train."""

    every: int = 10
    """Optimizer steps between two updates of the mix (each all-reduces the per-domain training losses
    once)."""
    lookahead: int | None = None
    """Segments of the stream decided ahead (``None``: the dataset's default, ceil(4 / every), at least 1)."""
    ado: dict[str, Any] = field(default_factory=dict)
    """ADO's settings: ``warmup`` (2), ``fit_after`` (warmup + 4), ``refit_every`` (1), ``min_prob`` (0.01),
    ``history_decay`` (0.9), ``grid`` (``coarse``); checked against the domains before anything trains."""
    odm: dict[str, Any] = field(default_factory=dict)
    """ODM's settings: ``reward_scale`` (10, the published code's)."""

    def __post_init__(self) -> None:
        check_int_field("online", "every", self.every)
        if self.lookahead is not None:
            check_int_field("online", "lookahead", self.lookahead)
        for name, known in ONLINE_OPTIONS.items():
            raw = _mapping("online", name, getattr(self, name)) or {}
            unknown = sorted(set(raw) - set(known))
            if unknown:
                raise field_error("online", name, raw, f"settings from {list(known)} (unknown: {unknown})")
            object.__setattr__(self, name, raw)

    def options(self, method: str) -> dict[str, Any]:
        """The settings of controller ``method`` (``"ado"`` or ``"odm"``)."""
        return dict(sorted(getattr(self, method).items()))
