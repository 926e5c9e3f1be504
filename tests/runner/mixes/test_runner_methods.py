"""The registry of mixing methods: DoReMi's step (against a hand computation of the official rule) and its
resume, RegMix's swarm in the plan and the ledger, the errors raised before anything trains, and every
new baseline end to end on tiny stores (plan -> runs -> weights -> target runs -> report section)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from runner_helpers import dies_after_checkpoints, kill_runner_when, tiny_config, tiny_stores

from autoscale_data.runner import registry
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.mixes.doremi_hook import DoReMiHook, DoReMiHookSpec, doremi_update
from autoscale_data.runner.mixes.methods import (
    MethodContext,
    MixingMethod,
    TargetChoice,
    mixing_method,
    selected_methods,
    selection_stages,
)
from autoscale_data.runner.models import token_cross_entropy
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import ddo_proxy_specs, method_spec, target_spec
from autoscale_data.runner.registry import OWN_RUNS, MethodDeclaration
from autoscale_data.runner.reporting.metrics import paired_verdict
from autoscale_data.runner.reporting.report_types import Report, Verdict
from autoscale_data.runner.training import train as train_mod
from autoscale_data.runner.training.hooks import HookBatch

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores", ("a", "b", "c"))


def _config(stores: Path, **overrides):
    return config_from_dict(tiny_config(stores, **overrides))


def _ctx(cfg, out: Path) -> MethodContext:
    d = inspect_domains(cfg)
    return MethodContext(cfg, d, out, {n: ddo_proxy_specs(cfg, d, n) for n in cfg.ddo.budgets})


# ------------------------------------------------------------------------------------------- DoReMi step
def test_doremi_update_is_the_official_rule_by_hand() -> None:
    w, scores, eta, c = [0.5, 0.3, 0.2], [0.4, 0.0, 1.0], 1.0, 1e-3
    logits = [math.log(x) + eta * s for x, s in zip(w, scores, strict=True)]
    z = sum(math.exp(v) for v in logits)
    expected = [(1 - c) * math.exp(v) / z + c / 3 for v in logits]
    assert doremi_update(w, scores, eta, c) == pytest.approx(expected, abs=1e-12)
    assert sum(doremi_update(w, scores, 0.5, 0.1)) == pytest.approx(1.0)


class _FixedLogits(torch.nn.Module):
    """A 'reference model' whose logits are given (one sequence per row; the first rows for a smaller batch)."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, input_ids: torch.Tensor):
        return type("Out", (), {"logits": self.logits[: input_ids.shape[0]]})()


def test_doremi_hook_step_matches_a_hand_computed_step() -> None:
    torch.manual_seed(0)
    batch, length, vocab = 3, 5, 7
    ids = torch.randint(0, vocab, (batch, length))
    proxy = torch.randn(batch, length, vocab, requires_grad=True)
    ref = torch.randn(batch, length, vocab)
    domain = torch.tensor([0, 1, 0])
    hook = DoReMiHook(DoReMiHookSpec(kind="doremi", step_size=1.0, smoothing=1e-3, initial={"x": 1.0, "y": 1.0, "z": 2.0}),
                      reference=_FixedLogits(ref))
    hook.start(["x", "y", "z"])
    assert hook.weights == pytest.approx([0.25, 0.25, 0.5])
    loss = hook.loss(HookBatch(inputs=ids, labels=ids, logits=proxy, domain=domain, micro=0, last_micro=True))
    # by hand: per-token losses of both models (next token), the clipped excess averaged per domain
    lp = torch.nn.functional.cross_entropy(proxy[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1),
                                           reduction="none").view(batch, length - 1)
    lr = torch.nn.functional.cross_entropy(ref[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1),
                                           reduction="none").view(batch, length - 1)
    excess = (lp - lr).clamp(min=0).detach()
    s0 = float(excess[[0, 2]].mean())
    s1 = float(excess[1].mean())
    assert hook.scores == pytest.approx([s0, s1, 0.0])  # z saw no token: its score stays 0
    new = doremi_update([0.25, 0.25, 0.5], [s0, s1, 0.0], 1.0, 1e-3)
    assert hook.weights == pytest.approx(new)
    assert hook.average == pytest.approx(new) and hook.updates == 1
    w_tok = torch.tensor([new[0], new[1], new[0]]).view(-1, 1).expand_as(lp)
    assert float(loss.detach()) == pytest.approx(float((lp * w_tok).sum().detach() / w_tok.sum()), rel=1e-6)
    loss.backward()  # the reweighted loss carries the proxy's graph
    assert proxy.grad is not None and float(proxy.grad.abs().sum()) > 0
    # a second update with a domain absent keeps its last score, and the average is the running mean
    hook.loss(HookBatch(inputs=ids[:1], labels=ids[:1], logits=proxy[:1], domain=torch.tensor([2]), micro=0,
                        last_micro=True))
    assert hook.scores[:2] == pytest.approx([s0, s1])
    assert hook.average == pytest.approx([(a + b) / 2 for a, b in zip(new, hook.weights, strict=True)])


