"""Wall time of the whole tiny-cpu plan (18 runs) under each executor, as a ratio to sequential.

Runs ``autoscale-data run examples/tiny-cpu.yaml`` in a fresh output directory per setting:
sequential (``max_parallel: 1``, in the runner's process: the baseline), ``local`` with 2 slots,
``ray`` with 2 actors (a Ray started by the runner), submitit's local executor with 2 jobs at once
(``slurm: {cluster: local}``), and real Slurm with 2 jobs at once when ``sinfo`` answers (start one
with ``scripts/slurm-local.sh``). Every setting must give the same results as the sequential one
(per-domain losses, curves and tokens of every run, bit for bit); the table says so per row.

    python benchmarks/bench_executor.py [--out DIR] [--only local,ray] [--max-parallel 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tiny-cpu.yaml"
_TIMING = {"wall_time_s", "train_time_s", "eval_time_s", "data_wait_s", "data_wait_fraction", "tokens_per_s",
           "finished_at"}


def _settings(parallel: int) -> dict[str, dict]:
    settings = {
        "sequential": {"max_parallel": 1},
        f"local x{parallel}": {"kind": "local", "max_parallel": parallel},
        f"ray x{parallel}": {"kind": "ray", "max_parallel": parallel},
        f"submitit-local x{parallel}": {"kind": "slurm", "max_parallel": parallel,
                                        "slurm": {"cluster": "local", "time_min": 30}},
    }
    if shutil.which("sinfo") and subprocess.run(["sinfo"], capture_output=True).returncode == 0:
        settings[f"slurm x{parallel}"] = {"kind": "slurm", "max_parallel": parallel, "slurm": {"time_min": 30}}
    return settings


def _results(out: Path) -> dict[str, dict]:
    return {p.parent.name: {k: v for k, v in json.loads(p.read_text()).items() if k not in _TIMING}
            for p in (out / "runs").glob("*/result.json")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--only", default="", help="comma-separated setting prefixes (sequential always runs)")
    parser.add_argument("--max-parallel", type=int, default=2)
    args = parser.parse_args()
    import yaml

    from autoscale_data.runner.config import load_config

    work = Path(args.out or tempfile.mkdtemp(prefix="bench-executor-"))
    work.mkdir(parents=True, exist_ok=True)
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["domains"] = os.fspath(load_config(EXAMPLE).resolve(raw["domains"]))
    if not Path(raw["domains"]).is_dir():
        subprocess.run([sys.executable, "-m", "autoscale_data.cli", "demo", "--stores", raw["domains"]], check=True)
    only = [p for p in args.only.split(",") if p]
    rows, base_results, base_time = [], None, None
    for label, executor in _settings(args.max_parallel).items():
        if label != "sequential" and only and not any(label.startswith(p) for p in only):
            continue
        name = label.replace(" ", "")
        cfg = work / f"{name}.json"
        cfg.write_text(json.dumps({**raw, "executor": executor}))
        out = work / name
        shutil.rmtree(out, ignore_errors=True)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "autoscale_data.cli", "run", os.fspath(cfg), "--out",
                               os.fspath(out), "--no-progress"], capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            print(f"{label}: failed\n{proc.stderr[-2000:]}")
            rows.append((label, seconds, None, "failed", load))
            continue
        results = _results(out)
        if base_results is None:
            base_results, base_time = results, seconds
        same = "yes" if results == base_results else "NO"
        rows.append((label, seconds, seconds / base_time, same, load))
        print(f"{label}: {seconds:.1f} s ({len(results)} runs, load {load:.1f})", flush=True)
    print(f"\ntiny-cpu plan ({len(base_results or {})} runs), {os.cpu_count()} cores, one thread per run")
    print("| executor | wall time | ratio to sequential | same results | load avg at start |")
    print("|---|---:|---:|:---:|---:|")
    for label, seconds, ratio, same, load in rows:
        print(f"| {label} | {seconds:.1f} s | {'' if ratio is None else f'{ratio:.2f}'} | {same} | {load:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
