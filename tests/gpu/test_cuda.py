"""The training path on a CUDA GPU (skipped without one; `pytest -m gpu tests/gpu` on a GPU machine).

Covers what only a GPU exercises: device selection, bf16 autocast and DeepSpeed bf16 ZeRO-1/2 on
CUDA with NCCL, compact (uint16/int32) batches pinned by the DataLoader and converted on the device,
a resume on the GPU, BERT masking with a CUDA generator, and the local executor packing several
small runs (DoReMi proxies and online controllers among them) onto one GPU. Their CPU siblings are
in tests/runner/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from runner_helpers import dies_after_checkpoints, kill_runner_when, tiny_config, tiny_stores

from autoscale_data import ScaleAwareMixtureDataset
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import target_spec
from autoscale_data.runner.training import train as train_mod
from autoscale_data.runner.training.train import write_job

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_stores(tmp_path_factory.mktemp("gpu") / "stores", ("a", "b", "c"), num_tokens=200_000)


def _setup(stores: Path, **overrides):
    cfg = config_from_dict(tiny_config(stores, device="cuda", cpu_threads=None, **overrides))
    domains = inspect_domains(cfg)
    return cfg, domains, target_spec(cfg, domains, "mix", {"a": 0.3, "b": 0.3, "c": 0.4}, seed=1)


def _gpu_name() -> str:
    return torch.cuda.get_device_name(0)


def test_compact_batches_are_pinned_and_converted_on_the_device(stores: Path) -> None:
    from torch.utils.data import DataLoader

    ds = ScaleAwareMixtureDataset({n: stores / n for n in ("a", "b", "c")}, {"a": 0.2, "b": 0.3, "c": 0.5},
                                  65_536, 128, seed=3, output="compact", batch_size=8)
    loader = DataLoader(ds, batch_size=None, num_workers=2, pin_memory=True)
    n = 0
    for batch in loader:
        ids = batch["input_ids"]
        assert ids.is_pinned() and ids.dtype in (torch.uint16, torch.int32), ids.dtype
        on_gpu = ids.to("cuda", non_blocking=True).long()
        assert on_gpu.device.type == "cuda" and torch.equal(on_gpu.cpu(), ids.long())
        n += ids.shape[0]
    assert n == sum(ds.sequences_per_domain.values())


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_torch_run_on_cuda_resumes_like_an_uninterrupted_one(stores: Path, tmp_path: Path, precision: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, domains, spec = _setup(stores, precision=precision, num_workers=2, checkpoint_every=3)
    full = train_mod.train_run(cfg, spec, domains, tmp_path / "full", progress=False).to_json()
    assert full["device"] == _gpu_name() and full["tokens"] == spec.tokens
    with dies_after_checkpoints(monkeypatch, 2):
        train_mod.train_run(cfg, spec, domains, tmp_path / "cut", progress=False)
    resumed = train_mod.train_run(cfg, spec, domains, tmp_path / "cut", progress=False).to_json()
    assert resumed["resumed_at"] == [6] and resumed["tokens"] == full["tokens"]  # every token once
    worst = max(abs(a["losses"][d] - b["losses"][d]) for a, b in zip(full["curve"], resumed["curve"], strict=True)
                for d in a["losses"])
    # the same data in the same order; CUDA kernels may reduce in another order, so not bit for bit
    assert worst < 2e-2, worst
    print(f"GPU resume {precision}: largest loss difference vs uninterrupted {worst:.2e}")


def test_bert_masked_lm_on_cuda(stores: Path, tmp_path: Path) -> None:
    cfg, domains, spec = _setup(stores, precision="bf16", model={"preset": "bert-tiny", "overrides": {
        "num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}})
    result = train_mod.train_run(cfg, spec, domains, tmp_path / "bert", progress=False).to_json()
    assert result["device"] == _gpu_name() and result["tokens"] == spec.tokens
    assert all(0 < v < 10 for v in result["losses"].values())


@pytest.mark.parametrize("stage", [1, 2])
def test_deepspeed_bf16_zero_on_cuda_resumes_after_sigkill(stores: Path, tmp_path: Path, stage: int) -> None:
    pytest.importorskip("deepspeed")
    cfg, domains, spec = _setup(stores, backend="deepspeed", precision="bf16",
                                deepspeed={"zero_stage": stage, "single_process": "deepspeed"},
                                checkpoint_every=8)
    run_dir = tmp_path / "run"
    write_job(run_dir / "job.json", cfg, spec, domains)
    cmd = [sys.executable, "-m", "autoscale_data.runner.training.train", "--job", str(run_dir / "job.json")]
    kill_runner_when(cmd, (run_dir / "ckpt" / "latest.json").exists, timeout=300)  # SIGKILL after a checkpoint
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["device"] == _gpu_name() and result["backend"] == "deepspeed" and result["precision"] == "bf16"
    assert result["resumed_at"] and result["tokens"] == spec.tokens
    assert all(0 < v < 10 for v in result["losses"].values())


def test_local_executor_packs_small_runs_of_every_method_on_one_gpu(stores: Path, tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config(
        stores, device="cuda", cpu_threads=None, precision="bf16",
        executor={"max_parallel": 3, "runs_per_gpu": 3},
        target={"baselines": ["uniform", "ddo_n2", "doremi", "ado", "odm"], "seeds": [0]}, online={"every": 2}))
    out = tmp_path / "out"
    lines: list[str] = []
    report = MixtureRunner(cfg, out, log=lines.append, progress=False).run()
    results = [json.loads(p.read_text()) for p in (out / "runs").glob("*/result.json")]
    assert results and all(r["device"] == _gpu_name() for r in results), "\n".join(lines[-20:])
    spans = sorted((r["finished_at"] - r["wall_time_s"], r["finished_at"]) for r in results)
    overlapped = sum(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))
    assert overlapped > 0  # runs trained side by side on the one GPU
    assert set(report.targets) >= {"autoscale", "uniform", "ddo_n2", "doremi", "ado", "odm"}
    assert (out / "report.md").exists()
    print(f"{len(results)} runs on one {_gpu_name()}, {overlapped} started before the previous one ended")