def test_doremi_raises_the_weight_of_a_domain_whose_excess_stays_high() -> None:
    vocab = 5
    ids = torch.zeros(2, 4, dtype=torch.long)
    good = torch.full((1, 4, vocab), -5.0)
    good[..., 0] = 5.0  # predicts token 0: low loss
    bad = torch.zeros(1, 4, vocab)  # uniform: high loss
    ref = torch.cat([good, good])  # the reference is good on both domains
    proxy = torch.cat([bad, good])  # the proxy is bad on domain 0 only
    hook = DoReMiHook(DoReMiHookSpec(kind="doremi", step_size=1.0, smoothing=1e-3), reference=_FixedLogits(ref))
    hook.start(["hard", "easy"])
    seen = [hook.weights[0]]
    for _ in range(5):
        hook.loss(HookBatch(inputs=ids, labels=ids, logits=proxy, domain=torch.tensor([0, 1]), micro=0,
                            last_micro=True))
        seen.append(hook.weights[0])
    assert all(b > a for a, b in zip(seen, seen[1:], strict=False)) and seen[-1] > 0.9
    assert hook.scores[1] == 0.0  # the proxy is no worse than the reference there: clipped at 0


def test_per_token_losses_average_to_the_models_loss() -> None:
    torch.manual_seed(1)
    logits = torch.randn(2, 6, 9)
    ids = torch.randint(0, 9, (2, 6))
    losses, mask = token_cross_entropy(logits, ids, "gpt2")
    ref = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 9), ids[:, 1:].reshape(-1))
    assert float(losses[mask].mean()) == pytest.approx(float(ref), rel=1e-6)


# ------------------------------------------------------------------------------------ DoReMi in training
class _Killed(BaseException):
    """The runner process dies (nothing of the runner catches it)."""


def test_doremi_proxy_resumes_to_the_same_weights(stores: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(stores, checkpoint_every=3)
    ctx = _ctx(cfg, tmp_path / "out")
    (ref,), (proxy,) = mixing_method("doremi").selection_stages(ctx)
    assert ref.kind == "doremi_reference" and proxy.kind == "doremi_proxy" and proxy.hook.reference_run == ref.run_id
    assert ref.sequences == proxy.sequences and ref.run_id != proxy.run_id  # same data, the hook makes the id
    runs = tmp_path / "out" / "runs"
    done = train_mod.train_run(cfg, ref, ctx.domains, runs / ref.run_id, progress=False)
    assert done.step_hook is None and (runs / ref.run_id / "final_ckpt").is_dir()  # the proxy reads it
    full = train_mod.train_run(cfg, proxy, ctx.domains, runs / proxy.run_id, progress=False).to_json()
    hook = full["step_hook"]
    assert hook["updates"] == full["steps"] == 32 and sum(hook["average_weights"].values()) == pytest.approx(1.0)
    assert not (runs / proxy.run_id / "ckpt").exists()  # a DoReMi proxy keeps no checkpoint
    cut = tmp_path / "cut" / proxy.run_id
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / ref.run_id).symlink_to(runs / ref.run_id)
    with dies_after_checkpoints(monkeypatch, 1) as saves:  # the process dies right after its first checkpoint
        train_mod.train_run(cfg, proxy, ctx.domains, cut, progress=False)
    assert saves == [3]
    resumed = train_mod.train_run(cfg, proxy, ctx.domains, cut, progress=False).to_json()
    assert resumed["resumed_at"] == [3] and resumed["step_hook"]["updates"] == 32
    for name in ("weights", "average_weights", "scores"):
        for d, v in hook[name].items():
            assert resumed["step_hook"][name][d] == pytest.approx(v, abs=1e-6), (name, d)


