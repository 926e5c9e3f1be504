"""Small proxies filling one GPU: which way trains the most tokens/s of a small model (CUDA; skips on a CPU).

A proxy of the real-text experiment (6 x 384 GPT-2, vocabulary 8192, context 256, bf16) uses a few
percent of an H100. Compared, in one invocation, all through the runner's own step
(``benchmarks/bench_train_step.py``, one process per case):

- ``one``: one run, micro-batch ``--batch`` (the baseline);
- ``shared-K``: K runs at once, each in its own process (``executor.runs_per_gpu: K``); the figure is
  their summed tokens/s;
- ``batch-xK``: one run with a K times larger micro-batch (what one run could use; a proxy's batch is
  part of its design, so this bounds what batching several proxies into one could give);
- ``compiled`` and ``reduce-overhead``: the run compiled (``torch.compile``, default mode / CUDA graphs
  via ``mode="reduce-overhead"``).

Prints tokens/s and the ratio to ``one`` per case; ``--json`` writes them.

    python benchmarks/bench_small_proxies.py [--runs 4] [--batch 128] [--json OUT]

Not measured yet (no GPU was lent when it was written): run it on the next GPU session.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _shape(batch: int, steps: int) -> dict[str, Any]:
    sys.path.insert(0, os.fspath(HERE))
    from bench_train_step import SHAPES, Shape

    return asdict(Shape(**{**asdict(SHAPES["realtext"]), "batch": batch, "precision": "bf16", "threads": None,
                           "steps": steps, "warmup": 5}))


def _start(path: str, shape: dict[str, Any], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, os.fspath(HERE / "bench_train_step.py"), "--child", path, "--shape", json.dumps(shape),
           "--device", "cuda"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate()
    if proc.returncode:
        raise RuntimeError(err[-3000:])
    return json.loads(out.strip().splitlines()[-1])


def _summary(base: dict[str, Any], cases: dict[str, float], extra_s: dict[str, float]) -> dict[str, Any]:
    return {"shape": base, "tokens_per_s": cases, "ratio_to_one": {k: v / cases["one"] for k, v in cases.items()},
            "first_steps_extra_s": extra_s}


def compare(runs: int, batch: int, steps: int, json_path: str | None = None) -> dict[str, Any]:
    """Each case once; tokens/s (summed over a case's processes), its ratio to one run and the first steps'
    extra seconds (compilation). With ``json_path`` the results so far are written after each case."""
    base = _shape(batch, steps)
    cases: dict[str, float] = {}
    extra_s: dict[str, float] = {}
    plan = [("one", [("runner", base, None)]),
            (f"shared-{runs}", [("runner", base, None)] * runs),
            (f"batch-x{runs}", [("runner", {**base, "batch": batch * runs}, None)]),
            ("compiled", [("runner-compiled", base, None)]),
            ("reduce-overhead", [("runner-compiled", base, {"AUTOSCALE_COMPILE_MODE": "reduce-overhead"})])]
    for name, procs in plan:
        results = [_result(p) for p in [_start(*proc) for proc in procs]]
        cases[name] = sum(r["tokens_per_s"] for r in results)
        extra_s[name] = max(r["first_steps_extra_s"] for r in results)
        if json_path:
            Path(json_path).write_text(json.dumps(_summary(base, cases, extra_s), indent=1))
    return _summary(base, cases, extra_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("skipped: no CUDA device (this comparison runs on a GPU)")
        return 0
    r = compare(args.runs, args.batch, args.steps, args.json)
    for k, v in r["tokens_per_s"].items():
        print(f"{k:16s} {v:>12,.0f} tokens/s  {r['ratio_to_one'][k]:.2f}x one run, first steps "
              f"+{r['first_steps_extra_s'][k]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
