"""Training throughput of the runner on a GPU: tokens/s, MFU and the share of step time spent waiting for data.

Trains ``--preset`` (default gpt2-small, context 1024) with the DeepSpeed backend in bf16 (ZeRO-1, one
process) twice through the runner's own training loop: fed by ScaleAwareMixtureDataset (the product,
DataLoader workers 2, pinned memory) and by a raw memmap loader (random windows of one uint16 memmap
per domain, nothing else: the baseline, measured in the same invocation). Then one short run of
``--large-preset`` (default gpt2-large) shows that preset fits, with its peak GPU memory.

Steady-state tokens/s come from the per-step clock after ``--warmup`` steps (the loop synchronises
every micro-step when it reads the loss, so step ends are real). MFU counts 6 N + 12 L d T FLOPs a
token (N the parameters less the position table; PaLM, appendix B) against ``--peak-tflops``
(dense bf16 of an H100/H200 SXM, 989) and against a bf16 matmul measured here.

    python benchmarks/gpu_throughput.py --out DIR [--steps 60] [--micro 16] [--large-steps 6]

Each case runs in its own process; DIR gets one JSON per case and ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.fspath(Path(__file__).resolve().parents[1] / "tests" / "common"))

from helpers_store import write_synthetic_store  # noqa: E402

from autoscale_data.runner.config import config_from_dict  # noqa: E402
from autoscale_data.runner.planning.data import inspect_domains  # noqa: E402
from autoscale_data.runner.planning.specs import target_spec  # noqa: E402
from autoscale_data.runner.training import train as train_mod  # noqa: E402
from autoscale_data.store import TokenStore  # noqa: E402

GPT2_VOCAB = 50257
DOMAINS = ("a", "b")


class RawMemmapBatches(torch.utils.data.IterableDataset):
    """The baseline loader: batches of random ``seq_len`` windows of one memmap per domain (uniform pick)."""

    def __init__(self, paths: dict[str, str], seq_len: int, batch: int, batches: int, seed: int) -> None:
        self.domain_names = list(paths)
        self.arrays = [TokenStore(p, verify="size").train.shard(0) for p in paths.values()]
        self.seq_len, self.batch, self.batches, self.seed = seq_len, batch, batches, seed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        rng = np.random.default_rng([self.seed, wid])
        for _ in range(wid, self.batches, nw):
            dom = rng.integers(len(self.arrays), size=self.batch)
            rows = []
            for d in dom:
                arr = self.arrays[d]
                start = int(rng.integers(arr.shape[0] - self.seq_len))
                rows.append(arr[start:start + self.seq_len])
            yield {"input_ids": torch.from_numpy(np.stack(rows)), "domain": torch.from_numpy(dom.astype(np.int64))}


def _config(root: Path, preset: str, seq_len: int, micro: int, steps: int, device: str) -> dict[str, Any]:
    tokens = steps * micro * seq_len
    return {"domains": os.fspath(root), "model": {"preset": preset}, "seq_len": seq_len, "micro_batch_size": micro,
            "global_batch_size": micro, "ddo": {"budgets": [tokens // 4, tokens // 2]}, "target": {"budget": tokens, "keep_checkpoints": False},
            "eval": {"heldout_tokens_per_domain": 4 * seq_len, "target_points": 1}, "checkpoint_every": 10**6,
            "backend": "deepspeed", "precision": "bf16", "deepspeed": {"zero_stage": 1, "single_process": "deepspeed"},
            "num_workers": 2,
            "device": device}


def run_case(args: argparse.Namespace) -> None:
    """One case in this process: train, then write the result with step clock and peak memory."""
    cfg = config_from_dict(_config(Path(args.stores), args.preset, args.seq_len, args.micro, args.steps, args.device))
    cuda = args.device == "cuda"
    domains = inspect_domains(cfg)
    spec = target_spec(cfg, domains, "half", {d: 1 / len(domains.names) for d in domains.names}, seed=0)
    if args.case == "memmap":
        real = train_mod._datasets

        def raw(config, spec, domains, info, continue_from, micro=None):
            _, val = real(config, spec, domains, info, continue_from, micro)
            micro = micro or config.micro_batch_size
            return RawMemmapBatches(domains.paths, spec.seq_len, micro, spec.total_sequences // micro, spec.seed), val

        train_mod._datasets = raw
    ends: list[float] = []
    step = train_mod._Trainer._optimizer_step

    def timed(self):
        step(self)
        ends.append(time.perf_counter())

    train_mod._Trainer._optimizer_step = timed
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    result = train_mod.train_run(cfg, spec, domains, Path(args.out) / f"run-{args.case}", progress=False)
    gaps = np.diff(ends[args.warmup:])
    tokens_per_step = args.micro * args.seq_len
    out = {"case": args.case, "preset": args.preset, "seq_len": args.seq_len, "micro_batch": args.micro,
           "steps": len(ends), "parameters": result.parameters, "device": result.device,
           "tokens_per_s_whole_run": result.tokens_per_s, "data_wait_fraction": result.data_wait_fraction,
           "step_s_median": float(np.median(gaps)) if len(gaps) else None,
           "tokens_per_s_steady": tokens_per_step / float(np.mean(gaps)) if len(gaps) else None,
           "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None, "final_loss": result.final_train_loss,
           "torch": torch.__version__}
    Path(args.out, f"{args.case}.json").write_text(json.dumps(out, indent=1))


def matmul_tflops() -> float:
    """bf16 8192^3 matmul rate on this GPU (mean of 10 after 3 warm-ups)."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 2 * 8192**3 * 10 / (time.perf_counter() - t) / 1e12