def test_a_doremi_proxy_without_its_reference_says_so(stores: Path, tmp_path: Path) -> None:
    cfg = _config(stores)
    ctx = _ctx(cfg, tmp_path / "out")
    proxy = mixing_method("doremi").selection_stages(ctx)[1][0]
    with pytest.raises(FileNotFoundError, match="reference run"):
        train_mod.train_run(cfg, proxy, ctx.domains, tmp_path / "out" / "runs" / proxy.run_id, progress=False)


# ------------------------------------------------------------------------------------ swarm and inputs
def test_the_swarm_is_planned_as_content_hashed_runs(stores: Path, tmp_path: Path) -> None:
    cfg = _config(stores, target={"baselines": ["regmix", "mixing_law"]},
                  regmix={"swarm": {"runs": 5, "budget": 2048, "seed": 3}})
    ctx = _ctx(cfg, tmp_path)
    stages = selection_stages(selected_methods(cfg), ctx)
    assert len(stages) == 1 and len(stages[0]) == 5  # the two methods share one swarm
    swarm = stages[0]
    assert all(s.kind == "swarm" and s.total_tokens == 2048 and s.eval_points == 1 for s in swarm)
    assert len({s.run_id for s in swarm}) == 5 and len({tuple(s.sequences.values()) for s in swarm}) == 5
    again = selection_stages(selected_methods(cfg), _ctx(cfg, tmp_path))[0]
    assert [s.run_id for s in again] == [s.run_id for s in swarm]  # the same config plans the same ids
    other = _config(stores, target={"baselines": ["regmix"]}, regmix={"swarm": {"runs": 5, "budget": 2048, "seed": 4}})
    assert not {s.run_id for s in selection_stages(selected_methods(other), _ctx(other, tmp_path))[0]} & {
        s.run_id for s in swarm}
    # a smaller model for the swarm enters its ids (the model is part of the hashed settings)
    small = _config(stores, target={"baselines": ["regmix"]},
                    regmix={"swarm": {"runs": 5, "budget": 2048, "seed": 3, "overrides": {"n_embd": 16}}})
    small_ids = [s.run_id for s in selection_stages(selected_methods(small), _ctx(small, tmp_path))[0]]
    assert not set(small_ids) & {s.run_id for s in swarm}
    assert mixing_method("regmix").cost_runs(ctx) == swarm  # with a swarm, the proxies are not pooled by default


def test_method_runs_have_a_kind_of_their_own(stores: Path) -> None:
    cfg = _config(stores)
    d = inspect_domains(cfg)
    with pytest.raises(ValueError, match="run kind 'target'"):
        method_spec(cfg, d, "target", 4096, "x", {"a": 1.0}, 0)
    with pytest.raises(ValueError, match="unknown domains"):
        method_spec(cfg, d, "swarm", 4096, "x", {"web": 1.0}, 0)


@pytest.mark.parametrize(("overrides", "error", "needle"), [
    ({"regmix": {"swarm": {"runs": 0, "budget": 2048}}}, ValueError, "regmix.swarm.runs"),
    ({"regmix": {"swarm": {"budget": 2048}}}, ValueError, "'runs' and 'budget'"),
    ({"regmix": {"use_proxies": False}}, ValueError, "nothing to fit on"),
    ({"doremi": {"smoothing": 1.5}}, ValueError, "doremi.smoothing"),
    ({"doremi": {"reference": {"a": -1}}}, ValueError, "doremi.reference"),
])
def test_bad_method_settings_fail_in_the_config(stores: Path, overrides, error, needle) -> None:
    with pytest.raises(error, match=needle):
        _config(stores, **overrides)


