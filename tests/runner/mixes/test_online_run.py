"""Online-mixing target runs in the runner (``target.baselines: [ado, odm]``): the method and step hook through
the runner's registry, the ``online:`` config section, the run's resume (in process and after a SIGKILL of the
runner), the plan-to-report path, and what is refused (domain pools, extending an online run)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from runner_helpers import kill_runner_when, tiny_config, tiny_stores

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.dataset.online import OnlineMixture
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.mixes.methods import MethodContext, mixing_method, selected_methods
from autoscale_data.runner.mixes.online_method import (
    OnlineHookSpec,
    OnlineMixingHook,
    make_controller,
    online_target_spec,
)
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import RunSpec, ddo_proxy_specs, target_spec
from autoscale_data.runner.training import train as train_mod
from autoscale_data.runner.training.hooks import make_step_hook

pytestmark = pytest.mark.timeout(300)

#: The verdicts against uniform with two seeds ("within noise" was renamed "not_distinguishable").
JUDGED = ("better", "worse", "within noise", "not_distinguishable")


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_stores(tmp_path_factory.mktemp("online_run") / "stores", ("a", "b", "c"))


def _config(stores: Path, **overrides):
    return config_from_dict(tiny_config(stores, **overrides))


# ------------------------------------------------------------------------------------------- config and specs
@pytest.mark.parametrize(("section", "needle"), [
    ({"every": 0}, "online.every must be a positive integer, got 0"),
    ({"lookahead": -1}, "online.lookahead must be a positive integer"),
    ({"odm": {"warmup": 3}}, r"online.odm = \{'warmup': 3\} is invalid: expected settings from \['reward_scale'\]"),
    ({"ado": ["warmup"]}, "online.ado = .* is invalid: expected a mapping"),
    ({"rate": 2}, "unknown keys"),
])
def test_the_online_section_is_checked(stores: Path, section, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        _config(stores, online=section)


def test_a_controller_setting_the_domains_refuse_fails_before_training(stores: Path, tmp_path: Path) -> None:
    cfg = _config(stores, target={"baselines": ["ado"]}, online={"ado": {"min_prob": 0.4}})
    with pytest.raises(ValueError, match=r"online.ado = \{'min_prob': 0.4\} .* min_prob must be in \[0, 1/3\)"):
        MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False).run()
    assert not list((tmp_path / "out" / "runs").glob("*/result.json"))  # nothing trained
    assert not Ledger(tmp_path / "out", lock=False).records()  # nothing even registered


def test_the_online_methods_are_registered_with_their_hooks(stores: Path) -> None:
    cfg = _config(stores, target={"baselines": ["uniform", "odm", "ado"]})
    assert [m.name for m in selected_methods(cfg)] == ["autoscale", "uniform", "odm", "ado"]
    assert isinstance(make_step_hook(OnlineHookSpec(kind="odm", every=2)), OnlineMixingHook)
    d = inspect_domains(cfg)
    ctx = MethodContext(cfg, d, Path("."), {n: ddo_proxy_specs(cfg, d, n) for n in cfg.ddo.budgets})
    for name in ("ado", "odm"):
        assert mixing_method(name).cost_runs(ctx) == [] and mixing_method(name).selection_stages(ctx) == []
        choice = mixing_method(name).choose(ctx)
        assert [s.seed for s in choice.specs] == list(cfg.target.seeds) and choice.specs[0].hook.kind == name


def test_spec_carries_and_hashes_the_controller(stores: Path) -> None:
    cfg = _config(stores, online={"every": 2})
    domains = inspect_domains(cfg)
    odm = online_target_spec(cfg, domains, "odm", seed=0)
    fixed = target_spec(cfg, domains, "odm", {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}, 0)
    assert odm.sequences == fixed.sequences and odm.run_id != fixed.run_id  # same start, another run
    assert odm.hook.to_json() == {"kind": "odm", "every": 2, "lookahead": None, "options": {}}
    assert odm.run_id != online_target_spec(_config(stores, online={"every": 3}), domains, "odm", 0).run_id
    other = _config(stores, online={"every": 2, "odm": {"reward_scale": 5.0}})
    assert odm.run_id != online_target_spec(other, domains, "odm", 0).run_id
    ado = online_target_spec(cfg, domains, "ado", seed=0)
    assert ado.weights == pytest.approx(domains.natural_weights(), abs=0.02)  # ADO starts at its prior
    assert RunSpec.from_json(json.loads(json.dumps(odm.to_json()))) == odm


def test_online_mixing_refuses_domain_pools(stores: Path) -> None:
    cfg = _config(stores)
    domains = inspect_domains(cfg)
    ds = ScaleAwareMixtureDataset(domains.paths, {"a": 0.4, "b": 0.4, "c": 0.2}, 4096, 32, pool={"c": 0.5},
                                  batch_size=4, verify="size")
    assert ds.pools
    with pytest.raises(ValueError, match="online mixing does not support domain pools"):
        OnlineMixture(ds, make_controller("odm", ds.domain_names, domains.natural_weights(), {}), every=2,
                      sequences_per_step=8)


# ------------------------------------------------------------------------------------------- resume
class _Killed(RuntimeError):
    pass


def _comparable(result: dict) -> dict:
    return {"curve": result["curve"], "tokens": result["tokens"],
            "final_train_loss": result["final_train_loss"], "step_hook": result["step_hook"]}


@pytest.mark.timeout(300)
def test_an_online_run_killed_after_a_checkpoint_resumes_to_the_same_run(stores: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer binds the hook (the dataset in online mode) before it loads the checkpoint's dataset state;
    the resumed run ends at the losses, counts and realised weights of the uninterrupted one."""
    cfg = _config(stores, online={"every": 2}, checkpoint_every=4)
    domains = inspect_domains(cfg)
    spec = online_target_spec(cfg, domains, "odm", seed=0)
    full = train_mod.train_run(cfg, spec, domains, tmp_path / "full", progress=False).to_json()
    hook = full["step_hook"]
    assert hook["kind"] == "odm" and hook["updates"] == spec.total_sequences // cfg.global_batch_size // 2
    assert len({tuple(w) for w in hook["weights"]}) > 1  # ODM moved the mix
    assert sum(hook["realised"].values()) == pytest.approx(1.0)
    total = sum(full["tokens"].values())
    assert {d: n / total for d, n in full["tokens"].items()} == pytest.approx(hook["realised"], abs=1e-12)

    real = train_mod.save_checkpoint
    saves: list[int] = []

    def dying(ckpt_dir, trainer, info, extra):
        real(ckpt_dir, trainer, info, extra)
        saves.append(extra.step)
        if extra.step == 12:
            raise _Killed

    monkeypatch.setattr(train_mod, "save_checkpoint", dying)
    with pytest.raises(_Killed):
        train_mod.train_run(cfg, spec, domains, tmp_path / "killed", progress=False)
    monkeypatch.setattr(train_mod, "save_checkpoint", real)
    workers = dataclasses.replace(cfg, num_workers=2)  # resumed with DataLoader workers: the same stream
    resumed = train_mod.train_run(workers, spec, domains, tmp_path / "killed", progress=False).to_json()
    assert resumed["resumed_at"] == [12]
    assert _comparable(resumed) == _comparable(full)


