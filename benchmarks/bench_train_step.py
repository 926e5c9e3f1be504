"""The runner's training step against a minimal reference step of the same shape, in one invocation.

The runner's step is the trainer's own code (``runner.training.train``: the model it builds, its
per-token loss feeding the per-domain meter, gradient clipping, its AdamW and schedule; data are
pre-made batches, so no loader is timed). The reference is a plain PyTorch GPT of the same shape
written here (token and position embeddings, pre-LN blocks with SDPA causal attention and a tanh-GELU
MLP, tied head), trained by forward, ``F.cross_entropy``, backward and AdamW (fused where available:
CUDA), nothing else. Each (path, repeat) runs in its own process, the paths alternating, so both see
the same machine; a path's figure is its best repeat (other work on a shared machine only slows a
step down), and the spread over repeats is reported.

Reported per shape: tokens/s of each path and their ratio runner/reference (the headline; goal >= 0.9),
peak memory (CUDA: ``torch.cuda.max_memory_allocated``; CPU: growth of the process's peak RSS over
the step loop), and on CUDA the MFU: tokens/s x (6 N + 12 L T d) / peak, N the parameters less the
position table, peak 989e12 (dense bf16 of an H100/H200 SXM). ``--compile`` adds the runner's step
compiled (``train.compile: true``) with its compile time (the first steps' extra time), to judge
whether compiling pays for a run of a given length (each run is its own process). A third path,
``runner-gelu-new``, is the runner's step with ``model.activation: gelu_new``: HF's Python formula of the
GELU that the runner's default, ``gelu_pytorch_tanh``, computes in one PyTorch kernel (equal up to rounding;
the default before 2026-11-28, which the folders made before then keep).

``--interleaved`` times the three eager paths in one process instead, one step of each in turn (``--repeats``
times the shape's steps of each): on a machine shared with other work, load that comes and goes then slows
every path alike, which separate processes cannot promise; each path's figure is its median step.

    python benchmarks/bench_train_step.py [--shapes demo,realtext] [--repeats 3] [--compile] [--interleaved]
                                          [--json OUT]

Shapes: ``demo`` (the demo's 2 x 128 GPT-2, vocabulary 1024, context 128, batch 8, fp32, one thread as
the demo trains), ``realtext`` (the real-text experiment's 6 x 384, vocabulary 8192, context 256,
batch 2 on the CPU), ``gpt2-small`` (12 x 768, vocabulary 50257, context 1024, batch 16, bf16; CUDA),
``gpt2-large`` (36 x 1280, context 1024, batch 8, bf16; CUDA). ``--paths`` picks the paths timed (default:
``runner,reference,runner-gelu-new``, plus ``runner-compiled`` with ``--compile``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

PEAK_FLOPS = 989e12


@dataclass(frozen=True)
class Shape:
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    vocab: int
    seq_len: int
    batch: int
    precision: str
    threads: int | None = None
    steps: int = 20
    warmup: int = 3


SHAPES = {
    "demo": Shape("demo", 2, 128, 4, 1024, 128, 8, "fp32", threads=1, steps=30, warmup=5),
    "realtext": Shape("realtext", 6, 384, 6, 8192, 256, 2, "fp32", threads=1, steps=6, warmup=2),
    "gpt2-small": Shape("gpt2-small", 12, 768, 12, 50257, 1024, 16, "bf16", steps=30, warmup=5),
    "gpt2-large": Shape("gpt2-large", 36, 1280, 20, 50257, 1024, 8, "bf16", steps=10, warmup=3),
}
CUDA_BATCH = {"realtext": 128}  # batches of the CPU-sized shapes on a GPU


# ----------------------------------------------------------------------------------------- reference GPT
class _Block(torch.nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class ReferenceGPT(torch.nn.Module):
    """A plain GPT-2-shaped model: embeddings, pre-LN blocks, final LN, head tied to the embedding."""

    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(s.vocab, s.n_embd), torch.nn.Embedding(s.seq_len, s.n_embd)
        self.blocks = torch.nn.ModuleList(_Block(s.n_embd, s.n_head) for _ in range(s.n_layer))
        self.ln = torch.nn.LayerNorm(s.n_embd)
        for p in self.parameters():
            if p.dim() >= 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.wte.weight.T


# ------------------------------------------------------------------------------------------------ paths
def _runner_step(s: Shape, device: torch.device, compile_: bool, gelu: str | None = None) -> tuple[Any, int]:
    """The trainer's own step (``_micro_step`` + ``_optimizer_step``) on a model it builds."""
    from autoscale_data.dataset import DomainLossMeter
    from autoscale_data.runner.config import config_from_dict
    from autoscale_data.runner.planning.settings import TrainingSettings
    from autoscale_data.runner.training import train as train_mod
    from autoscale_data.runner.training.dist import DistInfo

    raw = {"domains": {"a": "a", "b": "b"}, "seq_len": s.seq_len, "micro_batch_size": s.batch,
           "global_batch_size": s.batch, "precision": s.precision, "device": device.type,
           "model": {"preset": "gpt2-tiny", "activation": gelu,
                     "overrides": {"n_layer": s.n_layer, "n_embd": s.n_embd, "n_head": s.n_head}},
           "ddo": {"budgets": [s.batch * s.seq_len * 1000, s.batch * s.seq_len * 2000]},
           "target": {"budget": s.batch * s.seq_len * 4000}}
    # explicit both ways (the runner's default, ``auto``, compiles on CUDA); bench_small_proxies.py sets the mode
    # through the environment
    raw["train"] = {"compile": compile_, "compile_mode": os.environ.get("AUTOSCALE_COMPILE_MODE", "default")}
    config = config_from_dict(raw)
    domains = SimpleNamespace(vocab_size=s.vocab, eos_id=0, names=("a", "b"), fingerprints={"a": "a", "b": "b"})
    settings = TrainingSettings.of(config, domains)  # type: ignore[arg-type]
    spec = SimpleNamespace(total_sequences=s.batch * 10**6, parent_sequences=0, keeps_model=False, kind="proxy",
                           extension=None, settings=settings, training=settings, seed=0, seq_len=s.seq_len, run_id="bench")
    info = DistInfo(rank=0, world_size=1, local_rank=0, device=device, initialized_here=False)
    trainer = train_mod._Trainer(config, spec, domains, Path(tempfile.gettempdir()), info)  # type: ignore[arg-type]
    trainer._build()
    trainer.meter = DomainLossMeter(["a", "b"])
    trainer.forward.train()
    domain = torch.arange(s.batch) % 2

    def step(ids: torch.Tensor, i: int) -> None:
        trainer._micro_step(ids, domain, i, 0)
        trainer._optimizer_step()

    return step, trainer.num_params - s.seq_len * s.n_embd


