"""Index benchmark: the closed-form mixture stream from 1B to 15T tokens, and throughput against the
materialized index it replaced, in one run.

    python benchmarks/bench_index.py [--quick] [--reps 3] [--baseline /path/to/older/checkout]

Three parts, each in fresh subprocesses (so memory growth and first-sample time are per process):

1. The stream alone (``autoscale_data.mixing.MixtureStream``) at 1B, 100B, 1T and 15T tokens,
   seq_len 2048, 7 domains at the LLaMA-1 weights, each domain holding exactly its share
   (``commoncrawl`` 4.9B sequences at 15T): no store that large can exist on this disk, so the
   domains' sizes are given as numbers (the stream never reads tokens). Reported: the stream's
   tables, the process's peak RSS growth while building it and looking up the first 1024 positions,
   time to the first position, and resume (per-domain counts of a late cursor + the next 1024
   positions; best of 5).
2. The dataset (``ScaleAwareMixtureDataset``) end to end at the same budgets on 7 small real stores
   (``max_epochs`` high enough to allow the repetition): construction + first sample, RSS growth,
   resume (``load_state_dict`` + first sample at 1% / 50% / 99%; best of 5).
3. In-process throughput of compact batches of 8 x 2048 (the ``bench_loader`` measure) of this
   checkout against ``--baseline`` (a checkout with the materialized index, its package copied
   under another name and imported into the same process; default: none), alternating, medians; and
   the baseline's first-sample time and peak RSS growth at 1B and 10B tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_loader import LLAMA1, SEQ_LEN, resume_seconds, write_stores  # noqa: E402

BUDGETS = {"1B": 10**9, "100B": 10**11, "1T": 10**12, "15T": 15 * 10**12}
CHUNK = 1024


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _reset_peak() -> int:
    """Reset the kernel's peak-RSS mark of this process (Linux ``clear_refs`` 5); returns the RSS now."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _rss()


