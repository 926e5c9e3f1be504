"""Rough time estimates for a plan (``--dry-run``): FLOPs per token and a device throughput.

The throughput is the median tokens/s of finished runs with the same settings when the ledger has
any; otherwise an assumed effective FLOP rate (CPU: 25 GFLOP/s, the rate measured for the tiny
GPT-2 preset on a 2-core machine; CUDA: 100 TFLOP/s). Treat the result as an order of magnitude.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["CPU_FLOPS", "CUDA_FLOPS", "estimate_seconds", "flops_per_token", "format_duration",
           "format_flops", "run_flops",
           "run_tokens", "startup_seconds"]

CPU_FLOPS = 25e9
CUDA_FLOPS = 100e12


def flops_per_token(preset: str, fields: Mapping[str, Any], seq_len: int) -> float:
    """Training FLOPs per token (6 x parameters touched + attention), from the architecture fields."""
    depth, breadth = ("n_layer", "n_embd") if preset.startswith("gpt2") else ("num_hidden_layers",
                                                                              "hidden_size")
    layers, width, vocab = fields[depth], fields[breadth], fields["vocab_size"]
    body = 12 * layers * width * width
    return 6.0 * (body + vocab * width) + 6.0 * layers * seq_len * width


def run_tokens(spec: Any) -> int:
    """Tokens a planned run trains itself: its total, less the prefix of the run it continues (an extension's
    or a WSD branch's parent, which is trained, and counted, once)."""
    return (spec.total_sequences - spec.parent_sequences) * spec.seq_len


def run_flops(spec: Any) -> float:
    """Training FLOPs of a planned run: its own tokens (:func:`run_tokens`) x the FLOPs per token of the model
    its settings hash."""
    return run_tokens(spec) * spec.training.model.flops_per_token(spec.seq_len)


def format_flops(flops: float) -> str:
    """``"3.02e+15 FLOPs"``: three significant digits."""
    return f"{flops:.3g} FLOPs"


def estimate_seconds(specs: Sequence[Any], measured: Iterable[float] = (), *, device: str = "cpu",
                     startup_s: float = 0.0) -> float:
    """Estimated training seconds of ``specs`` (unique ids counted once).

    Args:
        measured: tokens/s of finished runs with the same settings (used when given).
        device: ``"cpu"`` or ``"cuda"``, for the assumed FLOP rate.
        startup_s: fixed cost per run (process start, model build, DeepSpeed initialisation).
    """
    unique = list({s.run_id: s for s in specs}.values())
    rates = [r for r in measured if r > 0]
    if rates:
        rate = statistics.median(rates)
        return sum(s.total_tokens for s in unique) / rate + startup_s * len(unique)
    flops = CUDA_FLOPS if device == "cuda" else CPU_FLOPS
    total = startup_s * len(unique)
    return total + sum(run_flops(s) for s in unique) / flops


def startup_seconds(backend: str, procs: int) -> float:
    """Rough fixed cost of one run: in process (torch, one process) or a new process (DeepSpeed or
    several ranks), as measured on a 2-core CPU machine."""
    if backend == "torch" and procs == 1:
        return 1.0
    return 15.0 if procs == 1 else 35.0


def format_duration(seconds: float) -> str:
    """``"42 s"``, ``"3.5 min"``, ``"2.1 h"`` or ``"1.5 d"``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
