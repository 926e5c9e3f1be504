"""The demo: its config, its table, and ``autoscale-data demo --quick`` end to end (the CI run)."""

from __future__ import annotations

import copy
import functools
import os
import subprocess
import sys
import time
import warnings
from dataclasses import replace

import pytest

from autoscale_data.cli import main
from autoscale_data.demo import DEMO_PRESETS, DemoSettings, demo_config, format_demo_table, run_demo
from autoscale_data.runner import Report


def test_presets_make_valid_runner_configs(tmp_path) -> None:
    for quick in (False, True):
        cfg = demo_config(tmp_path, quick=quick)
        s = DEMO_PRESETS["quick" if quick else "full"]
        assert cfg.ddo.budgets == s.budgets and cfg.target.budget == s.target
        assert cfg.model.preset == "gpt2-tiny" and cfg.backend == "torch"
        assert set(cfg.target.baselines) == {"uniform", "ddo_n2", "autoscale_anytime"}
        assert cfg.target.seeds == s.target_seeds
        assert cfg.resolve(cfg.domains) == (tmp_path / "data").resolve()
    assert len(DEMO_PRESETS["full"].domains) >= 4


@pytest.mark.parametrize("kwargs", [
    {"mode": "huge"}, {"domains": ("web",)}, {"domains": ("web", "wiki")},
    {"budgets": (20, 10)}, {"target": 10},
])
def test_settings_are_validated(kwargs) -> None:
    base = {"mode": "quick", "domains": ("web", "code"), "bytes_per_domain": 1000, "budgets": (100, 200),
            "target": 400}
    with pytest.raises(ValueError):
        DemoSettings(**{**base, **kwargs})


def test_a_directory_holds_one_demo_mode(tmp_path) -> None:
    (tmp_path / "demo.json").write_text('{"mode": "full"}')
    with pytest.raises(ValueError, match="needs its own directory"):
        run_demo(tmp_path, quick=True, log=lambda _: None)


@functools.cache
def _fit_files() -> tuple[dict, dict]:
    """A real DDO fit file and bootstrap file of two domains ``a`` and ``b`` (the tests set what the table reads)."""
    from autoscale_data.solver import DDOOptions, bootstrap_ddo, fit_ddo
    from autoscale_data.solver.synthetic import synthetic_ddo_runs

    runs = synthetic_ddo_runs({"a": 50.0, "b": 50.0}, [1.0, 2.0], [0.3, 0.4], multipliers=(3.0, 1.7, 1 / 1.7, 1 / 3),
                              seeds=2, noise=0.01)
    ddo = fit_ddo(runs, DDOOptions())
    return ddo.to_json(), bootstrap_ddo(runs, DDOOptions(), n_boot=20, point=ddo).to_json()


def _ddo(weights: dict, identified: bool | None = None) -> dict:
    obj = copy.deepcopy(_fit_files()[0]) | {"weights": weights}
    if identified is None:
        obj["identifiability"] = None
    else:
        obj["identifiability"]["identified"] = identified
    return obj


def _report() -> dict:
    """A report.json's content: what the table reads, the rest empty."""
    curve = {"tokens": [1.0], "mean": [1.0], "std": [0.0], "n": 1}
    losses = {"a": {"mean": 1.0, "std": 0.0, "n": 1}, "b": {"mean": 2.0, "std": 0.0, "n": 1}}
    return {
        "domains": ["a", "b"], "objective": "mean_loss", "out_dir": "/x", "name": "t", "failed_runs": [],
        "proxies": {}, "throughput": {"runs": 0, "devices": [], "train_hours": 0.0},
        "ddo": {"100": _ddo({"a": 0.6, "b": 0.4}, identified=False),
                "200": _ddo({"a": 0.55, "b": 0.45})},
        "bootstrap": {"100": copy.deepcopy(_fit_files()[1]) | {"distinguishable_from_base": False}},
        "projection": {"budget_tokens": 1000.0, "weights": {"a": 0.45, "b": 0.55}},
        "target_mixes": {"autoscale": {"a": 0.45, "b": 0.55}, "ddo_n2": {"a": 0.55, "b": 0.45},
                         "uniform": {"a": 0.5, "b": 0.5}},
        "targets": {m: {"losses": losses, "mean_loss": {"mean": v, "std": 0.0, "n": 1}, "tokens": 1000,
                        "weights": {"a": 0.5, "b": 0.5}, "seeds": [0], "curve": curve}
                    for m, v in (("autoscale", 1.5), ("uniform", 1.6), ("ddo_n2", 1.4))},
        "tokens_saved": {
            "uniform": {"status": "reached", "saved_fraction": 0.3, "baseline_final": 1.6,
                        "tokens_to_baseline_final": 700.0, "baseline_tokens": 1000.0},
            "ddo_n2": {"status": "not_reached", "saved_fraction": None, "baseline_final": 1.4,
                       "autoscale_final": 1.5, "baseline_saved_fraction": 0.2}},
        "missing_targets": [],
    }


def _table(report: dict, settings: DemoSettings | None = None) -> str:
    return format_demo_table(Report.from_json(report), settings)


