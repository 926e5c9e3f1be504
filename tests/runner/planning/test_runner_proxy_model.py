"""A proxy model of its own (``ddo.proxy_model``, ``ddo.proxy_lr``): unset, every run id is what it was; set, the
proxies' specs carry it (their ids change, the targets' do not), they train with it, its size and learning rate
are checked before any training, and the dry run and the report price the proxies in FLOPs against one target
run (checked against a hand computation)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.describe import proxy_costs
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import ddo_proxy_specs

#: The proxy model of these tests: half the width of tiny_config's target (1 layer, 32 wide, 2 heads).
SMALL = {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 16, "n_head": 2}}


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores", ("a", "b", "c"))


def _plan(cfg, out: Path) -> dict[str, list]:
    """Every run the plan knows before the fits, by kind: DDO proxies, the methods' own runs, fixed targets."""
    runner = MixtureRunner(cfg, out, log=lambda _: None, progress=False)
    return {"proxy": [s for specs in runner.proxy_specs().values() for s in specs],
            "method": [s for stage in runner.selection_specs() for s in stage],
            "target": runner.target_specs(runner.fixed_target_mixes())}


def _hand_flops_per_token(layers: int, width: int, vocab: int, seq_len: int) -> int:
    """6 x (12 L d^2 + V d) + 6 L T d: six FLOPs per parameter and token, plus attention over the context."""
    return 6 * (12 * layers * width * width + vocab * width) + 6 * layers * seq_len * width


def test_unset_or_the_targets_own_model_and_lr_plan_the_very_same_runs(stores: Path, tmp_path: Path) -> None:
    methods = {"target": {"baselines": ["uniform", "doremi", "regmix"]}, "regmix": {"swarm": {"runs": 3, "budget": 2048}}}
    plain = config_from_dict(tiny_config(stores, **methods))
    same = config_from_dict(tiny_config(stores, ddo={"proxy_model": tiny_config(stores)["model"], "proxy_lr": 3e-3},
                                        **methods))
    null = config_from_dict(tiny_config(stores, ddo={"proxy_model": None, "proxy_lr": None}, **methods))
    assert plain.ddo.proxy_model is None and plain.ddo.proxy_lr is None
    plans = [_plan(c, tmp_path / "out") for c in (plain, same, null)]
    for kind in ("proxy", "method", "target"):
        ids = [[s.run_id for s in p[kind]] for p in plans]
        assert ids[0] and ids[0] == ids[1] == ids[2], kind
    target = plans[0]["target"][0].settings
    for s in plans[0]["proxy"] + plans[0]["method"]:  # the paper's design: the proxies hash the target's model
        assert s.settings == target and "proxy_model" not in json.dumps(s.to_json())


def test_a_proxy_model_enters_the_proxies_specs_and_ids_and_no_target_s(stores: Path, tmp_path: Path) -> None:
    methods = {"target": {"baselines": ["uniform", "doremi", "regmix"]}, "regmix": {"swarm": {"runs": 3, "budget": 2048}}}
    plain = _plan(config_from_dict(tiny_config(stores, **methods)), tmp_path / "out")
    small = _plan(config_from_dict(tiny_config(stores, ddo={"proxy_model": SMALL, "proxy_lr": 1e-3}, **methods)),
                  tmp_path / "out")
    for s in small["proxy"] + small["method"]:  # DDO proxies, DoReMi's reference and proxy, RegMix's swarm
        model = s.settings.model
        assert model.preset == "gpt2-tiny" and (model.fields["n_layer"], model.fields["n_embd"]) == (1, 16)
        assert s.settings.optimizer.lr == 1e-3
        assert replace(s.settings.optimizer, lr=3e-3) == plain["target"][0].settings.optimizer  # only the lr
    for kind in ("proxy", "method"):
        assert not {s.run_id for s in small[kind]} & {s.run_id for s in plain[kind]}, kind
        assert [s.sequences for s in small[kind]] == [s.sequences for s in plain[kind]]  # the same design
    assert [s.run_id for s in small["target"]] == [s.run_id for s in plain["target"]]
    lr_only = _plan(config_from_dict(tiny_config(stores, ddo={"proxy_lr": 1e-3})), tmp_path / "out")
    assert {s.settings.model.fields["n_embd"] for s in lr_only["proxy"]} == {32}
    assert not {s.run_id for s in lr_only["proxy"]} & {s.run_id for s in plain["proxy"]}


