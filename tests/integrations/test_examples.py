"""Every example's ``--tiny`` mode, each in its own subprocess (started together, checked one by one)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from paths import EXAMPLES

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _commands() -> dict[str, list[str]]:
    py = [sys.executable, "-u"]
    cmds = {
        "plain_pytorch": py + [str(EXAMPLES / "plain_pytorch.py"), "--tiny"],
        "stateful_dataloader": py + [str(EXAMPLES / "stateful_dataloader.py"), "--tiny"],
        "hf_trainer": py + [str(EXAMPLES / "hf_trainer.py"), "--tiny"],
        "use_plan": py + [str(EXAMPLES / "use_plan.py"), "--tiny"],
        "online_mixing": py + [str(EXAMPLES / "online_mixing.py"), "--tiny"],
        "online_accelerate": py + [str(EXAMPLES / "online_accelerate.py"), "--tiny"],
        "bert_mlm": py + [str(EXAMPLES / "bert_mlm.py"), "--tiny"],
    }
    launcher = BIN / "deepspeed" if (BIN / "deepspeed").exists() else shutil.which("deepspeed")
    if launcher:
        cmds["deepspeed_train"] = [str(launcher), "--num_gpus", "2", "--master_port", str(_free_port()),
                                   str(EXAMPLES / "deepspeed_train.py"), "--tiny"]
    return cmds


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Iterator[dict[str, subprocess.Popen]]:
    """Start every example at once (most of their time is imports and process start-up)."""
    logs = tmp_path_factory.mktemp("example-logs")
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", DS_ACCELERATOR="cpu",
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "autoscale-data" / "torch_extensions"))
    procs = {}
    for name, cmd in _commands().items():
        out = open(logs / f"{name}.log", "w+")
        procs[name] = subprocess.Popen(cmd, cwd=logs, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        procs[name].log = out  # type: ignore[attr-defined]
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        proc.log.close()  # type: ignore[attr-defined]


def finished(runs: dict[str, subprocess.Popen], name: str, timeout: float) -> dict:
    if name not in runs:
        pytest.skip(f"{name}: launcher not installed")
    proc = runs[name]
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    proc.log.seek(0)  # type: ignore[attr-defined]
    output = proc.log.read()  # type: ignore[attr-defined]
    lines = [ln for ln in output.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"{name} exited {proc.returncode}:\n{output[-4000:]}"
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["example"] == name and result["ok"] is True, result
    return result


@pytest.mark.timeout(240)
def test_plain_pytorch(runs) -> None:
    r = finished(runs, "plain_pytorch", 200)
    assert r["sequences_seen"] == r["sequences_planned"] and sum(r["sequences_seen"].values()) == 64
    assert r["last_loss"] < r["first_loss"]


@pytest.mark.timeout(240)
def test_stateful_dataloader_resume(runs) -> None:
    r = finished(runs, "stateful_dataloader", 200)
    assert r["first_resumed"] == r["expected_first"] and r["batches_resumed"] == r["batches_full"] - r["stop_after"]


@pytest.mark.timeout(240)
def test_hf_trainer(runs) -> None:
    r = finished(runs, "hf_trainer", 200)
    assert r["steps"] == r["planned_steps"] == 10 and r["losses"][-1] < r["losses"][0]
    assert r["resumed_same"]  # stopped after checkpoint-4 and resumed by the callback: the same losses


@pytest.mark.timeout(300)
def test_bert_mlm_resumes_exactly(runs) -> None:
    r = finished(runs, "bert_mlm", 280)
    assert r["same"] and r["resumed"]["losses"] == r["full"]["losses"][16:] and len(r["resumed"]["losses"]) == 24
    assert 0.1 < r["full"]["masked_share"] < 0.2  # the labels are the masked positions, not a copy of the inputs


@pytest.mark.timeout(240)
def test_use_plan(runs) -> None:
    r = finished(runs, "use_plan", 200)
    assert sum(r["sequences_seen"].values()) == r["total_sequences"]
    assert abs(sum(r["plan_weights"].values()) - 1) < 1e-9


@pytest.mark.timeout(300)
def test_online_mixing(runs) -> None:
    r = finished(runs, "online_mixing", 280)
    assert r["same_batches"] and r["same_losses"] and r["same_log"] and r["steps"] == 40 and r["segments"] == 20


@pytest.mark.timeout(300)
def test_online_accelerate(runs) -> None:
    r = finished(runs, "online_accelerate", 280)
    assert r["same_batches"] and r["same_losses"] and r["same_log"] and r["resumed_at"] == 6


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_deepspeed_checkpoint_resume(runs) -> None:
    r = finished(runs, "deepspeed_train", 400)
    assert r["world_size"] == 2 and r["resumed_first_step"] == 3
    for rank in r["ids"]:  # each rank's resumed steps read the same samples as the uninterrupted run
        assert {s: rank["full"][s] for s in ("3", "4", "5")} == rank["resumed"]
        # ... and compute the same losses, bit for bit (dropout 0.1 included: the RNG state is restored)
        assert {s: rank["losses_full"][s] for s in ("3", "4", "5")} == rank["losses_resumed"]
        assert rank["same_losses"] is True
    assert r["ids"][0]["full"]["0"] != r["ids"][1]["full"]["0"]  # ranks read different slices
    assert r["restored"]["saved"] == pytest.approx(r["restored"]["loaded"])


def test_resume_check_says_what_it_compared(monkeypatch) -> None:
    """examples/_tiny.py's ``compare_phases`` (the verdict of megatron_external and torchtitan_train): a run
    that records no losses (torchtitan_train) is compared on its samples and says so; with losses on one
    rank, a loss that differs in its last bit fails the check; on 2 ranks only the samples are compared."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from _tiny import compare_phases

    samples = [[i % 3, i] for i in range(12)]
    report, ok = compare_phases(samples, {1: samples[4:]}, ((1, 0, 1),), per_step=4, unit="step")
    assert ok and report["1"] == {"samples": 8, "equal": True, "dp": 1, "compared": ["samples"]}
    assert not compare_phases(samples, {1: samples[5:]}, ((1, 0, 1),), per_step=4, unit="step")[1]
    losses = [5.0 - i / 7 for i in range(3)]
    full = {"samples": samples, "losses": losses}
    resumed = {"samples": samples[4:], "losses": losses[1:]}
    report, ok = compare_phases(full, {1: resumed}, ((1, 0, 1),), per_step=4, unit="step")
    assert ok and report["1"]["compared"] == ["samples", "losses"] and report["1"]["same_losses"]
    off = {**resumed, "losses": [losses[1], float(np.nextafter(losses[2], 0))]}
    report, ok = compare_phases(full, {1: off}, ((1, 0, 1),), per_step=4, unit="step")
    assert not ok and report["1"]["equal"] and not report["1"]["same_losses"]
    two_ranks = {"samples": samples[4:], "losses": [0.0]}  # other losses by design: not compared
    report, ok = compare_phases(full, {1: two_ranks}, ((1, 0, 2),), per_step=4, unit="step")
    assert ok and report["1"]["compared"] == ["samples"] and "same_losses" not in report["1"]
