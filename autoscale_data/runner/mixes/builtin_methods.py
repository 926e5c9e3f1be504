"""The built-in mixing methods' declarations, their classes imported here (no module is named by a string).

:data:`BUILTINS` is registered in :data:`~autoscale_data.runner.registry.MIXING_METHODS` when this module is
imported, which the runner's ``__init__`` does, so every process of the runner (the trainer's too) knows them.
"""

from __future__ import annotations

from ..config.method_sections import DoReMiConfig, OnlineMixingConfig, RegMixConfig
from ..registry import (
    ADO,
    ANYTIME,
    AUTOSCALE,
    DDO_N2,
    DOREMI,
    DOREMI_PROXY,
    DOREMI_REFERENCE,
    FITTED,
    MIXING_LAW,
    MIXING_METHODS,
    NATURAL,
    ODM,
    ONLINE,
    OWN_RUNS,
    REFERENCE,
    REGMIX,
    STORES,
    SWARM,
    UNIFORM,
    MethodDeclaration,
    MethodDoc,
)
from .doremi_hook import DoReMiHook
from .methods import DDON2, Anytime, AutoScale, DoReMi, FixedMix, MixingLaw, RegMix
from .online_method import OnlineMethod, OnlineMixingHook

__all__ = ["BUILTINS"]

_STORES_DOC = MethodDoc("the stores / `target.reference_weights` (a mapping or a preset such as `llama1`)")
_REGRESSION_RUNS = "the same runs as `regmix`"
_ONLINE_DOC = MethodDoc(
    "chosen during each target run by an online controller (`runner/mixes/online_method.py`): every "
    "`online.every` steps the per-domain training losses (all-reduced once) give the weights of a later "
    "segment of the exact stream; ADO starts at the natural mix (its prior), ODM at uniform",
    "none: 0 extra runs, 0 extra tokens (the report's cost columns say so); the controller's time is inside "
    "the target run's own (see [dataset](dataset.md), online mixing)",
    "ADO (Jiang et al., ICLR 2025, github yidingjiang/ado); ODM (Albalak et al. 2023, EXP3); "
    "`autoscale_data.online`")
_ONLINE = {"section": "online", "config": OnlineMixingConfig, "hook": OnlineMixingHook, "doc": _ONLINE_DOC}
_SWARM = {"section": REGMIX, "config": RegMixConfig, "selection_kinds": (SWARM,)}

#: The built-in methods, registered explicitly (this order gives each target mix its colour in the plots).
BUILTINS: tuple[MethodDeclaration, ...] = (
    MethodDeclaration(AUTOSCALE, "AutoScale (Kang et al.): DDO at N1 and N2, projected to the target budget",
                      FITTED, 0, AutoScale, doc=MethodDoc("DDO at N1 and N2, projected to the target",
                                                          "every DDO proxy (2 × (2m+1) per seed)",
                                                          "AutoScale (Kang et al.)")),
    MethodDeclaration(ANYTIME, "AutoScale's mixture plan, followed along the run (schedule 'anytime')",
                      FITTED, 3, Anytime, doc=MethodDoc(
                          "AutoScale's mixture plan, followed along the run (the dataset's "
                          "`schedule=\"anytime\"`; see \"The anytime schedule as a target run\")",
                          "the runs of `autoscale`")),
    MethodDeclaration(DDO_N2, "the DDO optimum at N2, not projected", FITTED, 1, DDON2,
                      doc=MethodDoc("the DDO optimum at N2", "the DDO proxies at N2")),
    MethodDeclaration(NATURAL, "each domain's share of the tokens", STORES, 2, FixedMix, doc=_STORES_DOC),
    MethodDeclaration(REFERENCE, "target.reference_weights (user weights or a preset such as LLaMA-1's)",
                      STORES, 2, FixedMix, doc=_STORES_DOC),
    MethodDeclaration(UNIFORM, "equal weights", STORES, 2, FixedMix, doc=_STORES_DOC),
    MethodDeclaration(DOREMI, "DoReMi (Xie et al. 2023): average Group-DRO weights of a proxy trained "
                      "against a reference model (github.com/sangmichaelxie/doremi)", OWN_RUNS, 4, DoReMi,
                      section=DOREMI, config=DoReMiConfig, selection_kinds=(DOREMI_REFERENCE, DOREMI_PROXY),
                      keeps_model=(DOREMI_REFERENCE,), hook_kind=DOREMI, hook=DoReMiHook, doc=MethodDoc(
                          "the average over the proxy run of DoReMi's domain weights",
                          "a reference run on `doremi.reference` (uniform by default) and a Group-DRO proxy "
                          "run, each `doremi.budget` tokens (N2 by default); the proxy also runs the "
                          "reference model forward every step (measured 1.1-1.5× a plain run's time on the "
                          "CPU examples)",
                          "DoReMi (Xie et al. 2023, github sangmichaelxie/doremi `doremi/trainer.py`)")),
    MethodDeclaration(REGMIX, "RegMix (Liu et al. 2024): regression of the objective on the mixture, best "
                      "candidates averaged", OWN_RUNS, 4, RegMix, **_SWARM, doc=MethodDoc(
                          "least squares (or LightGBM) of the objective on the mixture weights, then the "
                          "mean of the best `top_k` of `candidates` random mixtures",
                          "the DDO proxies at N2 (by default: the paper fitted RegMix \"on the exact same "
                          "pairs of domain weights and evaluation loss\") and/or a swarm of random Dirichlet "
                          "mixtures (`regmix.swarm`)",
                          "RegMix (Liu et al. 2024, github sail-sg/regmix); `solver.regmix_weights`")),
    MethodDeclaration(MIXING_LAW, "Data Mixing Laws (Ye et al. 2024): L_i = c_i + k_i exp(t_i . w) per "
                      "domain, minimised", OWN_RUNS, 4, MixingLaw, **_SWARM, doc=MethodDoc(
                          "`L_i(w) = c_i + k_i exp(t_i · w)` fitted per validation domain, the objective "
                          "built from them minimised on the simplex", _REGRESSION_RUNS,
                          "Data Mixing Laws (Ye et al. 2024); `solver.mixing_law_weights`")),
    MethodDeclaration(ADO, "ADO (Jiang et al., ICLR 2025): per-domain power laws fitted online, the mix "
                      "following their slopes; no proxy runs (0 extra runs: chosen inside the target run)",
                      ONLINE, 4, OnlineMethod, hook_kind=ADO, **_ONLINE),
    MethodDeclaration(ODM, "ODM (Albalak et al. 2023): EXP3 bandit on the per-domain training loss; no proxy "
                      "runs (0 extra runs: chosen inside the target run)", ONLINE, 4, OnlineMethod,
                      hook_kind=ODM, **_ONLINE),
)
MIXING_METHODS.update({m.name: m for m in BUILTINS})