def test_a_swarm_with_a_preset_of_its_own_keeps_it(stores: Path, tmp_path: Path) -> None:
    swarm = {"runs": 3, "budget": 2048, "overrides": {"n_layer": 1, "n_embd": 8, "n_head": 2}}
    cfg = config_from_dict(tiny_config(stores, ddo={"proxy_model": SMALL, "proxy_lr": 1e-3},
                                       target={"baselines": ["regmix"]}, regmix={"swarm": swarm}))
    runs = _plan(cfg, tmp_path / "out")["method"]
    assert {s.settings.model.fields["n_embd"] for s in runs} == {8}
    assert {s.settings.optimizer.lr for s in runs} == {1e-3}  # the proxies' learning rate


def test_a_preset_name_is_the_preset_as_is(stores: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, model={"preset": "gpt2-small", "overrides": {}},
                                       ddo={"proxy_model": "gpt2-tiny", "proxy_lr": "1e-4"}))
    assert (cfg.ddo.proxy_model.preset, cfg.ddo.proxy_model.overrides, cfg.ddo.proxy_lr) == ("gpt2-tiny", {}, 1e-4)
    fields = ddo_proxy_specs(cfg, inspect_domains(cfg), 4096)[0].settings.model.fields
    assert (fields["n_layer"], fields["n_embd"], fields["n_head"]) == (2, 128, 4)  # gpt2-tiny, not the target's


@pytest.mark.parametrize(("ddo", "needle"), [
    ({"proxy_model": "gpt2-huge"}, r"config ddo.proxy_model.preset = 'gpt2-huge' is invalid: expected one of"),
    ({"proxy_model": {"preset": "gpt2-nano"}}, r"ddo.proxy_model.preset = 'gpt2-nano' is invalid"),
    ({"proxy_model": {"overrides": {"n_layer": 1}}}, r"section 'ddo.proxy_model'.*preset"),
    ({"proxy_model": {"preset": "gpt2-tiny", "mlm_probability": 0.2}}, r"unknown keys \['mlm_probability'\]"),
    ({"proxy_model": {"preset": "gpt2-tiny", "overrides": [1]}}, r"ddo.proxy_model.overrides = \(1,\) is invalid"),
    ({"proxy_model": "bert-tiny"}, r"config ddo.proxy_model = 'bert-tiny' is invalid: expected a gpt2 preset"),
    ({"proxy_lr": 0}, r"config ddo.proxy_lr must be a positive finite number, got 0"),
    ({"proxy_lr": -1e-3}, r"config ddo.proxy_lr must be a positive finite number, got -0.001"),
    ({"proxy_lr": "fast"}, r"config ddo.proxy_lr must be a positive finite number, got 'fast'"),
])
def test_bad_proxy_settings_fail_in_the_config_naming_the_value(stores: Path, ddo: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        config_from_dict(tiny_config(stores, ddo=ddo))


def test_a_proxy_model_larger_than_the_target_is_refused_before_training(stores: Path, tmp_path: Path) -> None:
    wide = {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 64, "n_head": 2}}
    cfg = config_from_dict(tiny_config(stores, ddo={"proxy_model": wide}, target={"baselines": ["uniform"]}))
    vocab = inspect_domains(cfg).vocab_size
    mine, theirs = _hand_flops_per_token(1, 64, vocab, 32), _hand_flops_per_token(1, 32, vocab, 32)
    needle = (rf"config ddo.proxy_model = .*'n_embd': 64.* is invalid: expected a model no larger than model "
              rf"'gpt2-tiny': it takes {mine:,} training FLOPs per token, the target's {theirs:,} "
              rf"\(vocabulary {vocab}, seq_len 32\)")
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    with pytest.raises(ValueError, match=needle):
        runner.describe()  # the dry run
    with pytest.raises(ValueError, match=needle):
        runner.run()
    assert not list((tmp_path / "out").glob("runs/*"))  # nothing trained