def flops_per_token(preset: str, seq_len: int, parameters: int) -> float:
    """6 N + 12 L d T with N the parameters less the position table."""
    from autoscale_data.runner.models import PRESETS

    p = PRESETS[preset]
    layers, width = p["n_layer"], p["n_embd"]
    return 6 * (parameters - seq_len * width) + 12 * layers * width * seq_len


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--preset", default="gpt2-small")
    parser.add_argument("--large-preset", default="gpt2-large")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--micro", type=int, default=16)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--large-steps", type=int, default=6)
    parser.add_argument("--large-micro", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--device", default="cuda", help="cuda (the benchmark); cpu only to try the script")
    parser.add_argument("--case", choices=["mixture", "memmap", "large"], help=argparse.SUPPRESS)
    parser.add_argument("--stores", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        return run_case(args)
    out = Path(args.out)
    stores = out / "stores"
    tokens = max(args.steps * args.micro, args.large_steps * args.large_micro) * args.seq_len
    for i, name in enumerate(DOMAINS):  # one shard per domain: the raw loader maps it whole
        if not (stores / name / "manifest.json").exists():
            write_synthetic_store(stores, name, tokens, vocab_size=GPT2_VOCAB, seed=i, val_tokens=8 * args.seq_len,
                                  shard_tokens=tokens, mean_doc_tokens=2048)
    cases = [("mixture", args.preset, args.steps, args.micro), ("memmap", args.preset, args.steps, args.micro),
             ("large", args.large_preset, args.large_steps, args.large_micro)]
    cuda = args.device == "cuda"
    summary: dict[str, Any] = {"matmul_bf16_tflops": matmul_tflops() if cuda else 1.0, "peak_tflops": args.peak_tflops,
                               "date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0) if cuda else "cpu"}
    if cuda:
        torch.cuda.empty_cache()
    for case, preset, steps, micro in cases:
        cmd = [sys.executable, __file__, "--out", os.fspath(out), "--case", case, "--stores", os.fspath(stores),
               "--preset", preset, "--steps", str(steps), "--micro", str(micro), "--seq-len", str(args.seq_len),
               "--warmup", str(min(args.warmup, steps // 2)), "--device", args.device]
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            summary[case] = {"error": done.stderr[-3000:]}
            print(f"{case}: FAILED\n{done.stderr[-3000:]}", flush=True)
            continue
        r = json.loads((out / f"{case}.json").read_text())
        r["wall_s"] = time.perf_counter() - t
        if r["tokens_per_s_steady"]:
            achieved = r["tokens_per_s_steady"] * flops_per_token(preset, args.seq_len, r["parameters"]) / 1e12
            r.update(model_tflops=achieved, mfu=achieved / args.peak_tflops,
                     mfu_vs_matmul=achieved / summary["matmul_bf16_tflops"])
        summary[case] = r
        print(json.dumps({case: r}), flush=True)
    if "error" not in summary["mixture"] and "error" not in summary["memmap"]:
        summary["mixture_vs_memmap"] = summary["mixture"]["tokens_per_s_steady"] / summary["memmap"]["tokens_per_s_steady"]
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary.get(k) for k in ("gpu", "matmul_bf16_tflops", "mixture_vs_memmap")}))


if __name__ == "__main__":
    main()