# ------------------------------------------------------------------------------------------- end to end
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ado_and_odm_end_to_end_with_verdicts_and_no_extension(stores: Path, tmp_path: Path) -> None:
    from autoscale_data.runner.reporting.report_types import Report

    cfg = _config(stores, target={"baselines": ["uniform", "ado", "odm"], "seeds": [0, 1],
                                  "keep_checkpoints": True}, online={"every": 2})
    out = tmp_path / "out"
    report = MixtureRunner(cfg, out, log=lambda _: None, progress=False).run()
    plan = json.loads((out / "plan.json").read_text())
    assert "method_runs" not in plan  # no runs of their own
    online = [s for s in plan["targets"] if s["label"] in ("ado", "odm")]
    assert sorted((s["label"], s["seed"]) for s in online) == [("ado", 0), ("ado", 1), ("odm", 0), ("odm", 1)]
    methods = json.loads((out / "fits" / "methods.json").read_text())
    for name in ("ado", "odm"):
        rec = methods[name]
        assert rec["skipped"] is None and rec["cost_run_ids"] == [] and rec["cost_tokens"] == 0
        assert rec["details"]["online"]["every"] == 2
        assert set(report.targets[name].seeds) == {0, 1}
        realised = []
        for s in (s for s in online if s["label"] == name):
            result = json.loads((out / "runs" / s["run_id"] / "result.json").read_text())
            assert result["step_hook"]["kind"] == name and result["step_hook"]["updates"] > 0
            realised.append(result["step_hook"]["realised"])
        mean = {d: sum(w[d] for w in realised) / 2 for d in realised[0]}
        assert report.comparison.rows[name].weights == pytest.approx(mean)  # the realised mix, not the initial
    comp = report.comparison
    assert comp is not None and list(comp.rows) == ["autoscale", "uniform", "ado", "odm"]
    for name in ("ado", "odm"):
        row = comp.rows[name]
        assert row.cost.runs == 0 and row.cost.tokens == 0 and row.cost.wall_s == 0
        assert set(row.per_seed) == {"0", "1"} and row.vs_uniform["verdict"] in JUDGED
    text = (out / "report.md").read_text()
    assert "| ado |" in text and "| odm |" in text and "0 extra runs" in text
    on_disk = json.loads((out / "report.json").read_text())
    assert Report.from_json(on_disk).to_json() == on_disk
    runner = MixtureRunner(cfg, out, log=lambda _: None, progress=False)
    with pytest.raises(ValueError, match=r"is an online-mixing run \(ado\).* cannot be extended"):
        runner.extend("ado", 32768, seed=0)
    runner.extend("uniform", 32768, seed=0)  # a fixed mix still extends


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigkill_during_an_online_target_run_then_rerun_gives_the_uninterrupted_run(stores: Path,
                                                                                     tmp_path: Path) -> None:
    import subprocess
    import sys

    raw = tiny_config(stores, target={"baselines": ["ado"]}, online={"every": 2}, checkpoint_every=4)
    cfg = config_from_dict(raw)
    domains = inspect_domains(cfg)
    spec = online_target_spec(cfg, domains, "ado", seed=0)
    cfg_path = tmp_path / "kill.json"
    cfg_path.write_text(json.dumps(raw))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "autoscale_data.cli", "run", str(cfg_path), "--out", str(out), "--no-progress"]
    ckpt = out / "runs" / spec.run_id / "ckpt" / "latest.json"

    def past_the_first_fit() -> bool:  # ADO fits its laws from update 6 (step 12): kill after that
        try:
            return json.loads(ckpt.read_text()).get("step", 0) >= 16
        except (FileNotFoundError, ValueError):
            return False

    env = kill_runner_when(cmd, past_the_first_fit, timeout=600)
    assert not (out / "runs" / spec.run_id / "result.json").exists()  # killed inside the online run
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    resumed = json.loads((out / "runs" / spec.run_id / "result.json").read_text())
    assert resumed["resumed_at"] and resumed["resumed_at"][0] >= 16
    clean = train_mod.train_run(cfg, spec, domains, tmp_path / "clean" / spec.run_id, progress=False).to_json()
    assert clean["step_hook"]["weights"] != [clean["step_hook"]["weights"][0]] * len(clean["step_hook"]["weights"])
    assert _comparable(resumed) == _comparable(clean)


