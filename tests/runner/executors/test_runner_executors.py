"""Executors: parallel local runs equal sequential ones bit for bit; a killed job is retried from its
checkpoint; a diverged run is not retried; the executor section never changes a run id."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.commands.run import with_executor
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.executors import (
    InProcessExecutor,
    LocalExecutor,
    gpu_slots,
    make_executor,
    resolve_max_parallel,
)
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import ddo_proxy_specs
from autoscale_data.runner.training import train as train_mod

#: result fields that measure time, not training
_TIMING = {"wall_time_s", "train_time_s", "eval_time_s", "data_wait_s", "data_wait_fraction", "tokens_per_s",
           "finished_at"}


def _trained(result_path: Path) -> dict:
    return {k: v for k, v in json.loads(result_path.read_text()).items() if k not in _TIMING}


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores")


def test_executor_section_is_validated_and_never_enters_a_run_id(stores: Path) -> None:
    plain = config_from_dict(tiny_config(stores))
    assert plain.executor.kind == "local" and plain.executor.max_parallel == 1
    other = config_from_dict(tiny_config(stores, executor={"kind": "slurm", "max_parallel": "auto", "retries": 3,
                                                           "slurm": {"partition": "gpu", "nodes": 2}}))
    assert other.executor.slurm.nodes == 2 and other.executor.max_parallel == "auto"
    domains = inspect_domains(plain)
    assert [s.run_id for s in ddo_proxy_specs(plain, domains, 4096)] == \
        [s.run_id for s in ddo_proxy_specs(other, domains, 4096)]
    for bad, match in (({"kind": "kube"}, "executor.kind"), ({"max_parallel": 0}, "max_parallel"),
                       ({"max_parallel": "many"}, "max_parallel"), ({"retries": -1}, "retries"),
                       ({"slurm": {"partition": "x", "gpu": 1}}, "unknown"), ({"ray": {"num_cpus": -1}}, "num_cpus")):
        with pytest.raises(ValueError, match=match):
            config_from_dict(tiny_config(stores, executor=bad))
    assert with_executor(plain, max_parallel="2").executor.max_parallel == 2
    with pytest.raises(ValueError, match="max_parallel"):
        with_executor(plain, max_parallel="0")


def test_auto_parallelism_and_the_executor_picked(stores: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, device="cpu"))
    assert isinstance(make_executor(cfg, stores), InProcessExecutor)  # max_parallel 1: as before executors
    auto = with_executor(cfg, max_parallel="auto")
    assert resolve_max_parallel(auto) == max(1, len(os.sched_getaffinity(0)))  # cpu_threads 1 per run
    threads = config_from_dict(tiny_config(stores, device="cpu", cpu_threads=None, executor={"max_parallel": "auto"}))
    assert resolve_max_parallel(threads) == 1  # a run without cpu_threads uses every core


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_local_slots_train_exactly_what_one_process_trains(stores: Path, tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, device="cpu"))
    domains = inspect_domains(cfg)
    specs = ddo_proxy_specs(cfg, domains, 4096)
    MixtureRunner(cfg, tmp_path / "seq", log=lambda _: None, progress=False).train_runs(specs)
    lines: list[str] = []
    MixtureRunner(with_executor(cfg, max_parallel=2), tmp_path / "par", log=lines.append,
                  progress=False).train_runs(specs)
    assert sum(" done " in line for line in lines) == len(specs)
    for s in specs:
        assert _trained(tmp_path / "par" / "runs" / s.run_id / "result.json") == \
            _trained(tmp_path / "seq" / "runs" / s.run_id / "result.json"), s.name
    events = list(Ledger(tmp_path / "par", lock=False).events())
    submitted = [e for e in events if e.status == "submitted"]
    assert {e.executor for e in submitted} == {"local"} and len(submitted) == len(specs)
    assert len({e.job_id for e in submitted}) == 2  # two long-lived workers served every run
    assert all(r.attempts == 1 and r.status == "done" for r in Ledger(tmp_path / "par", lock=False).records().values())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_job_is_retried_and_resumes_from_its_checkpoint(stores: Path, tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, device="cpu", checkpoint_every=2, executor={"max_parallel": 2}))
    domains = inspect_domains(cfg)
    victim = ddo_proxy_specs(cfg, domains, 8192)[0]  # 32 steps, a checkpoint every 2
    out = tmp_path / "out"
    pointer = out / "runs" / victim.run_id / "ckpt" / "latest.json"
    killed: list[str] = []

    def kill_once() -> None:  # the job "dies" (preempted, OOM) after its first checkpoint
        deadline = time.time() + 200
        while not pointer.exists() and time.time() < deadline:
            time.sleep(0.01)
        for e in Ledger(out, lock=False).events():
            if e.run_id == victim.run_id and e.status == "running":
                killed.append(e.job_id)
                os.kill(int(e.job_id), signal.SIGKILL)
                return

    watcher = threading.Thread(target=kill_once, daemon=True)
    watcher.start()
    lines: list[str] = []
    MixtureRunner(cfg, out, log=lines.append, progress=False).train_runs([victim])
    watcher.join(5)
    assert killed, "the job finished before it could be killed"
    assert any(line.startswith("retrying") for line in lines)
    result = json.loads((out / "runs" / victim.run_id / "result.json").read_text())
    assert result["resumed_at"] and result["resumed_at"][0] >= 2  # resumed, not restarted
    assert result["tokens"] == victim.tokens  # every planned token exactly once
    rec = Ledger(out, lock=False).records()[victim.run_id]
    assert rec.status == "done" and rec.attempts == 2


def test_a_diverged_run_is_not_retried(stores: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config_from_dict(tiny_config(stores, device="cpu", executor={"retries": 3}))
    spec = ddo_proxy_specs(cfg, inspect_domains(cfg), 4096)[0]
    monkeypatch.setattr(train_mod._Trainer, "_micro_step", lambda self, ids, domain, step, micro: float("nan"))
    lines: list[str] = []
    MixtureRunner(cfg, tmp_path / "out", log=lines.append, progress=False).train_runs([spec])
    rec = Ledger(tmp_path / "out", lock=False).records()[spec.run_id]
    assert rec.status == "failed" and rec.terminal and rec.attempts == 1 and "diverged" in rec.reason
    assert not any(line.startswith("retrying") for line in lines)
    with pytest.warns(UserWarning, match="not retried"):  # a rerun does not train it either
        MixtureRunner(cfg, tmp_path / "out", log=lines.append, progress=False).train_runs([spec])
    assert Ledger(tmp_path / "out", lock=False).records()[spec.run_id].attempts == 1


def test_local_slots_need_enough_gpus(stores: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    cfg = config_from_dict(tiny_config(stores, device="cuda", procs=2, micro_batch_size=2))
    with pytest.raises(ValueError, match="need 4 GPUs; 3 are visible"):
        LocalExecutor(cfg, 2)
    one = LocalExecutor(cfg, 1)
    assert one._gpus == [["0", "1"]]


def test_gpu_slots_spread_before_they_share() -> None:
    assert gpu_slots(["0", "1"], 2, 1, 1) == [["0"], ["1"]]
    assert gpu_slots(["0", "1"], 4, 1, 2) == [["0"], ["1"], ["0"], ["1"]]  # each GPU once, then shared
    assert gpu_slots(["0"], 3, 1, 3) == [["0"], ["0"], ["0"]]
    assert gpu_slots(["0", "1", "2", "3"], 3, 2, 2) == [["0", "1"], ["2", "3"], ["0", "1"]]
    with pytest.raises(ValueError, match=r"need 2 GPUs; 1 are visible \(\['0'\]\) at executor.runs_per_gpu = 2"):
        gpu_slots(["0"], 3, 1, 2)


def test_runs_per_gpu_sets_auto_capacity(stores: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    cfg = config_from_dict(tiny_config(stores, device="cuda", executor={"max_parallel": "auto", "runs_per_gpu": 3}))
    assert resolve_max_parallel(cfg) == 3
    with pytest.raises(ValueError, match="runs_per_gpu"):
        config_from_dict(tiny_config(stores, executor={"runs_per_gpu": 0}))


def _same_as_sequential(cfg, specs, tmp_path: Path, executor: dict, name: str) -> list[str]:
    MixtureRunner(cfg, tmp_path / "seq", log=lambda _: None, progress=False).train_runs(specs)
    lines: list[str] = []
    other = config_from_dict({**tiny_config(cfg.domains, device="cpu"), "executor": executor})
    MixtureRunner(other, tmp_path / name, log=lines.append, progress=False).train_runs(specs)
    for s in specs:
        assert _trained(tmp_path / name / "runs" / s.run_id / "result.json") == \
            _trained(tmp_path / "seq" / "runs" / s.run_id / "result.json"), s.name
    return lines


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_submitit_local_jobs_train_exactly_what_one_process_trains(stores: Path, tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    cfg = config_from_dict(tiny_config(stores, device="cpu"))
    specs = ddo_proxy_specs(cfg, inspect_domains(cfg), 4096)[:3]
    _same_as_sequential(cfg, specs, tmp_path, {"kind": "slurm", "max_parallel": 2,
                                                "slurm": {"cluster": "local", "time_min": 10}}, "slurm")
    submitted = [e for e in Ledger(tmp_path / "slurm", lock=False).events() if e.status == "submitted"]
    assert len(submitted) == 3 and {e.executor for e in submitted} == {"slurm"}
    assert all((tmp_path / "slurm" / "slurm" / e.job_id).is_dir() for e in submitted)  # submitit's job folders


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ray_actors_train_exactly_what_one_process_trains(stores: Path, tmp_path: Path, ray_address: str) -> None:
    cfg = config_from_dict(tiny_config(stores, device="cpu"))
    specs = ddo_proxy_specs(cfg, inspect_domains(cfg), 4096)[:3]
    _same_as_sequential(cfg, specs, tmp_path, {"kind": "ray", "max_parallel": 2, "ray": {"address": ray_address}},
                        "ray")
    submitted = [e for e in Ledger(tmp_path / "ray", lock=False).events() if e.status == "submitted"]
    assert len(submitted) == 3 and {e.executor for e in submitted} == {"ray"}