@pytest.mark.parametrize(("overrides", "needle"), [
    ({"target": {"baselines": ["doremi"]}, "doremi": {"reference": "llama1"}},
     r"doremi.reference = 'llama1' does not fit the stores' domains"),
    ({"target": {"baselines": ["doremi"]}, "doremi": {"reference": {"a": 1, "web": 2}}}, "unknown domains"),
    ({"target": {"baselines": ["regmix"]}, "regmix": {"swarm": {"runs": 2, "budget": 2048}}},
     "'regmix' needs runs of at least 3 distinct mixtures"),
    ({"target": {"baselines": ["mixing_law"]}, "regmix": {"swarm": {"runs": 4, "budget": 2048}}},
     "'mixing_law' needs runs of at least 5 distinct mixtures"),
    ({"target": {"baselines": ["reference"], "reference_weights": "llama1"}}, "target.reference_weights"),
])
def test_bad_method_input_fails_before_training(stores: Path, tmp_path: Path, overrides, needle) -> None:
    runner = MixtureRunner(_config(stores, **overrides), tmp_path / "out", log=lambda _: None, progress=False)
    with pytest.raises(ValueError, match=needle):
        runner.run()
    assert not list((tmp_path / "out" / "runs").glob("*/result.json"))  # nothing trained
    assert not Ledger(tmp_path / "out", lock=False).records()  # nothing even registered


def test_paired_verdict_against_uniform() -> None:
    def runs(values: list[float]) -> dict[int, float]:
        return dict(enumerate(values))

    def verdict(diffs: list[float]) -> Verdict:
        return paired_verdict("doremi", runs([1.0 + d for d in diffs]), "uniform", runs([1.0] * len(diffs)))

    assert verdict([-0.1]).verdict == "cannot_judge"
    assert verdict([-0.10, -0.11, -0.09]).verdict == "better"
    assert verdict([0.10, 0.11, 0.09]).verdict == "worse"
    assert verdict([-0.1, 0.12, 0.01]).verdict == "not_distinguishable"
    two = verdict([-0.10, -0.12])  # 2 seeds: t(0.975, 1 df) = 12.71 standard errors, not 2
    assert two.verdict == "not_distinguishable" and two.ci_high is not None and two.ci_low is not None
    assert (two.ci_high - two.ci_low) / 2 == pytest.approx(12.7062 * 0.01, rel=1e-4)