def _peak() -> int:
    """Peak RSS since the last :func:`_reset_peak` (``VmHWM``), else the RSS now."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _rss()


def worker_stream(budget: int) -> dict[str, Any]:
    """Part 1, in a fresh process: the stream of ``budget`` tokens with fake domain sizes."""
    from autoscale_data.mixing import MixtureStream, largest_remainder

    rss0 = _reset_peak()
    t0 = time.perf_counter()
    total = budget // SEQ_LEN
    counts = largest_remainder(list(LLAMA1.values()), total)
    names = list(LLAMA1)
    stream = MixtureStream(names, counts.tolist(), 0, [0, total], counts[None, :])
    d, s = stream.lookup(np.arange(CHUNK, dtype=np.int64))
    first = time.perf_counter() - t0
    rss1 = _peak()
    resume = []
    for _ in range(5):
        t = time.perf_counter()
        cursor = int(total * 0.99)
        stream.domain_counts(cursor)
        stream.lookup(np.arange(cursor, cursor + CHUNK, dtype=np.int64))
        resume.append(time.perf_counter() - t)
    return {"total": total, "largest_domain": int(counts.max()), "nbytes": stream.nbytes, "rss_growth": rss1 - rss0,
            "first_s": first, "resume_s": min(resume)}


def worker_dataset(stores: str, budget: int) -> dict[str, Any]:
    """Part 2 (and the baseline's memory/first sample), in a fresh process: the dataset of ``budget`` tokens."""
    from autoscale_data.dataset import ScaleAwareMixtureDataset

    paths = json.loads(stores)
    rss0 = _reset_peak()
    t0 = time.perf_counter()
    ds = ScaleAwareMixtureDataset(paths, LLAMA1, budget, SEQ_LEN, seed=0, verify="size", max_epochs=10**7)
    x = next(iter(ds))
    first = time.perf_counter() - t0
    rss1 = _peak()
    assert x["input_ids"].shape == (SEQ_LEN,)
    total = ds.total_sequences
    resume = resume_seconds(ds)
    return {"total": total, "first_s": first, "rss_growth": rss1 - rss0, "resume_s": resume}


def _batch_rate(ds: Any, batches: int) -> float:
    """Tokens/s of ``batches`` compact batches after the first (in process)."""
    it = iter(ds)
    next(it)
    tokens = 0
    t = time.perf_counter()
    for _, b in zip(range(batches - 1), it, strict=False):
        tokens += b["input_ids"].numel()
    return tokens / (time.perf_counter() - t)


def worker_throughput(stores: str, batches: int, baseline: str, reps: int) -> dict[str, Any]:
    """Part 3, in one process: compact batches of 8 x 2048 of this checkout and of the baseline
    (its package copied under another name), alternating, ``reps`` times each; tokens/s."""
    import shutil

    import torch

    from autoscale_data.dataset import ScaleAwareMixtureDataset

    torch.set_num_threads(1)
    paths = json.loads(stores)
    contenders = {"this checkout": ScaleAwareMixtureDataset}
    if baseline:
        tmp = tempfile.mkdtemp(prefix="bench-index-baseline-")
        shutil.copytree(Path(baseline) / "autoscale_data", Path(tmp) / "autoscale_data_baseline")
        sys.path.insert(0, tmp)
        from autoscale_data_baseline.dataset import ScaleAwareMixtureDataset as Baseline  # type: ignore[import-not-found]

        contenders["baseline"] = Baseline
    budget = batches * 8 * SEQ_LEN * 4
    datasets = {name: cls(paths, LLAMA1, budget, SEQ_LEN, seed=0, verify="size", max_epochs=10, batch_size=8,
                          output="compact") for name, cls in contenders.items()}
    rates: dict[str, list[float]] = {name: [] for name in datasets}
    names = list(datasets)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[: rep % len(names)]:
            rates[name].append(_batch_rate(datasets[name], batches))
    return rates


def run(mode: str, args: list[str], pythonpath: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", mode, *args], env=env,
                         capture_output=True, text=True, check=False, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"worker {mode} {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1B and 100B only, fewer batches")
    parser.add_argument("--reps", type=int, default=3, help="interleaved throughput repetitions")
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout with the materialized index")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        mode, *rest = args.worker
        fn = {"stream": lambda: worker_stream(int(rest[0])), "dataset": lambda: worker_dataset(rest[0], int(rest[1])),
              "throughput": lambda: worker_throughput(rest[0], int(rest[1]), rest[2], int(rest[3]))}[mode]
        print(json.dumps(fn()))
        return 0
    repo = HERE.parent
    budgets = {k: v for k, v in BUDGETS.items() if not args.quick or v <= 10**11}
    lines = []
    for label, budget in budgets.items():
        r = run("stream", [str(budget)], repo)
        lines.append(f"stream {label:>4} ({r['total']:,} seqs, largest domain {r['largest_domain']:,}): tables "
                     f"{r['nbytes']} B, peak RSS growth {r['rss_growth'] / 2**20:.1f} MiB, first position "
                     f"{r['first_s'] * 1e3:.1f} ms, resume {r['resume_s'] * 1e3:.2f} ms")
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        stores = json.dumps({k: str(v) for k, v in write_stores(Path(tmp), 20_000_000).items()})
        for label, budget in budgets.items():
            r = run("dataset", [stores, str(budget)], repo)
            lines.append(f"dataset {label:>4} ({r['total']:,} seqs): first sample {r['first_s'] * 1e3:.0f} ms, "
                         f"peak RSS growth {r['rss_growth'] / 2**20:.1f} MiB, resume early / middle / late "
                         + " / ".join(f"{v * 1e3:.1f}" for v in r["resume_s"].values()) + " ms")
        if args.baseline is not None:
            for label, budget in (("1B", 10**9), ("10B", 10**10)):
                r = run("dataset", [stores, str(budget)], args.baseline)
                lines.append(f"baseline dataset {label:>4} ({r['total']:,} seqs): first sample "
                             f"{r['first_s'] * 1e3:.0f} ms, peak RSS growth {r['rss_growth'] / 2**20:.1f} MiB, resume "
                             "early / middle / late " + " / ".join(f"{v * 1e3:.1f}" for v in r["resume_s"].values())
                             + " ms")
        batches = 600 if args.quick else 2500
        rates = run("throughput", [stores, str(batches), str(args.baseline or ""), str(args.reps)], repo)
        for name, v in rates.items():
            lines.append(f"compact batches 8x2048 in process, {name}: median {np.median(v) / 1e9:.3f}G tokens/s "
                         f"(range {min(v) / 1e9:.3f}-{max(v) / 1e9:.3f}, {len(v)} reps)")
        if args.baseline is not None:
            ratios = [a / b for a, b in zip(rates["this checkout"], rates["baseline"], strict=True)]
            ratio = np.median(rates["this checkout"]) / np.median(rates["baseline"])
            lines.append(f"throughput ratio this checkout / baseline: {ratio:.2f}x (per repetition: "
                         + " ".join(f"{r:.2f}" for r in ratios) + ")")
    print(f"# bench_index  {time.strftime('%Y-%m-%d')}  {platform.machine()}  {os.cpu_count()} CPUs  "
          f"python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