def _reference_step(s: Shape, device: torch.device) -> tuple[Any, int]:
    torch.manual_seed(0)
    model = ReferenceGPT(s).to(device)
    fused = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **fused)
    bf16 = s.precision == "bf16"

    def step(ids: torch.Tensor, i: int) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, s.vocab).float(), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        float(loss.detach())  # the runner reads its loss every step too

    n = sum(p.numel() for p in model.parameters()) - s.seq_len * s.n_embd
    return step, n


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _path_step(path: str, s: Shape, device: torch.device) -> tuple[Any, int]:
    if s.threads and device.type == "cpu":
        torch.set_num_threads(s.threads)
    return (_reference_step(s, device) if path == "reference" else
            _runner_step(s, device, compile_=path == "runner-compiled",
                         gelu="gelu_new" if path == "runner-gelu-new" else None))


def _batches(s: Shape, device: torch.device) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randint(0, s.vocab, (s.batch, s.seq_len), generator=gen).to(device) for _ in range(4)]


def child(path: str, s: Shape, device: torch.device) -> dict[str, Any]:
    """Time one path in this process: warm-up steps (with any compilation), then ``s.steps`` timed steps."""
    t_build = time.perf_counter()
    step, n = _path_step(path, s, device)
    rss0 = _rss_mib()
    batches = _batches(s, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for i in range(s.warmup):
        step(batches[i % 4], i)
    _sync(device)
    warm_s = time.perf_counter() - t0
    times = []
    for i in range(s.steps):
        t = time.perf_counter()
        step(batches[i % 4], i)
        _sync(device)
        times.append(time.perf_counter() - t)
    median = sorted(times)[len(times) // 2]
    tokens = s.batch * s.seq_len
    out = {"path": path, "shape": s.name, "device": _device_name(device), "params_less_positions": n,
           "step_s": median, "tokens_per_s": tokens / median, "warmup_s": warm_s,
           "first_steps_extra_s": warm_s - s.warmup * median, "build_s": t0 - t_build,
           "peak_memory_mib": (torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda"
                               else _rss_mib() - rss0)}
    if device.type == "cuda":
        flops = 6 * n + 12 * s.n_layer * s.seq_len * s.n_embd
        out["mfu"] = out["tokens_per_s"] * flops / PEAK_FLOPS
    return out


def interleaved(s: Shape, device: torch.device, rounds: int) -> dict[str, Any]:
    """The eager paths in this process, one step of each in turn for ``rounds`` rounds (after the shape's
    warm-up): each path's median step as tokens/s, and the ratio runner / reference."""
    paths = ["runner", "reference", "runner-gelu-new"]
    steps = {p: _path_step(p, s, device)[0] for p in paths}
    batches = _batches(s, device)
    for i in range(s.warmup):
        for p in paths:
            steps[p](batches[i % 4], i)
    times: dict[str, list[float]] = {p: [] for p in paths}
    for i in range(rounds):
        for p in paths:
            t = time.perf_counter()
            steps[p](batches[i % 4], s.warmup + i)
            _sync(device)
            times[p].append(time.perf_counter() - t)
    rates = {p: s.batch * s.seq_len / sorted(ts)[len(ts) // 2] for p, ts in times.items()}
    return {"shape": asdict(s), "device": _device_name(device), "rounds": rounds, "tokens_per_s": rates,
            "ratio": rates["runner"] / rates["reference"]}


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({os.cpu_count()} cores)"


def _run_child(path: str, shape: Shape, device: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", path, "--shape", json.dumps(asdict(shape)), "--device", device]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{path} on {shape.name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


EAGER_PATHS = ("runner", "reference", "runner-gelu-new")


def compare(shape: Shape, device: str, repeats: int, compiled: bool,
            paths: tuple[str, ...] = EAGER_PATHS) -> dict[str, Any]:
    """Alternate the paths ``repeats`` times (one process each); best and spread per path, and the ratio."""
    paths = tuple(paths) + (("runner-compiled",) if compiled and "runner-compiled" not in paths else ())
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
    for _ in range(repeats):
        for p in paths:
            runs[p].append(_run_child(p, shape, device))
    summary: dict[str, Any] = {"shape": asdict(shape), "device": runs["runner"][0]["device"]}
    for p, rs in runs.items():
        rates = [r["tokens_per_s"] for r in rs]
        best = max(rs, key=lambda r: r["tokens_per_s"])
        summary[p] = {**best, "tokens_per_s_all": rates, "spread": (max(rates) - min(rates)) / max(rates)}
    summary["ratio"] = summary["runner"]["tokens_per_s"] / summary["reference"]["tokens_per_s"]
    if compiled:
        c, r = summary["runner-compiled"], summary["runner"]
        summary["compile_speedup"] = c["tokens_per_s"] / r["tokens_per_s"]
        saved_per_token = 1 / r["tokens_per_s"] - 1 / c["tokens_per_s"]
        summary["compile_pays_after_tokens"] = (c["first_steps_extra_s"] / saved_per_token if saved_per_token > 0
                                                else math.inf)
    return summary


def _line(name: str, r: dict[str, Any]) -> str:
    mfu = f", MFU {r['mfu']:.1%}" if "mfu" in r else ""
    rates = "/".join(f"{v:,.0f}" for v in r["tokens_per_s_all"])
    return (f"  {name:16s} {r['tokens_per_s']:>10,.0f} tokens/s (repeats {rates}; spread {r['spread']:.0%}), "
            f"step {r['step_s'] * 1e3:.1f} ms, peak memory {r['peak_memory_mib']:.0f} MiB{mfu}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=None, help="comma-separated of " + ", ".join(SHAPES))
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=None, help="timed steps a process (default: the shape's)")
    ap.add_argument("--compile", action="store_true", help="also time the runner's step compiled")
    ap.add_argument("--paths", default=",".join(EAGER_PATHS),
                    help="comma-separated paths to time: runner, reference, runner-gelu-new, runner-compiled")
    ap.add_argument("--interleaved", action="store_true",
                    help="time the eager paths in one process, one step of each in turn (a shared machine)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--shape", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        shape = Shape(**json.loads(args.shape))
        print(json.dumps(child(args.child, shape, torch.device(args.device))))
        return 0
    paths = tuple(args.paths.split(","))
    if not {"runner", "reference"} <= set(paths) or not set(paths) <= {*EAGER_PATHS, "runner-compiled"}:
        ap.error(f"--paths {args.paths!r}: expected runner and reference, and only of "
                 f"{', '.join((*EAGER_PATHS, 'runner-compiled'))}")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    names = args.shapes.split(",") if args.shapes else (["demo", "realtext"] if device == "cpu" else list(SHAPES))
    results = []
    for name in names:
        shape = SHAPES[name]
        if device == "cuda":
            shape = Shape(**{**asdict(shape), "threads": None, "precision": "bf16",
                             "batch": CUDA_BATCH.get(name, shape.batch), "steps": 30, "warmup": 5})
        if args.steps:
            shape = Shape(**{**asdict(shape), "steps": args.steps})
        if args.interleaved:
            r = interleaved(shape, torch.device(device), args.repeats * shape.steps)
            results.append(r)
            print(f"{name} on {r['device']}, interleaved in one process ({r['rounds']} steps of each): "
                  f"runner / reference = {r['ratio']:.3f}")
            for p, rate in r["tokens_per_s"].items():
                print(f"  {p:16s} {rate:>10,.0f} tokens/s (median step)")
            continue
        r = compare(shape, device, args.repeats, args.compile, paths)
        results.append(r)
        if args.json:  # after each shape: a stopped invocation keeps the shapes it finished
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))
        print(f"{name} on {r['device']}: runner / reference = {r['ratio']:.3f}")
        for p in ("runner", "reference", "runner-gelu-new", "runner-compiled"):
            if p in r:
                print(_line(p, r[p]))
        if "compile_speedup" in r:
            print(f"  compiled: {r['compile_speedup']:.2f}x steady state, {r['runner-compiled']['first_steps_extra_s']:.1f} s "
                  f"to compile; pays after {r['compile_pays_after_tokens']:,.0f} tokens of one run")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