def test_table_shows_weights_losses_and_savings_honestly() -> None:
    text = _table(_report(), DEMO_PRESETS["quick"])
    assert "DDO@100" in text and "AutoScale@1k" in text and "uniform" in text
    assert "0.450" in text and "0.600" in text  # projected and N1 weights
    assert "+30.0%" in text  # saving vs uniform
    assert "not reached" in text and "20.0% fewer tokens" in text  # a loss against DDO(N2) is shown as such
    assert "NOT distinguishable" in text
    ident = Report.from_json(_report()).ddo["100"].identifiability  # its summary is computed from its fields
    assert not ident.identified and f"at 100: {ident.summary}" in text
    report = _report()
    report["bootstrap"]["100"]["method"] = "consistent_fits"
    assert "bootstrap at 100: the runs carry no estimate of noise" in _table(report, DEMO_PRESETS["full"])
    assert "mean nothing" in text  # the quick preset says it is a smoke run
    assert "within seed noise" not in _table(_report(), DEMO_PRESETS["full"])
    assert "per seed" not in text and "Anytime" not in text  # one seed, no anytime run: nothing to show


def test_table_shows_seed_spread_and_the_anytime_comparison() -> None:
    report = _report()
    report["targets"]["autoscale"]["mean_loss"] = {"mean": 1.5, "std": 0.0123, "n": 2}
    report["tokens_saved_per_seed"] = {
        "uniform": {"0": {"status": "reached", "signed_fraction": 0.25},
                    "1": {"status": "not_reached", "signed_fraction": -0.05}},
        "ddo_n2": {"0": {"status": "not_reached", "signed_fraction": None},
                   "1": {"status": "reached", "signed_fraction": 0.1}}}
    diff = {"mean": -0.02, "std": 0.01, "n": 2}
    point = {"tokens": 500.0, "reference": {"mean": 1.52, "std": 0.0, "n": 2}, "other": {"mean": 1.5, "std": 0.01, "n": 2},
             "difference": diff}
    report["anytime_vs_fixed"] = {"available": True, "seeds": [0, 1], "points": [point]}
    text = _table(report, DEMO_PRESETS["full"])
    assert "1.5000 ± 0.0123" in text
    assert "per seed: s0 +25.0%, s1 -5.0%" in text and "per seed: s0 n/a, s1 +10.0%" in text
    assert "at    500 tokens: -0.0200 ± 0.0100" in text
    report["anytime_vs_fixed"] = {"available": False, "reason": "no mixture plan could be fitted"}
    assert "Anytime schedule: not available (no mixture plan could be fitted)" in _table(report)


def _check_first_demo_run(out, stdout: str, stderr: str) -> None:
    """What a first ``demo --quick`` prints and writes (both sizes below)."""
    assert "Mixture weights" in stdout and "Tokens saved" in stdout
    for name in ("report.md", "report.json", "plots/weights.png", "plots/curves.png", "fits/projection.json"):
        assert (out / name).is_file(), name
    trained = stdout.count("] done ")
    # 3m+1 proxies at two budgets (m = 3); fixed target mixes that coincide share a run; + the anytime run
    assert 2 * 10 + 1 <= trained <= 2 * 10 + 4
    assert "Anytime schedule" in stdout
    assert "dentified" in stdout  # the fits say whether these runs identify the weights
    assert "passes through every point" not in stderr  # its own design draws no warning
    assert "instead of" not in stderr  # nor does the rounding of its multipliers


@pytest.mark.heavy  # 2-5 min: test_demo_verb_end_to_end_and_resume is its sibling (the same verb, smaller sizes)
@pytest.mark.timeout(900)
def test_quick_demo_end_to_end_and_resume(tmp_path) -> None:
    out = tmp_path / "demo"
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "autoscale_data.cli", "demo", "--quick", "--out", os.fspath(out)]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=850)
    assert first.returncode == 0, first.stderr[-3000:]
    _check_first_demo_run(out, first.stdout, first.stderr)
    start = time.monotonic()
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=850)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "] done " not in second.stdout  # nothing trained again
    assert second.stdout.split("Mixture weights", 1)[1] == first.stdout.split("Mixture weights", 1)[1]
    assert time.monotonic() - start < 120  # loose: a resume only re-reads results


#: The quick preset's design (3 domains, 3m+1 runs a budget, the anytime run) on a 1-layer GPT with
#: 32-token sequences: budgets whose whole batches keep every multiplier within 5%.
_TINY_QUICK = replace(DEMO_PRESETS["quick"], bytes_per_domain=60_000, vocab_size=300, seq_len=32,
                      budgets=(4_096, 8_192), target=16_384, heldout_tokens=512, target_points=4,
                      model={"n_layer": 1, "n_embd": 32, "n_head": 2})


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_demo_verb_end_to_end_and_resume(tmp_path, monkeypatch, capsys) -> None:
    """``autoscale-data demo --quick`` in process, its preset swapped for :data:`_TINY_QUICK`: the same
    checks as the heavy test of the real preset, whose design is checked here without training."""
    assert demo_config(tmp_path / "real", quick=True).ddo.identifies_law  # the real preset's design
    monkeypatch.setitem(DEMO_PRESETS, "quick", _TINY_QUICK)
    out = tmp_path / "demo"

    def demo() -> tuple[str, str]:
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # every warning reaches stderr, however often it was raised before
            assert main(["demo", "--quick", "--out", os.fspath(out)]) == 0
        captured = capsys.readouterr()
        return captured.out, captured.err

    first, err = demo()
    _check_first_demo_run(out, first, err)
    second, _ = demo()
    assert "] done " not in second  # nothing trained again
    assert second.split("Mixture weights", 1)[1] == first.split("Mixture weights", 1)[1]