# ------------------------------------------------------------------------------------------ end to end
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_method_end_to_end_and_a_rerun_trains_nothing(stores: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(stores, target={"baselines": ["uniform", "regmix", "mixing_law", "doremi"], "seeds": [0, 1]},
                  regmix={"swarm": {"runs": 6, "budget": 2048}, "use_proxies": True})
    out = tmp_path / "out"
    trained: list[str] = []
    real = train_mod.train_run

    def counting(config, spec, *args, **kwargs):
        trained.append(spec.run_id)
        if spec.kind == "swarm" and sum(s.kind == "swarm" for s in started) == 2 and not killed:
            killed.append(spec.run_id)
            raise _Killed  # the runner dies as its third swarm run starts
        started.append(spec)
        return real(config, spec, *args, **kwargs)

    started: list = []
    killed: list[str] = []
    monkeypatch.setattr(train_mod, "train_run", counting)
    with pytest.raises(_Killed):
        MixtureRunner(cfg, out, log=lambda _: None, progress=False).run()
    finished = {s.run_id for s in started}
    assert len(finished) == len(trained) - 1 and sum(s.kind == "swarm" for s in started) == 2
    trained.clear()
    started.clear()
    report = MixtureRunner(cfg, out, log=lambda _: None, progress=False).run()
    assert trained[0] == killed[0] and not finished & set(trained)  # nothing finished is trained again
    plan = json.loads((out / "plan.json").read_text())
    kinds = sorted(s["kind"] for s in plan["method_runs"])
    assert kinds == ["doremi_proxy", "doremi_reference"] + ["swarm"] * 6
    methods = json.loads((out / "fits" / "methods.json").read_text())
    for name in ("regmix", "mixing_law", "doremi"):
        assert methods[name]["skipped"] is None and sum(methods[name]["weights"].values()) == pytest.approx(1.0)
        assert set(report.targets[name].seeds) == {0, 1}
    fit_on = [s for s in plan["method_runs"] if s["kind"] == "swarm"] + plan["proxies"]["8192"]
    assert methods["regmix"]["cost_tokens"] == sum(sum(s["sequences"].values()) * 32 for s in fit_on)
    hook = json.loads((out / "runs" / methods["doremi"]["details"]["proxy_run"] / "result.json").read_text())
    assert methods["doremi"]["weights"] == hook["step_hook"]["average_weights"]
    comp = report.comparison
    assert comp is not None and list(comp.rows) == ["autoscale", "uniform", "regmix", "mixing_law", "doremi"]
    assert comp.rows["uniform"].cost.tokens == 0 and comp.rows["doremi"].cost.runs == 2
    assert comp.rows["doremi"].cost.tokens_ratio == pytest.approx(2 * 8192 / 16384)
    for name in ("regmix", "mixing_law", "doremi", "autoscale"):
        row = comp.rows[name]
        assert set(row.per_seed) == {"0", "1"} and row.worst_domain in report.domains
        assert row.vs_uniform["verdict"] in ("better", "worse", "not_distinguishable") and row.cost.wall_s > 0
    text = (out / "report.md").read_text()
    assert "## Mixing methods compared" in text and "beyond seed noise" in text.lower()
    assert (out / "plots" / "mixes.png").stat().st_size > 0
    on_disk = json.loads((out / "report.json").read_text())
    assert Report.from_json(on_disk).to_json() == on_disk
    assert set(report.targets) == {"autoscale", "uniform", "regmix", "mixing_law", "doremi"}  # no method run


# ------------------------------------------------------------------------------------------ the examples
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
REDPAJAMA = ("common_crawl", "c4", "github", "wikipedia", "book", "arxiv", "stackexchange")


def test_the_gpt2_large_comparison_passes_a_dry_run_with_its_costs(tmp_path: Path) -> None:
    from helpers_store import write_synthetic_stores

    from autoscale_data.runner.config import config_to_dict, load_config

    pytest.importorskip("deepspeed")
    raw = config_to_dict(load_config(EXAMPLES / "gpt2-large-comparison.yaml"))
    raw.pop("base_dir")
    raw["domains"] = str(write_synthetic_stores(tmp_path / "stores", dict.fromkeys(REDPAJAMA, 20_000)))
    raw = {k: v for k, v in raw.items() if v is not None}
    cfg = config_from_dict(raw, tmp_path)
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    text = runner.describe()
    assert "total: " in text and "estimated" in text
    costs = {line.split()[0]: line for line in text.splitlines()[text.splitlines().index(next(
        ln for ln in text.splitlines() if ln.startswith("cost of choosing"))) + 1:]}
    # 15 DDO runs at 0.3B and at 1.2B; regmix/mixing_law fit on the 15 at N2; DoReMi's two runs at N2
    assert " 30 runs" in costs["autoscale"] and " 15 runs" in costs["regmix"] and " 2 runs" in costs["doremi"]
    assert costs["doremi"].split()[-1] == "x0.80"  # 2 x 1.2B tokens against a 3B target
    mixes = runner.fixed_target_mixes()
    assert mixes["reference"]["common_crawl"] == pytest.approx(0.67) and mixes["reference"]["book"] == pytest.approx(0.045)


def test_the_cpu_comparison_example_plans_every_method(tmp_path: Path) -> None:
    from autoscale_data.demo import prepare_synthetic_stores
    from autoscale_data.runner.config import load_config

    prepare_synthetic_stores(tmp_path / "data" / "tiny-demo", bytes_per_domain=60_000)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "compare-cpu.yaml").write_text((EXAMPLES / "compare-cpu.yaml").read_text())
    cfg = load_config(tmp_path / "examples" / "compare-cpu.yaml")
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    stages = runner.selection_specs()
    assert [sorted({s.kind for s in st}) for st in stages] == [["doremi_reference", "swarm"], ["doremi_proxy"]]
    assert {m.name for m in selected_methods(cfg)} == {"autoscale", "uniform", "natural", "ddo_n2", "regmix",
                                                        "mixing_law", "doremi"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigkill_in_the_doremi_proxy_then_rerun_gives_the_same_weights(stores: Path, tmp_path: Path) -> None:
    import hashlib
    import subprocess
    import sys

    raw = tiny_config(stores, target={"baselines": ["doremi", "regmix"]}, checkpoint_every=4,
                      regmix={"swarm": {"runs": 4, "budget": 2048}, "use_proxies": True})
    cfg = config_from_dict(raw)
    ctx = _ctx(cfg, tmp_path / "out")
    (ref,), (proxy,) = mixing_method("doremi").selection_stages(ctx)
    cfg_path = tmp_path / "kill.json"
    cfg_path.write_text(json.dumps(raw))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "autoscale_data.cli", "run", str(cfg_path), "--out", str(out), "--no-progress"]
    env = kill_runner_when(cmd, (out / "runs" / proxy.run_id / "ckpt" / "latest.json").exists, timeout=600)
    assert not (out / "runs" / proxy.run_id / "result.json").exists()  # killed inside the proxy
    events = list(Ledger(out, lock=False).events())
    finished = {e.run_id: hashlib.sha256((out / "runs" / e.run_id / "result.json").read_bytes()).hexdigest()
                for e in events if e.status == "done"}
    assert ref.run_id in finished and sum(1 for s in json.loads((out / "plan.json").read_text())["method_runs"]
                                          if s["kind"] == "swarm" and s["run_id"] in finished) == 4
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    for run_id, digest in finished.items():  # kept byte for byte, never trained again
        assert hashlib.sha256((out / "runs" / run_id / "result.json").read_bytes()).hexdigest() == digest
    records = Ledger(out, lock=False).records()
    assert all(records[i].attempts == 1 for i in finished) and records[proxy.run_id].status == "done"
    resumed = json.loads((out / "runs" / proxy.run_id / "result.json").read_text())
    assert resumed["resumed_at"] and resumed["resumed_at"][0] >= 4
    # the same proxy trained without interruption (beside the same reference) ends at the same weights
    (tmp_path / "clean").mkdir()
    (tmp_path / "clean" / ref.run_id).symlink_to(out / "runs" / ref.run_id)
    clean = train_mod.train_run(cfg, proxy, ctx.domains, tmp_path / "clean" / proxy.run_id, progress=False).to_json()
    methods = json.loads((out / "fits" / "methods.json").read_text())
    for d, v in clean["step_hook"]["average_weights"].items():
        assert methods["doremi"]["weights"][d] == pytest.approx(v, abs=1e-6)


