"""DeepSpeed backend on CPU: a single-process run that is SIGKILLed after a checkpoint and resumes
from it (DeepSpeed checkpoint + dataset state), and a 2-process run under the deepspeed launcher.

The first ``deepspeed.initialize`` builds a communication op (about a minute) cached in
``$TORCH_EXTENSIONS_DIR``; an existing value is respected, else the suite's shared cache is used.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.executors import launch_command
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import target_spec
from autoscale_data.runner.training.train import write_job

pytest.importorskip("deepspeed")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


@pytest.fixture(autouse=True)
def _ds_env(monkeypatch: pytest.MonkeyPatch) -> None:
    if not os.environ.get("TORCH_EXTENSIONS_DIR"):
        monkeypatch.setenv("TORCH_EXTENSIONS_DIR",
                           os.path.expanduser("~/.cache/autoscale-data/torch_extensions"))
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)


def _setup(tmp_path: Path, **overrides):
    stores = tiny_stores(tmp_path / "stores")
    cfg = config_from_dict(tiny_config(stores, backend="deepspeed", deepspeed={"zero_stage": 1, "single_process": "deepspeed"},
                                       **overrides))  # one process too: the engine, as asked
    domains = inspect_domains(cfg)
    return cfg, domains, target_spec(cfg, domains, "mix", {"a": 0.5, "b": 0.5}, seed=0)


def test_single_process_deepspeed_resumes_after_sigkill(tmp_path: Path) -> None:
    cfg, domains, spec = _setup(tmp_path, checkpoint_every=8)
    run_dir = tmp_path / "run"
    write_job(run_dir / "job.json", cfg, spec, domains)
    cmd = [sys.executable, "-m", "autoscale_data.runner.training.train", "--job", str(run_dir / "job.json")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pointer = run_dir / "ckpt" / "latest.json"
    deadline = time.time() + 300
    try:
        while not pointer.exists():
            if proc.poll() is not None:
                pytest.fail(f"training ended early: {proc.stderr.read().decode()[-2000:]}")
            assert time.time() < deadline
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (run_dir / "result.json").exists()
    first = json.loads(pointer.read_text())["step"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["backend"] == "deepspeed" and result["resumed_at"] and result["resumed_at"][0] >= first
    assert result["tokens"] == spec.tokens  # the dataset state resumed exactly: every token once
    assert len(result["curve"]) == spec.eval_points


def test_two_processes_under_the_deepspeed_launcher(tmp_path: Path) -> None:
    cfg, domains, spec = _setup(tmp_path, procs=2, micro_batch_size=2)
    runner = MixtureRunner(cfg, tmp_path / "out")
    run_dir = tmp_path / "out" / "runs" / spec.run_id
    run_dir.mkdir(parents=True)
    assert "deepspeed.launcher.runner" in launch_command(cfg, run_dir / "job.json")
    lines: list[str] = []
    runner.log = lines.append
    runner.train_runs([spec])  # one slot: the launcher in its own process group
    assert any(" done " in line for line in lines), "\n".join(lines) + (run_dir / "train.log").read_text()[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["world_size"] == 2
    assert result["tokens"] == spec.tokens  # the two ranks' slices add up to the planned tokens exactly
    assert all(v < 6.0 for v in result["losses"].values())