def test_the_dry_run_prices_the_proxies_in_flops_against_one_target_run(stores: Path, tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, ddo={"proxy_model": SMALL, "proxy_lr": 1e-3},
                                       target={"baselines": ["uniform", "ddo_n2", "doremi"]}))
    domains = inspect_domains(cfg)
    vocab = domains.vocab_size
    per_proxy, per_target = _hand_flops_per_token(1, 16, vocab, 32), _hand_flops_per_token(1, 32, vocab, 32)
    two, three = proxy_costs(cfg, domains)
    # the two-budget design by hand: 2m+1 = 7 runs at each budget; the target run is 16,384 tokens
    proxy_tokens = sum(s.total_tokens for n in (4096, 8192) for s in ddo_proxy_specs(cfg, domains, n))
    assert (two.runs, two.tokens, two.target_tokens) == (14, proxy_tokens, 16384)
    assert two.flops == proxy_tokens * per_proxy and two.target_flops == 16384 * per_target
    hand = proxy_tokens * per_proxy / (16384 * per_target)
    assert two.target_runs == pytest.approx(hand) and two.token_ratio == pytest.approx(proxy_tokens / 16384)
    assert hand < 0.6 * two.token_ratio  # half the width: well under the tokens' ratio
    text = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False).describe()
    assert text.splitlines()[0].endswith("model gpt2-tiny, proxy model gpt2-tiny (n_layer=1, n_embd=16, n_head=2), "
                                         "proxy lr 0.001, backend torch x1")
    line = next(x for x in text.splitlines() if x.startswith("proxy cost against one target run"))
    assert line.startswith(f"proxy cost against one target run (16,384 tokens, {16384 * per_target:.3g} FLOPs; "
                           "proxy model gpt2-tiny (n_layer=1, n_embd=16, n_head=2), target model gpt2-tiny "
                           "(n_layer=1, n_embd=32, n_head=2)): ")
    assert (f"two budgets [4,096, 8,192]: 14 runs, {proxy_tokens:,} tokens (x{proxy_tokens / 16384:.2f}), "
            f"{proxy_tokens * per_proxy:.3g} FLOPs = {hand:.2f} target runs (this config)") in line
    lines = text.splitlines()
    costs = {ln.split()[0]: ln for ln in lines[lines.index(next(ln for ln in lines if ln.startswith("cost of choosing"))) + 1:]
             if ln.startswith("  ")}
    assert costs["autoscale"].split()[-1] == f"x{hand:.2f}"
    n2 = sum(s.total_tokens for s in ddo_proxy_specs(cfg, domains, 8192))
    assert costs["ddo_n2"].split()[-1] == f"x{n2 * per_proxy / (16384 * per_target):.2f}"
    assert costs["doremi"].split()[-1] == f"x{2 * 8192 * per_proxy / (16384 * per_target):.2f}"  # two runs at N2
    assert costs["uniform"].split()[-1] == "x0.00"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_proxies_train_the_proxy_model_at_the_proxy_lr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autoscale_data.runner.models import parameter_count
    from autoscale_data.runner.training import train as train_mod

    stores = tiny_stores(tmp_path / "stores", ("a", "b"))
    cfg = config_from_dict(tiny_config(stores, ddo={"proxy_model": SMALL, "proxy_lr": 1e-3},
                                       target={"baselines": ["uniform", "doremi"]}))
    trained: dict[int, set] = {}
    real = train_mod._optimizer

    def recording(model, optimizer, device):  # noqa: ANN001, ANN202
        trained.setdefault(parameter_count(model), set()).add(optimizer.lr)
        return real(model, optimizer, device)

    monkeypatch.setattr(train_mod, "_optimizer", recording)
    out = tmp_path / "out"
    report = MixtureRunner(cfg, out, log=lambda _: None, progress=False).run()
    plan = json.loads((out / "plan.json").read_text())
    proxies = [s for specs in plan["proxies"].values() for s in specs] + plan["method_runs"]
    params = {kind: {json.loads((out / "runs" / s["run_id"] / "result.json").read_text())["parameters"] for s in runs}
              for kind, runs in (("proxy", proxies), ("target", plan["targets"]))}
    (small,), (large,) = params["proxy"], params["target"]  # one model each
    assert small < large / 2
    assert trained == {small: {1e-3}, large: {3e-3}}
    assert set(report.targets) == {"autoscale", "uniform", "doremi"}  # DoReMi's proxy read its (small) reference
    vocab = inspect_domains(cfg).vocab_size
    ratio = _hand_flops_per_token(1, 16, vocab, 32) / _hand_flops_per_token(1, 32, vocab, 32)
    comp = report.comparison
    assert comp is not None and comp.target_flops == 16384 * _hand_flops_per_token(1, 32, vocab, 32)
    for name, runs in (("autoscale", [s for specs in plan["proxies"].values() for s in specs]),
                       ("doremi", plan["method_runs"])):
        tokens = sum(sum(s["sequences"].values()) * 32 for s in runs)
        assert comp.rows[name].cost.tokens_ratio == pytest.approx(tokens / 16384)
        assert comp.rows[name].cost.flops_ratio == pytest.approx(tokens / 16384 * ratio)
    md = (out / "report.md").read_text()
    assert "| x target tokens | proxy wall | x target wall | proxy FLOPs | x target FLOPs |" in md
    assert f" {comp.rows['autoscale'].cost.flops_ratio:.2f} |" in md