def test_a_method_may_return_its_own_target_specs(stores: Path, tmp_path: Path) -> None:
    from autoscale_data.runner.mixes.methods import choose_all

    cfg = _config(stores)
    own = _Own(_OWN)
    mixes, targets, records = choose_all([own], _ctx(cfg, tmp_path))
    assert [t.seed for t in targets] == [0, 1] and mixes["own"] == targets[0].weights
    assert records[0].cost_tokens == 0 and records[0].skipped is None
    with pytest.raises(ValueError, match="exactly one of"):
        TargetChoice()


class _Own(MixingMethod):
    """A method declared outside the package, whose target runs carry their own settings."""

    def choose(self, ctx: MethodContext) -> TargetChoice:
        return TargetChoice(specs=tuple(target_spec(ctx.config, ctx.domains, self.name, {"a": 0.5, "b": 0.5}, s)
                                        for s in (0, 1)))


_OWN = MethodDeclaration("own", "a method whose target runs carry their own settings", OWN_RUNS, 4,
                         f"{__name__}._Own")


def test_a_registered_method_is_a_baseline_the_config_and_the_plan_accept(stores: Path) -> None:
    """Declaring a method in the registry is all it takes for ``target.baselines`` to name it."""
    with pytest.raises(ValueError, match="'own'"):
        _config(stores, target={"budget": 65536, "baselines": ["own"]})
    registry.register_method(_OWN)
    try:
        cfg = _config(stores, target={"budget": 65536, "baselines": ["own", "uniform"]})
        assert [m.name for m in selected_methods(cfg)] == ["autoscale", "uniform", "own"]
        assert isinstance(mixing_method("own"), _Own) and "own" in registry.baselines()
    finally:
        registry.MIXING_METHODS.pop("own")
    with pytest.raises(ValueError, match="is AutoScale itself"):
        registry.register_method(dataclasses.replace(_OWN, name="autoscale"))
    with pytest.raises(ValueError, match="names no importable object"):
        registry.load("autoscale_data.runner.mixes.methods.NoSuchMethod")
