"""Shared helpers for the runner tests: tiny configs over synthetic stores, and finished runs written by hand."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers_store import write_synthetic_store

__all__ = ["Stopped", "dies_after_checkpoints", "fake_config", "fake_curve", "fake_run", "kill_runner_when", "tiny_config",
           "tiny_stores"]


def tiny_stores(root: Path, names: tuple[str, ...] = ("a", "b"), num_tokens: int = 40_000,
                val_tokens: int = 2_048) -> Path:
    """Synthetic byte-vocabulary stores ``root/<name>`` (a prepare-style directory)."""
    for i, name in enumerate(names):
        if not (root / name / "manifest.json").exists():
            write_synthetic_store(root, name, num_tokens, seed=i, val_tokens=val_tokens)
    return root


def tiny_config(domains: str | os.PathLike[str], **overrides: Any) -> dict[str, Any]:
    """A config dict small enough to train in a second or two per run on one CPU thread."""
    cfg: dict[str, Any] = {
        "name": "test",
        "domains": os.fspath(domains),
        "model": {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 32, "n_head": 2}},
        "seq_len": 32,
        "micro_batch_size": 4,
        "global_batch_size": 8,
        "optimizer": {"lr": 3e-3},
        "ddo": {"budgets": [4096, 8192], "min_weight": 0.05, "objective": "mean_loss"},
        "target": {"budget": 16384, "baselines": ["uniform", "ddo_n2"]},
        "eval": {"heldout_tokens_per_domain": 512, "proxy_points": 1, "target_points": 4},
        "checkpoint_every": 4,
        "cpu_threads": 1,
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def fake_curve(values: list[float], shares: list[dict[str, int]] | None = None) -> list[dict[str, Any]]:
    """An evaluation curve: ``mean_loss`` = ``values[i]`` at ``1000 * (i + 1)`` tokens (and the domain tokens seen)."""
    return [{"tokens": 1000 * (i + 1), "mean_loss": v, **({"domain_tokens": shares[i]} if shares else {})}
            for i, v in enumerate(values)]


def fake_domains(out: Path, names: Sequence[str] = ("a", "b")) -> None:
    """``OUT/domains.json`` of stores ``names`` (paths, token counts and tokenizer made up)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "domains.json").write_text(json.dumps({
        "names": list(names), "paths": {d: f"/stores/{d}" for d in names}, "train_tokens": {d: 1000 for d in names},
        "val_tokens": {d: 100 for d in names}, "fingerprints": {d: "0" for d in names}, "vocab_size": 64, "eos_id": 0,
        "tokenizer": "byte"}))


def fake_config(out: Path, baselines: Sequence[str], budgets: Sequence[int] = (1000, 2000), **top: Any) -> None:
    """A valid ``config.json`` of a folder written by hand: one-token sequences, DDO at ``budgets``, a target of
    4000 tokens (:func:`fake_run`'s) with ``baselines``, and ``top``'s keys."""
    config = {"domains": "/stores", "seq_len": 1, "micro_batch_size": 1, "global_batch_size": 1,
              "ddo": {"budgets": list(budgets)}, "target": {"budget": 4000, "baselines": list(baselines)}, **top}
    (out / "config.json").write_text(json.dumps(config))


def fake_run(out: Path, run_id: str, label: str, seed: int, values: list[float], schedule: str = "fixed",
             plan: dict[str, Any] | None = None, *, kind: str = "target", scale: int = 4000,
             train_losses: bool = False) -> None:
    """A finished run of domains ``a`` and ``b`` under ``OUT/runs/<run_id>`` (``spec.json`` and ``result.json``).

    Both domains' validation loss is ``values`` along the curve; with ``train_losses`` every point also
    records a training loss per domain (``a`` 0.1 above the validation loss, ``b`` 0.1 below).
    """
    run_dir = out / "runs" / run_id
    run_dir.mkdir(parents=True)
    spec = {"run_id": run_id, "kind": kind, "scale": scale, "label": label, "seed": seed, "sequences": {"a": 1, "b": 3},
            "seq_len": 1, "eval_points": len(values)}
    if schedule != "fixed":
        spec.update(schedule=schedule, plan=plan)
    curve = [{**p, "losses": {"a": p["mean_loss"], "b": p["mean_loss"]},
              "domain_tokens": {"a": p["tokens"] // 4, "b": p["tokens"] - p["tokens"] // 4},
              **({"train_losses": {"a": p["mean_loss"] + 0.1, "b": p["mean_loss"] - 0.1}} if train_losses else {})}
             for p in fake_curve(values)]
    result = {"run_id": run_id, "seed": seed, "curve": curve, "losses": curve[-1]["losses"],
              "mean_loss": values[-1], "total_tokens": curve[-1]["tokens"], "weights": {"a": 0.25, "b": 0.75},
              "tokens_per_s": 1000.0, "data_wait_fraction": 0.0, "device": "cpu", "wall_time_s": 1.0}
    (run_dir / "spec.json").write_text(json.dumps(spec))
    (run_dir / "result.json").write_text(json.dumps(result))


def kill_runner_when(cmd: Sequence[str], ready: Callable[[], bool], *, timeout: float = 400,
                     settle: float = 0.0) -> dict[str, str]:
    """Start the runner ``cmd``, SIGKILL it once ``ready()`` holds (plus ``settle`` seconds); returns its env.

    Fails if the runner ends first or ``ready()`` does not hold within ``timeout`` seconds.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(list(cmd), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    try:
        while not ready():
            assert proc.poll() is None, "the runner ended before it could be killed"
            assert time.time() < deadline
            time.sleep(0.05)
        time.sleep(settle)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return env


class Stopped(Exception):
    """What :func:`dies_after_checkpoints` raises where the training process would be killed."""


@contextmanager
def dies_after_checkpoints(monkeypatch: pytest.MonkeyPatch, count: int = 1,
                           when: Callable[[Any, Any], bool] | None = None) -> Iterator[list[Any]]:
    """Within the block the trainer stops (raises :class:`Stopped`) right after its ``count``-th checkpoint (of
    those for which ``when(trainer, state)`` holds, if given), as a process killed there would; yields the steps
    it saved (with ``when``: the id of the run it stopped). The block must stop so; after it the trainer saves as
    before."""
    from autoscale_data.runner.training import train as train_mod

    real = train_mod.save_checkpoint
    saves: list[Any] = []

    def save_then_die(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        trainer, state = args[1], args[3]
        if when is None or when(trainer, state):
            saves.append(state.step if when is None else trainer.spec.run_id)
            if len(saves) == count:
                raise Stopped

    monkeypatch.setattr(train_mod, "save_checkpoint", save_then_die)
    try:
        with pytest.raises(Stopped):
            yield saves
    finally:
        monkeypatch.setattr(train_mod, "save_checkpoint", real)
