"""The cheap design the dry run recommends: a proxy model about 3x smaller in training FLOPs per token, two
budgets.

Chosen from the measured cost-regret frontier (issue #47; docs/runner.md, "The cheap design"):

- published Data Mixing Laws runs: a proxy 2.6x smaller at a tenth of the target's steps chose within noise
  (Pile-5 160M at 3k: 0.74 target runs, regret 0.0015), 5.9x smaller (70M) missed beyond noise at 3k-4k
  steps, and two or three checkpoints bought nothing over the last one;
- the CPU demo (2 target seeds): a proxy 3.1x smaller (half the width) chose a mix 0.006 worse at the
  target than the paper's design (within the seed interval; about half its gain over uniform kept), one
  4.5x smaller (half the depth too) 0.011 worse (worse on both seeds; almost none of the gain kept).

So the rule (:func:`cheap_proxy_model`): the largest preset of the target's family whose training FLOPs per
token are 2.5-4x below the target's, at the stores' vocabulary and ``seq_len``; when no preset lies there,
the target's own model at half its width (depth kept, heads halved, head size kept), halved again until it
is at least 2.5x smaller or cannot shrink further. The budgets: the config's two largest (``[N1, N2]``; a
third cost 1.17x and bought nothing measured). The schedule stays separate runs (one run per design point
and budget) until ``ddo.schedule: wsd`` is measured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..config import RunnerConfig
from ..config.sections import ModelConfig, ProxyModelConfig
from ..models import PRESETS
from .data import DomainInfo
from .settings import ModelSettings

__all__ = ["CHEAP_MAX_RATIO", "CHEAP_MIN_RATIO", "CheapDesign", "cheap_config", "cheap_design",
           "cheap_proxy_model"]

CHEAP_MIN_RATIO = 2.5
"""The cheap proxy model takes at least this many times fewer training FLOPs per token than the target's."""
CHEAP_MAX_RATIO = 4.0
"""A preset is taken as the cheap proxy model only up to this many times fewer FLOPs per token."""

# : (layers, width, heads, feed-forward) field names per family (GPT-2's feed-forward is 4 x width, not a
# field).
_FIELDS = {"gpt2": ("n_layer", "n_embd", "n_head", None),
           "bert": ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")}
_MIN_WIDTH = 16


@dataclass(frozen=True)
class CheapDesign:
    """The recommended cheap design for one config.

    Attributes:
        proxy_model: the proxies' model (``ddo.proxy_model``).
        ratio: the target model's training FLOPs per token over the proxy model's (at the stores' vocabulary
            and ``seq_len``).
        budgets: the DDO budgets (the config's two largest).
    """

    proxy_model: ProxyModelConfig
    ratio: float
    budgets: tuple[int, int]

    def __post_init__(self) -> None:
        if not self.ratio >= 1.0:
            raise ValueError(f"cheap design ratio = {self.ratio!r} is invalid: expected a proxy no larger "
                             "than the target (ratio >= 1)")

    def config_lines(self, *, from_three: bool = False) -> list[str]:
        """The YAML lines of the ``ddo`` section that select this design; ``from_three``: the config runs
        three budgets or more, so ``extra_budget: none`` is added (a file's ``extra_budget: half`` would add
        N0 again)."""
        model = self.proxy_model
        if model.overrides:
            fields = ", ".join(f"{k}: {v}" for k, v in model.overrides.items())
            shown = f"{{preset: {model.preset}, overrides: {{{fields}}}}}"
        else:
            shown = model.preset
        lines = ["ddo:", f"  proxy_model: {shown}", f"  budgets: [{self.budgets[0]}, {self.budgets[1]}]"]
        return lines + (["  extra_budget: none"] if from_three else [])


def _settings(config: RunnerConfig, domains: DomainInfo, model: ModelConfig) -> ModelSettings:
    """``model`` as a run of ``config`` trains it (its fields, its FLOPs per token)."""
    return ModelSettings.of(model, domains.vocab_size, config.seq_len, config.dropout, config.train.pad_vocab)


def _ratio(config: RunnerConfig, domains: DomainInfo, preset: str, overrides: dict[str, Any]) -> float:
    """The target model's training FLOPs per token over those of ``preset`` with ``overrides``."""
    target, proxy = (_settings(config, domains, m).flops_per_token(config.seq_len)
                     for m in (config.model, config.model.another(preset, overrides)))
    return target / proxy


def _halved(family: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    """Half the width, the depth kept (heads halved, head size kept; at one head the head shrinks), or
    ``None`` when the width would fall below 16."""
    depth, width, heads, ffn = _FIELDS[family]
    n_heads = int(fields[heads])
    head_size = int(fields[width]) // n_heads
    new_heads = max(1, n_heads // 2)
    new_width = new_heads * (head_size if n_heads > 1 else head_size // 2)
    if new_width < _MIN_WIDTH:
        return None
    out = {depth: int(fields[depth]), width: new_width, heads: new_heads}
    if ffn is not None:
        out[ffn] = max(1, int(fields[ffn]) * new_width // int(fields[width]))
    return out


def cheap_proxy_model(config: RunnerConfig, domains: DomainInfo) -> tuple[ProxyModelConfig, float]:
    """The cheap design's proxy model for ``config`` and its FLOPs-per-token ratio to the target's (module
    docstring: a preset 2.5-4x smaller, else the target's model at half width until >= 2.5x smaller)."""
    family = config.model.family
    presets = [(r, p) for p in PRESETS if p.startswith(family + "-")
               if CHEAP_MIN_RATIO <= (r := _ratio(config, domains, p, {})) <= CHEAP_MAX_RATIO]
    if presets:
        ratio, preset = min(presets)  # the largest such preset: the smallest ratio in range
        return ProxyModelConfig(preset=preset), ratio
    preset = config.model.preset
    fields = _settings(config, domains, config.model).fields
    overrides: dict[str, Any] = dict(config.model.overrides)  # the target's other fields kept
    ratio = 1.0
    while ratio < CHEAP_MIN_RATIO:
        smaller = _halved(family, {**fields, **overrides})
        if smaller is None:
            break
        overrides |= smaller
        ratio = _ratio(config, domains, preset, overrides)
    return ProxyModelConfig(preset=preset, overrides=overrides), ratio


def cheap_design(config: RunnerConfig, domains: DomainInfo) -> CheapDesign:
    """The cheap design recommended for ``config`` (its proxy model and two budgets)."""
    model, ratio = cheap_proxy_model(config, domains)
    n1, n2 = config.ddo.budgets[-2:]
    return CheapDesign(proxy_model=model, ratio=ratio, budgets=(n1, n2))


def cheap_config(config: RunnerConfig, design: CheapDesign) -> RunnerConfig:
    """``config`` with the cheap design's proxy model and budgets (everything else, ``proxy_lr`` included,
    kept)."""
    return dataclasses.replace(config, ddo=dataclasses.replace(config.ddo, proxy_model=design.proxy_model,
                                                               budgets=design.budgets))
