"""Repetition-matched proxies (``ddo.repetition: match``): pool sizing on a plan with known answers,
the ids and the dry run, the errors before training, and the proxies' real streams."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.describe import run_list_notes
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import DomainInfo, inspect_domains
from autoscale_data.runner.planning.repetition import (
    DomainRepetition,
    proxy_pools,
    repetition_problems,
    repetition_records,
    target_epochs,
)
from autoscale_data.runner.planning.specs import (
    RunSpec,
    ddo_proxy_specs,
    proxy_dataset_options,
    supply_problems,
    target_spec,
)

L = 32


def _domains(small_tokens: int = 20_000) -> DomainInfo:
    names = ("big", "small")
    tokens = {"big": 1_000_000, "small": small_tokens}
    return DomainInfo(names=names, paths={n: f"/nowhere/{n}" for n in names}, train_tokens=tokens,
                      val_tokens=dict.fromkeys(names, 2048), fingerprints=dict.fromkeys(names, "0" * 16),
                      vocab_size=257, eos_id=256, tokenizer="bytes")


def _config(repetition: str = "match", max_epochs: float | None = 8.0, **ddo: object):
    # target 262,144 tokens = 8,192 sequences of 32; N1 = 512 and N2 = 1,024 sequences (1/16 and 1/8)
    raw = tiny_config("/nowhere", ddo={"budgets": [16384, 32768], "repetition": repetition, **ddo},
                      target={"budget": 262_144, "baselines": ["uniform"]})
    if max_epochs is not None:
        raw["max_epochs"] = max_epochs
    return config_from_dict(raw)


def test_pools_scale_with_the_budget_and_match_the_target_epochs_at_every_mix() -> None:
    cfg, dom = _config(), _domains()
    # small: 625 sequences; 625/16 = 39.06 -> 39 and 625/8 = 78.1 -> 78; big: 31,250 -> 1,953 and 3,906
    assert proxy_pools(cfg, dom, 16384) == {"big": 1953, "small": 39}
    assert proxy_pools(cfg, dom, 32768) == {"big": 3906, "small": 78}
    assert target_epochs(cfg, dom, {"big": 0.5, "small": 0.5}) == {"big": 4096 / 31250, "small": 4096 / 625}
    for spec in ddo_proxy_specs(cfg, dom, 16384) + ddo_proxy_specs(cfg, dom, 32768):
        assert spec.pools == proxy_pools(cfg, dom, spec.scale)
        scale = 8192 / (spec.scale // L)  # the run's tokens of each domain scaled to the target budget
        for d, size in spec.pools.items():
            unique = dom.train_tokens[d] // L
            assert spec.sequences[d] / size == pytest.approx(spec.sequences[d] * scale / unique, rel=0.02)
        if spec.label == "base":  # the base run's mix at the target repeats each domain as this proxy does
            at_target = target_epochs(cfg, dom, spec.weights)
            assert all(spec.sequences[d] / n == pytest.approx(at_target[d], rel=0.02) for d, n in spec.pools.items())
    recs = {r.domain: r for r in repetition_records(cfg, dom)}
    assert recs["small"].target_epochs == pytest.approx(6.5536)  # 4,096 of 625 sequences (uniform base)
    assert recs["small"].proxy_epochs == {16384: 256 / 39, 32768: 512 / 78}
    assert recs["small"].pools == {16384: 39, 32768: 78} and recs["small"].unique_tokens == 20_000
    assert DomainRepetition.from_json(recs["small"].to_json()) == recs["small"]
    assert not repetition_problems(cfg, dom)


def test_off_by_default_and_ids_record_the_pools() -> None:
    dom = _domains()
    off, on = _config("off"), _config()
    assert config_from_dict(tiny_config("/x")).ddo.repetition == "off"
    assert proxy_pools(off, dom, 16384) == {} and not repetition_problems(off, dom)
    plain, pooled = ddo_proxy_specs(off, dom, 16384), ddo_proxy_specs(on, dom, 16384)
    assert all(s.pools is None and "pools" not in s.to_json() for s in plain)
    assert not {s.run_id for s in plain} & {s.run_id for s in pooled}
    assert [s.sequences for s in plain] == [s.sequences for s in pooled]
    assert RunSpec.from_json(pooled[0].to_json()) == pooled[0]
    # the target runs are the same runs either way
    assert target_spec(off, dom, "uniform", {"big": 1, "small": 1}, 0).run_id == target_spec(
        on, dom, "uniform", {"big": 1, "small": 1}, 0).run_id


def test_bad_input_is_refused_before_training() -> None:
    with pytest.raises(ValueError, match=r"ddo.repetition = 'sometimes' is invalid: expected one of \('off', 'match'\)"):
        _config("sometimes")
    # 5 epochs allowed, the uniform base mix needs 6.55 of "small" at the target
    lines = repetition_problems(_config(max_epochs=5.0), _domains())
    assert len(lines) == 1 and "domain 'small' cannot supply the target even with max_epochs 5.0" in lines[0]
    assert any("cannot supply the target" in x for x in supply_problems(_config(max_epochs=5.0), _domains(), []))
    # without max_epochs the target cannot repeat at all
    assert "cannot supply the target" in repetition_problems(_config(max_epochs=None), _domains())[0]
    # 160 tokens = 5 sequences: 5/16 of a sequence at N1 is no pool at all
    tiny = _domains(small_tokens=160)
    with pytest.raises(ValueError, match=r"'small''s pool at 16,384 tokens would hold 0.31 sequences"):
        proxy_pools(_config(max_epochs=1000.0), tiny, 16384)
    assert "would hold 0.31 sequences" in repetition_problems(_config(max_epochs=1000.0), tiny)[0]


def test_dataset_options_of_a_pooled_proxy() -> None:
    cfg, dom = _config(), _domains()
    spec = next(s for s in ddo_proxy_specs(cfg, dom, 16384) if s.label == "small x3")
    opts = proxy_dataset_options(spec, cfg.max_epochs)
    assert opts["pool"] == {"big": 1953 * L, "small": 39 * L}
    assert opts["max_epochs"]["small"] == pytest.approx(spec.sequences["small"] / 39)  # ~19.7 > the target's 8
    assert opts["max_epochs"]["big"] == 8.0
    plain = target_spec(cfg, dom, "uniform", {"big": 1, "small": 1}, 0)
    assert proxy_dataset_options(plain, 8.0) == {"max_epochs": 8.0}


def test_matched_proxy_streams_repeat_as_the_target_does(tmp_path: Path) -> None:
    stores = tiny_stores(tmp_path / "stores", ("a", "b"), num_tokens=40_000)
    raw = tiny_config(stores, ddo={"budgets": [4096, 8192], "repetition": "match"},
                      target={"budget": 131_072, "baselines": ["uniform"]}, max_epochs=4.0)
    cfg = config_from_dict(raw)
    dom = inspect_domains(cfg)
    for spec in ddo_proxy_specs(cfg, dom, 4096)[:3]:
        ds = ScaleAwareMixtureDataset(dom.paths, spec.weights, spec.total_tokens, L, spec.seed, verify="size",
                                      **proxy_dataset_options(spec, cfg.max_epochs))
        assert ds.sequences_per_domain == spec.sequences and ds.config["pools"] == spec.pools
        drawn = Counter(item["domain"] for item in ds)
        seen = Counter((item["domain"], item["seq_index"]) for item in ds)
        for i, d in enumerate(dom.names):  # every pool member used floor or ceil(draws / pool) times
            uses = [c for (j, _), c in seen.items() if j == i]
            assert len(uses) == min(spec.pools[d], drawn[i])
            assert max(uses) - min(uses) <= 1
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    text = runner.describe()
    assert "REPETITION matched" in text and "target 1.64 epochs at the base mix (cap 4)" in text
    assert "beyond max_epochs at the target" in text
    notes = run_list_notes(config_from_dict({**raw, "ddo": {"budgets": [4096, 8192]}}), dom, tmp_path / "o2", [])
    assert any(n.startswith("REPETITION: the target repeats a 1.64 epochs uniform") for n in notes)


def test_mix_epochs_are_written_flagged_and_reported(tmp_path: Path) -> None:
    from autoscale_data.runner import layout
    from autoscale_data.runner.planning.repetition import repetition_md, write_mix_epochs

    cfg, dom = _config(), _domains()
    lines: list[str] = []
    at_cap = 5000 / 8192  # 5,000 sequences of "small": exactly 8 epochs of its 625
    mixes = {"uniform": {"big": 0.5, "small": 0.5}, "short": {"big": 0.3, "small": 0.7},
             "capped": {"big": 1 - at_cap, "small": at_cap}, "light": {"big": 0.9, "small": 0.1}}
    record = write_mix_epochs(cfg, dom, mixes, tmp_path, log=lines.append)
    assert (tmp_path / layout.REPETITION).is_file() and record["matched"]
    small = {label: next(r for r in rows if r["domain"] == "small") for label, rows in record["mixes"].items()}
    assert small["uniform"]["epochs"] == pytest.approx(6.5536) and small["light"]["epochs"] < 8
    assert small["short"]["short"] and small["capped"]["at_cap"] and not small["capped"]["short"]
    assert not small["uniform"]["at_cap"] and not small["light"]["short"]
    assert len(lines) == 2
    assert "short: domain 'small' cannot supply its share: 9.17 epochs" in lines[0]
    assert "capped: domain 'small' is used up to its epoch cap (8 of 8 epochs)" in lines[1]
    md = "\n".join(repetition_md(record))
    assert "## Repetition at the target" in md and "| uniform | 0.13 ep (100%) | 6.55 ep (" in md
    assert "- proxy pools of small: 16,384 tokens: 39 sequences (6.56 epochs in the base run), 32,768 tokens: 78" in md
    plain = write_mix_epochs(_config("off"), dom, mixes, tmp_path / "off", log=lambda _: None)
    assert plain["proxies"] == [] and "Proxies: plain" in "\n".join(repetition_md(plain))
    assert repetition_md(None) == []


def test_the_report_carries_the_repetition_record(tmp_path: Path) -> None:
    from autoscale_data.runner import Report
    from autoscale_data.runner.planning.repetition import write_mix_epochs

    record = write_mix_epochs(_config(), _domains(), {"uniform": {"big": 0.5, "small": 0.5}}, tmp_path,
                              log=lambda _: None)
    report = Report(out_dir="x", domains=["big", "small"], repetition=record)
    again = Report.from_json(report.to_json())
    assert again.repetition == record and "repetition" not in Report(out_dir="x").to_json()


def _law_tables(cfg, dom: DomainInfo) -> dict:
    """Each budget's DDO proxies with losses from a law in effective tokens (per domain, against the unique
    tokens the run drew from: its pool or the whole domain)."""
    from autoscale_data.solver import Run, RunTable
    from autoscale_data.solver.repetition import effective_tokens

    a, b = {"big": 0.5, "small": 0.2}, {"big": 0.4, "small": 0.9}
    tables = {}
    for n in cfg.ddo.budgets:
        runs = []
        for spec in ddo_proxy_specs(cfg, dom, n):
            unique = {d: (spec.pools or {}).get(d, dom.train_tokens[d] // L) * L for d in dom.names}
            loss = 2.0 + sum((float(effective_tokens(spec.sequences[d] * L, unique[d])) / n + a[d]) ** -b[d]
                             for d in dom.names)
            runs.append(Run(spec.run_id, tokens={d: float(v * L) for d, v in spec.sequences.items()},
                            loss={"all": loss}, seed=spec.seed, label=spec.label))
        tables[n] = RunTable(runs)
    return tables


def test_the_effective_token_law_sets_the_mix_with_match_and_is_reported_otherwise(tmp_path: Path) -> None:
    from autoscale_data.runner.planning.repetition import RepetitionLaw, repetition_law
    from autoscale_data.solver.ddo import DDOOptions

    dom = _domains()
    options = DDOOptions(objective="mean_loss", min_weight=0.02)
    raw_mix = {"big": 0.6, "small": 0.4}  # small: 3,277 of 625 sequences at the target = 5.2 epochs
    summary = {"method": "robust", "weights": dict(raw_mix), "budget_tokens": 262_144.0}  # projection.json's keys
    cfg = _config()
    lines: list[str] = []
    out = repetition_law(cfg, dom, _law_tables(cfg, dom), options, summary, log=lines.append)
    law = RepetitionLaw.from_json(out["repetition_law"])
    assert law.used and law.error is None and law.method == "robust" and law.raw_law_weights == raw_mix
    assert out["weights"] == law.weights != raw_mix and sum(law.weights.values()) == pytest.approx(1.0)
    assert sorted(law.optima) == [16384, 32768]
    for n, opt in law.optima.items():  # each budget's optimum spends its raw tokens, from the unrounded pools
        assert sum(opt["allocation_tokens"].values()) == pytest.approx(n, rel=1e-9)
        assert opt["unique"]["small"] == pytest.approx(20_000 * n / 262_144)  # 39.06 / 78.1 sequences of 32
    proj = law.projection
    assert proj is not None and sum(proj["allocation_tokens"].values()) == pytest.approx(262_144, rel=1e-9)
    assert proj["epochs"]["small"] <= 8.0 + 1e-9 and proj["epochs"]["small"] > 1.0
    assert lines and "sets the target mix" in lines[0]
    assert out["warnings"] == proj["warnings"]  # a domain held at its cap is flagged in projection.json
    assert RepetitionLaw.from_json(law.to_json()) == law
    # fits/repetition.json carries it and the report's section says which law set the mix
    import json

    from autoscale_data.runner.planning.repetition import repetition_md, write_mix_epochs

    fits = tmp_path / "fits"
    fits.mkdir()
    (fits / "projection.json").write_text(json.dumps(out))
    record = write_mix_epochs(cfg, dom, {"autoscale": law.weights}, fits, log=lambda _: None)
    assert record["law"] == out["repetition_law"]
    assert "- law in effective tokens (sets AutoScale's mix): big " in "\n".join(repetition_md(record))
    # plain proxies: reported only, and only where the target mix repeats a domain
    off = _config("off")
    reported = repetition_law(off, dom, _law_tables(off, dom), options, summary, log=lambda _: None)
    assert reported["weights"] == raw_mix and reported["repetition_law"]["used"] is False
    assert reported["repetition_law"]["weights"]
    fresh = {"method": "robust", "weights": {"big": 0.99, "small": 0.01}}
    assert repetition_law(off, dom, _law_tables(off, dom), options, fresh, log=lambda _: None) == fresh
    # a failure is recorded and logged, and the raw-token mix stands
    broken = {n: t for n, t in _law_tables(cfg, dom).items() if n == 16384}
    failed = repetition_law(cfg, dom, broken, options, summary, log=lines.append)
    assert failed["weights"] == raw_mix and failed["repetition_law"]["error"] and "could not" in lines[-1]


def test_a_projection_file_that_is_not_its_record_is_an_error_naming_it(tmp_path: Path) -> None:
    from autoscale_data.runner.planning.repetition import write_mix_epochs

    def write(fits: Path) -> dict:
        return write_mix_epochs(_config(), _domains(), {"uniform": {"big": 0.5, "small": 0.5}}, fits, log=lambda _: None)

    assert "law" not in write(tmp_path / "none")  # no projection.json: no law, no error
    for name, text, why in (("bad", '{"weights": "big"}', "'weights' = 'big' is invalid"), ("torn", "{", "not valid JSON")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "projection.json").write_text(text)
        with pytest.raises(ValueError, match=rf"{name}/projection.json' is not a projection record.*{why}"):
            write(tmp_path / name)
