"""Cost of ``DomainLossMeter.update`` per training step, as a ratio to the step's own loss computation.

For a batch of ``B`` sequences of ``T`` tokens (vocabulary ``V``) it times, median of ``--reps``:
the baseline ``F.cross_entropy(logits, targets, reduction="none")`` that a loop computes anyway;
``DomainLossMeter.update`` on its output (with and without the id check); and the per-row Python
loop the plain example used before (``.tolist()`` per row, a dict per domain).

    python benchmarks/bench_domain_loss.py [--batch 8] [--seq-len 2048] [--vocab 4096] [--domains 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch.nn import functional as F

from autoscale_data.dataset import DomainLossMeter


def _median_s(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--domains", type=int, default=7)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    logits = torch.randn(args.batch, args.vocab, args.seq_len)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq_len))
    domain = torch.randint(0, args.domains, (args.batch,))
    per_token = F.cross_entropy(logits, targets, reduction="none")
    names = [f"d{i}" for i in range(args.domains)]
    checked, unchecked = DomainLossMeter(names), DomainLossMeter(names, check_ids=False)

    def python_loop() -> None:
        out: dict[int, list[float]] = {}
        for d, row in zip(domain.tolist(), per_token.mean(dim=1).tolist(), strict=True):
            out.setdefault(d, []).append(row)

    rows = {
        "cross_entropy (baseline)": _median_s(lambda: F.cross_entropy(logits, targets, reduction="none"), args.reps),
        "DomainLossMeter.update": _median_s(lambda: checked.update(per_token, domain), args.reps),
        "DomainLossMeter.update(check_ids=False)": _median_s(lambda: unchecked.update(per_token, domain), args.reps),
        "per-row Python loop": _median_s(python_loop, args.reps),
    }
    base = rows["cross_entropy (baseline)"]
    print(f"B={args.batch} T={args.seq_len} V={args.vocab} domains={args.domains}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"{'what':42s} {'median µs':>10s} {'vs baseline':>12s}")
    for name, seconds in rows.items():
        print(f"{name:42s} {seconds * 1e6:10.1f} {seconds / base:12.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
