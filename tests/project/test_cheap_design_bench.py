"""The cheap-design benchmark (``benchmarks/cheap_design.py``): its cost arithmetic (planned, no training), its
table's structure, and its ``--quick`` run end to end (slow)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys

import pytest
from paths import BENCHMARKS

from autoscale_data.demo import demo_config
from autoscale_data.runner.describe import proxy_costs
from autoscale_data.runner.planning.data import DomainInfo

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("cheap_design", BENCHMARKS / "cheap_design.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["cheap_design"] = mod  # its dataclass resolves its module
    spec.loader.exec_module(mod)
    return mod


def _domains(names: tuple[str, ...], vocab: int) -> DomainInfo:
    return DomainInfo(names=names, paths={d: d for d in names}, train_tokens=dict.fromkeys(names, 10**9),
                      val_tokens=dict.fromkeys(names, 10**5), fingerprints=dict.fromkeys(names, ""),
                      vocab_size=vocab, eos_id=0, tokenizer="")


def test_cost_is_the_dry_runs_and_scales_with_flops_per_token(bench, tmp_path) -> None:
    settings = bench.quick_settings()
    today = demo_config(tmp_path, settings=settings)
    d = _domains(settings.domains, settings.vocab_size)
    small = dataclasses.replace(today, ddo=dataclasses.replace(today.ddo, proxy_model=bench.QUICK_PROXIES[0]))
    n1, n2 = settings.budgets
    runs, tokens, flops, target = bench.design_cost(today, d, (n1, n2))
    two, _ = proxy_costs(today, d)  # what the dry run prints
    assert (runs, tokens, flops, target) == (two.runs, two.tokens, pytest.approx(two.flops), pytest.approx(two.target_flops))
    s_runs, s_tokens, s_flops, s_target = bench.design_cost(small, d, (n1, n2))
    assert (s_runs, s_tokens, s_target) == (runs, tokens, target)  # same design, same target run
    ratio = bench._fpt(today, d) / bench._fpt(small, d)
    assert 4 <= ratio <= 8 and s_flops == pytest.approx(flops / ratio)
    n2_runs, n2_tokens, _, _ = bench.design_cost(today, d, (n2,))
    assert n2_runs == runs // 2 and n2_tokens < tokens  # DDO(N2) needs N2's runs only


def _row(bench, design: str, method: str, flops: float, losses: dict[int, float], ratio: float = 1.0):
    return bench.MixRow(design=design, method=method, proxy_model="(the target's)", flops_per_token_ratio=ratio,
                        budgets=(10, 20) if flops else (), runs=4 if flops else 0, proxy_tokens=100 if flops else 0,
                        proxy_flops=flops, target_flops=50.0, weights={"a": 0.6, "b": 0.4}, losses=losses)


def test_the_table_has_one_row_per_mix_with_cost_and_paired_verdicts(bench) -> None:
    rows = [_row(bench, "today", "autoscale", 400.0, {0: 2.00, 1: 2.02}),
            _row(bench, "today", "ddo_n2", 200.0, {0: 2.00, 1: 2.02}),
            _row(bench, "today", "uniform", 0.0, {0: 2.10, 1: 2.13}),
            _row(bench, "proxy 1x64", "autoscale", 80.0, {0: 2.01, 1: 2.04}, ratio=5.0)]
    assert rows[0].target_runs == 8.0 and rows[3].target_runs == pytest.approx(1.6)
    md = bench.markdown(rows).splitlines()
    assert len(md) == 2 + len(rows)
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in md]
    assert all(len(c) == len(cells[0]) == 12 for c in cells)
    assert [c[6] for c in cells[2:]] == ["8.00", "4.00", "0.00", "1.60"]
    assert cells[4][10].startswith("+0.1050 [") and cells[4][11] == "—"  # uniform vs DDO(N2); itself
    assert cells[5][10].startswith("+0.0150 [") and cells[5][10].endswith("not distinguishable")
    with pytest.raises(ValueError, match="target_flops = 0"):
        bench.MixRow(**{**dataclasses.asdict(rows[2]), "target_flops": 0})
    v = bench.verdicts(rows)
    assert v[3]["vs_today_ddo_n2"]["verdict"] == "not_distinguishable" and "vs_today_uniform" in v[3]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_run_end_to_end(bench, tmp_path, capsys) -> None:
    assert bench.main(["--out", str(tmp_path), "--quick", "--quiet"]) == 0
    result = json.loads((tmp_path / "cheap_design.json").read_text())
    rows = {(r["design"], r["method"]): r for r in result["rows"]}
    assert set(rows) == {("today", "autoscale"), ("today", "ddo_n2"), ("today", "uniform"),
                         ("proxy 1x16", "autoscale"), ("proxy 1x16", "ddo_n2")}
    for r in rows.values():
        assert sorted(r["losses"]) == ["0", "1"]  # two target seeds each
        assert r["target_runs"] == pytest.approx(r["proxy_flops"] / r["target_flops"])
        assert sum(r["weights"].values()) == pytest.approx(1.0)
    today, small = rows[("today", "autoscale")], rows[("proxy 1x16", "autoscale")]
    assert small["proxy_tokens"] == today["proxy_tokens"] and small["runs"] == today["runs"]
    assert small["proxy_flops"] * small["flops_per_token_ratio"] == pytest.approx(today["proxy_flops"])
    assert rows[("today", "uniform")]["proxy_flops"] == 0
    table = (tmp_path / "cheap_design.md").read_text()
    assert table.count("\n| today |") == 3 and table.count("\n| proxy 1x16 |") == 2
    assert "| proxy 1x16 |" in capsys.readouterr().out