def test_the_dry_run_counts_the_online_targets_and_their_zero_cost(stores: Path, tmp_path: Path) -> None:
    cfg = _config(stores, target={"baselines": ["ado", "odm"]})
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    text = runner.describe()
    proxies = sum(len(v) for v in runner.proxy_specs().values())
    assert f"total: {proxies + 3} runs" in text  # autoscale, ado and odm at the target, after the fits
    assert text.count("weights chosen during the run (online mixing)") == 2
    for name in ("ado", "odm"):
        line = next(ln for ln in text.splitlines() if ln.split()[:1] == [name] and "tokens" in ln)
        assert line.split()[1:5] == ["0", "runs", "0", "tokens"] and line.endswith("x0.00")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_online_run_on_two_processes_reads_what_its_controller_decided(stores: Path, tmp_path: Path) -> None:
    """Two ranks (gloo): every rank makes the same update from the all-reduced losses, so their slices of
    the decided segments add up to the realised mix exactly."""
    cfg = _config(stores, procs=2, micro_batch_size=2, device="cpu", online={"every": 2})
    spec = online_target_spec(cfg, inspect_domains(cfg), "odm", 0)
    lines: list[str] = []
    MixtureRunner(cfg, tmp_path / "out", log=lines.append, progress=False).train_runs([spec])
    run_dir = tmp_path / "out" / "runs" / spec.run_id
    assert (run_dir / "result.json").exists(), "\n".join(lines) + (run_dir / "train.log").read_text()[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["world_size"] == 2 and result["step_hook"]["updates"] == spec.total_sequences // 8 // 2
    total = sum(result["tokens"].values())
    assert total == spec.total_tokens
    assert {d: n / total for d, n in result["tokens"].items()} == pytest.approx(result["step_hook"]["realised"],
                                                                                 abs=1e-12)
