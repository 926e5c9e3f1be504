"""Training throughput of the runner on this machine and the share of step time spent waiting for data.

Trains the same run (gpt2-tiny preset, context 128, micro-batch 8, byte vocabulary, synthetic
stores) with the torch backend and DataLoader workers 0 (the baseline) and 2, and with the DeepSpeed
backend (ZeRO-1, one process), and prints tokens/s, the data-wait fraction and each throughput
as a ratio to the baseline measured in the same invocation.

    python benchmarks/runner_throughput.py [--tokens 131072] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.fspath(Path(__file__).resolve().parents[1] / "tests"))

from helpers_store import write_synthetic_store  # noqa: E402

from autoscale_data.runner.config import config_from_dict  # noqa: E402
from autoscale_data.runner.planning.data import inspect_domains  # noqa: E402
from autoscale_data.runner.planning.specs import target_spec  # noqa: E402
from autoscale_data.runner.training.train import train_run, write_job  # noqa: E402


def _config(root: Path, tokens: int, threads: int, **kw) -> dict:
    return {"domains": os.fspath(root), "model": {"preset": "gpt2-tiny"}, "seq_len": 128, "micro_batch_size": 8,
            "global_batch_size": 8, "ddo": {"budgets": [tokens // 4, tokens // 2]}, "target": {"budget": tokens},
            "eval": {"heldout_tokens_per_domain": 2048, "target_points": 1}, "checkpoint_every": 10**6,
            "cpu_threads": threads, **kw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=131072)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "stores"
        for i, name in enumerate(("a", "b")):
            write_synthetic_store(root, name, args.tokens, seed=i, val_tokens=4096)
        rows = []
        for label, extra in (("torch, workers=0", {}), ("torch, workers=2", {"num_workers": 2})):
            cfg = config_from_dict(_config(root, args.tokens, args.threads, **extra))
            domains = inspect_domains(cfg)
            spec = target_spec(cfg, domains, "half", {"a": 0.5, "b": 0.5}, seed=0)
            rows.append((label, train_run(cfg, spec, domains, Path(tmp) / label.replace(" ", ""), progress=False).to_json()))
        cfg = config_from_dict(_config(root, args.tokens, args.threads, backend="deepspeed"))
        domains = inspect_domains(cfg)
        spec = target_spec(cfg, domains, "half", {"a": 0.5, "b": 0.5}, seed=0)
        job = Path(tmp) / "ds" / "job.json"
        write_job(job, cfg, spec, domains)
        env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS=str(args.threads))
        subprocess.run([sys.executable, "-m", "autoscale_data.runner.training.train", "--job", os.fspath(job)], env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows.append(("deepspeed ZeRO-1, 1 process", json.loads((job.parent / "result.json").read_text())))
    base = rows[0][1]["tokens_per_s"]
    print(f"{'setting':30} {'tokens/s':>10} {'ratio':>7} {'data wait':>10}")
    for label, r in rows:
        print(f"{label:30} {r['tokens_per_s']:10,.0f} {r['tokens_per_s'] / base:7.2f} {r['data_wait_fraction']:10.2%}")


if __name__ == "__main__":
    main()
