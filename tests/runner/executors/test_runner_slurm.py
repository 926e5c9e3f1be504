"""Opt-in (``pytest -m slurm``): the Slurm executor against a real single-node Slurm.

``scripts/slurm-local.sh start`` brings one up (slurm-wlm and munge from the OS packages; root to
install them); the tests are skipped when it cannot. They check that runs submitted as job arrays
give the sequential results bit for bit, and that a runner killed with SIGKILL leaves its jobs
running and the next runner re-attaches to them by job id (nothing lost, nothing trained twice).
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
from paths import REPO
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import ddo_proxy_specs

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = REPO
_TIMING = {"wall_time_s", "train_time_s", "eval_time_s", "data_wait_s", "data_wait_fraction", "tokens_per_s",
           "finished_at"}


@pytest.fixture(scope="module")
def slurm() -> str:
    pytest.importorskip("submitit")
    conf = os.path.join(os.environ.get("AUTOSCALE_SLURM_DIR", "/tmp/autoscale-slurm"), "slurm.conf")
    started = subprocess.run(["bash", os.fspath(ROOT / "scripts" / "slurm-local.sh"), "start"], capture_output=True,
                             text=True, timeout=600)
    if started.returncode != 0:
        pytest.skip(f"Slurm could not start: {started.stderr.strip()[-500:]}")
    os.environ["SLURM_CONF"] = conf
    return conf


def _trained(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in _TIMING}


def test_job_arrays_train_exactly_what_one_process_trains(slurm: str, tmp_path: Path) -> None:
    stores = tiny_stores(tmp_path / "stores")
    cfg = config_from_dict(tiny_config(stores, device="cpu"))
    specs = ddo_proxy_specs(cfg, inspect_domains(cfg), 4096)
    MixtureRunner(cfg, tmp_path / "seq", log=lambda _: None, progress=False).train_runs(specs)
    on_slurm = config_from_dict(tiny_config(stores, device="cpu", executor={"kind": "slurm", "max_parallel": 2,
                                                                            "slurm": {"time_min": 20}}))
    MixtureRunner(on_slurm, tmp_path / "slurm", log=lambda _: None, progress=False).train_runs(specs)
    for s in specs:
        assert _trained(tmp_path / "slurm" / "runs" / s.run_id / "result.json") == \
            _trained(tmp_path / "seq" / "runs" / s.run_id / "result.json")
    ids = [e.job_id for e in Ledger(tmp_path / "slurm", lock=False).events() if e.status == "submitted"]
    assert len(ids) == len(specs) and any("_" in i for i in ids)  # submitted as job arrays


def _running(out: Path) -> bool:
    return (out / "ledger.jsonl").exists() and any(e.status == "running"
                                                   for e in Ledger(out, lock=False).events())


def test_sigkilled_runner_reattaches_to_its_slurm_jobs(slurm: str, tmp_path: Path) -> None:
    stores = tiny_stores(tmp_path / "stores")
    raw = tiny_config(stores, device="cpu", checkpoint_every=2, target={"baselines": ["uniform"]},
                      executor={"kind": "slurm", "max_parallel": 2, "slurm": {"time_min": 20}})
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(raw))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "autoscale_data.cli", "run", os.fspath(cfg_path), "--out", os.fspath(out),
           "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    try:
        while not _running(out):
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=800)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "re-attached to slurm job" in rerun.stdout
    records = Ledger(out, lock=False).records()
    assert all(r.status == "done" for r in records.values()) and len(records) == 2 * 5 + 2
    done = [e.run_id for e in Ledger(out, lock=False).events() if e.status == "done"]
    assert len(done) == len(set(done))  # every run finished exactly once
