"""The training entry point (torch backend): exact token accounting, exact resume from a checkpoint,
BERT masked-LM proxies, divergence handling, and fits that refuse too few runs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from runner_helpers import dies_after_checkpoints, tiny_config, tiny_stores

from autoscale_data._io import atomic_write_json
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.mixes.fitting import proxy_table
from autoscale_data.runner.models import mask_tokens
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import ddo_proxy_specs, target_spec
from autoscale_data.runner.training import train as train_mod

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores")


def _setup(stores: Path, **overrides):
    cfg = config_from_dict(tiny_config(stores, **overrides))
    return cfg, inspect_domains(cfg)


def test_resume_from_checkpoint_equals_uninterrupted(stores: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, domains = _setup(stores, checkpoint_every=3)
    spec = target_spec(cfg, domains, "uniform", {"a": 0.3, "b": 0.7}, seed=1)  # 64 steps of 8 x 32 tokens
    full = train_mod.train_run(cfg, spec, domains, tmp_path / "full", progress=False).to_json()
    assert full["tokens"] == spec.tokens and full["total_tokens"] == 16384
    assert len(full["curve"]) == spec.eval_points and full["resumed_at"] == []

    with dies_after_checkpoints(monkeypatch, 3):  # the process dies right after its third checkpoint
        train_mod.train_run(cfg, spec, domains, tmp_path / "cut", progress=False)
    assert not (tmp_path / "cut" / "result.json").exists()
    assert json.loads((tmp_path / "cut" / "ckpt" / "latest.json").read_text())["step"] == 9
    resumed = train_mod.train_run(cfg, spec, domains, tmp_path / "cut", progress=False).to_json()
    assert resumed["resumed_at"] == [9]
    assert resumed["tokens"] == full["tokens"]
    for a, b in zip(full["curve"], resumed["curve"], strict=True):
        assert a["tokens"] == b["tokens"]
        for d in a["losses"]:
            assert b["losses"][d] == pytest.approx(a["losses"][d], abs=1e-5)
        # per-domain training loss between evaluations (DomainLossMeter); its window survives the checkpoint
        assert set(a["train_losses"]) == set(domains.names)
        for d, v in a["train_losses"].items():
            assert v is not None and 0 < v < 20 and b["train_losses"][d] == pytest.approx(v, abs=1e-5)
    assert not (tmp_path / "cut" / "ckpt").exists()  # removed once the result is written


def test_dataloader_workers_deliver_the_same_stream(stores: Path, tmp_path: Path) -> None:
    cfg0, domains = _setup(stores)
    cfg2, _ = _setup(stores, num_workers=2)
    spec0 = ddo_proxy_specs(cfg0, domains, 4096)[0]
    spec2 = ddo_proxy_specs(cfg2, domains, 4096)[0]
    assert spec0.run_id == spec2.run_id  # loader workers do not change what a run computes
    r0 = train_mod.train_run(cfg0, spec0, domains, tmp_path / "w0", progress=False).to_json()
    r2 = train_mod.train_run(cfg2, spec2, domains, tmp_path / "w2", progress=False).to_json()
    assert r0["tokens"] == r2["tokens"] == spec0.tokens
    assert r0["losses"] == r2["losses"]


def test_bert_mlm_proxy_step(stores: Path, tmp_path: Path) -> None:
    cfg, domains = _setup(stores, model={"preset": "bert-tiny", "overrides": {
        "num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}})
    spec = ddo_proxy_specs(cfg, domains, 4096)[1]
    result = train_mod.train_run(cfg, spec, domains, tmp_path / "bert", progress=False).to_json()
    assert result["tokens"] == spec.tokens
    last = result["curve"][-1]["train_losses"]  # the masked positions' loss, per domain
    assert set(last) == set(domains.names) and all(v is not None and 0 < v < 20 for v in last.values())
    assert all(math.isfinite(v) and 0 < v < 10 for v in result["losses"].values())


def test_mask_tokens_rates() -> None:
    ids = torch.randint(0, 200, (64, 256))
    gen = torch.Generator().manual_seed(0)
    masked, labels = mask_tokens(ids, vocab_size=257, mask_id=257, probability=0.15, generator=gen)
    chosen = labels != -100
    assert abs(chosen.float().mean().item() - 0.15) < 0.01
    assert abs((masked[chosen] == 257).float().mean().item() - 0.8) < 0.03
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(masked[~chosen], ids[~chosen])


def test_diverged_run_is_failed_with_its_reason(stores: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, domains = _setup(stores)
    spec = ddo_proxy_specs(cfg, domains, 4096)[0]
    monkeypatch.setattr(train_mod._Trainer, "_micro_step", lambda self, ids, domain, step, micro: float("nan"))
    with pytest.raises(train_mod.Diverged, match="nan"):
        train_mod.train_run(cfg, spec, domains, tmp_path / "nan", progress=False)
    assert "diverged" in json.loads((tmp_path / "nan" / "failure.json").read_text())["reason"]
    assert not (tmp_path / "nan" / "result.json").exists()


def _fake_result(spec, loss_shift: float = 0.0) -> dict:
    losses = {d: 3.0 - 0.3 * math.log(1 + n / 10) + loss_shift for d, n in spec.sequences.items()}
    return {"run_id": spec.run_id, "tokens": spec.tokens, "losses": losses}


def test_fit_leaves_failed_runs_out_and_names_missing_ones(stores: Path, tmp_path: Path) -> None:
    cfg, domains = _setup(stores, seeds=[0, 1])
    specs = ddo_proxy_specs(cfg, domains, 4096)
    with Ledger(tmp_path / "out") as ledger:
        for s in specs:
            ledger.register(s)
            if s.label == "a x3" and s.seed == 1:
                ledger.mark_failed(s.run_id, "diverged: training loss nan at step 3/10", terminal=True)
            else:
                atomic_write_json(ledger.result_path(s.run_id), _fake_result(s, 0.01 * s.seed))
        with pytest.warns(UserWarning, match="left out of the DDO fit"):
            table = proxy_table(ledger, specs, 4096)
        assert len(table) == len(specs) - 1
        broken = next(s for s in specs if s.label.startswith("b /") and s.seed == 0)  # the one ÷3 run
        ledger.result_path(broken.run_id).unlink()
        other = next(s for s in specs if s.label.startswith("b /") and s.seed == 1)
        ledger.mark_failed(other.run_id, "diverged: training loss inf at step 2/10", terminal=True)
        ledger.result_path(other.run_id).unlink()
        with pytest.raises(ValueError, match=r"too few finished runs.*" + re.escape(repr(broken.label)) + ".*"
                                             + broken.run_id):
            with pytest.warns(UserWarning):
                proxy_table(ledger, specs, 4096)


def test_anytime_target_run_follows_the_plan_path(stores: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import autoscale_data.dataset as dataset_mod
    from autoscale_data.runner.planning.specs import RunSpec
    from autoscale_data.solver import MixturePlan

    cfg, domains = _setup(stores)
    # b is nearly absent early on and the majority at the target budget: far from any fixed mix
    plan = MixturePlan.from_scales([(4096, {"a": 3500.0, "b": 596.0}), (8192, {"a": 4600.0, "b": 3592.0})])
    spec = target_spec(cfg, domains, "autoscale_anytime", None, 0, plan=plan)
    built = []
    real = dataset_mod.ScaleAwareMixtureDataset

    def spy(*args, **kwargs):
        ds = real(*args, **kwargs)
        built.append(ds)
        return ds

    monkeypatch.setattr(dataset_mod, "ScaleAwareMixtureDataset", spy)
    job = tmp_path / "any" / "job.json"
    train_mod.write_job(job, cfg, spec, domains)  # the subprocess path: the plan travels in job.json
    assert RunSpec.from_json(json.loads(job.read_text())["spec"]) == spec
    assert train_mod.main(["--job", str(job)]) == 0
    assert [ds.schedule for ds in built] == ["anytime"]
    result = json.loads((tmp_path / "any" / "result.json").read_text())
    assert result["schedule"] == "anytime" and result["tokens"] == spec.tokens
    batch_tokens = cfg.global_batch_size * cfg.seq_len
    assert len(result["curve"]) == 4
    for point in result["curve"]:
        seen = point["domain_tokens"]
        assert sum(seen.values()) == point["tokens"]
        optimum = plan.allocation_for_budget(point["tokens"])
        for d in seen:  # every intermediate budget has seen about the plan's optimal allocation for it
            assert abs(seen[d] - optimum[d]) <= batch_tokens, (point["tokens"], seen, optimum)
    first = result["curve"][0]
    assert first["domain_tokens"]["b"] / first["tokens"] < 0.2 < spec.weights["b"]  # not the final mix


def test_a_checkpoint_state_reads_the_bare_keys_older_checkpoints_wrote() -> None:
    """The runner state inside a checkpoint is a record whose field names are the keys earlier versions
    wrote, so their checkpoints resume (one without the later keys takes their defaults)."""
    import torch

    from autoscale_data.runner.training.checkpoint import CheckpointState, TrainTimes

    old = {"step": 9, "curve": [{"tokens": 4096, "step": 8, "losses": {"a": 3.0}, "mean_loss": 3.0}],
           "elapsed": {"train_s": 1.5, "eval_s": 0.5, "data_wait_s": 0.1}, "resumed_at": [4],
           "dataset": {"cursor": 72, "config": ("kept", "as is")}, "counts": [[40, 32]],
           "rng": [{"cpu": torch.get_rng_state()}]}  # no last_loss, train_meter or step_hook yet
    state = CheckpointState.from_json(old)
    assert state.step == 9 and state.curve[0].tokens == 4096 and state.elapsed == TrainTimes(1.5, 0.5, 0.1)
    assert state.counts == [[40, 32]] and math.isnan(state.last_loss) and state.train_meter is None
    assert state.dataset["config"] == ("kept", "as is") and torch.equal(state.rng[0]["cpu"], old["rng"][0]["cpu"])
    blob = state.to_json()  # what a checkpoint saves: the same keys, the dataset's state as JSON holds it (as in
    # final_state.json) and the generators' tensors as they are
    assert set(blob) == {"step", "curve", "elapsed", "resumed_at", "dataset", "counts", "last_loss", "train_meter",
                         "rng"} and blob["elapsed"] == old["elapsed"]
    assert blob["dataset"] == {"cursor": 72, "config": ["kept", "as is"]} and blob["rng"][0]["cpu"] is state.rng[0]["cpu"]
    assert CheckpointState.from_json(blob).curve == state.curve
