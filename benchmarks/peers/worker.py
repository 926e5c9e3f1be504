"""Measure one reader once: ``python worker.py IMPL MODE CONFIG_JSON``; prints one JSON line.

Measured: time to first item (construction included, imports excluded), tokens/s from the first
to the last item, the peak RSS summed over this process and its children (sampled every 50 ms;
shared pages count once per process), and the domain / in-domain index of every sequence read
(decoded from its first two tokens, see ``synth.py``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_T_START = time.perf_counter()

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import readers  # noqa: E402
import torch  # noqa: E402
from synth import SEQ_LEN  # noqa: E402


class PeakRSS(threading.Thread):
    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.interval, self.peak, self._stop_flag = interval, 0, threading.Event()
        self._proc = psutil.Process()

    def sample(self) -> None:
        total = 0
        for p in [self._proc, *self._proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        self.peak = max(self.peak, total)

    def run(self) -> None:
        while not self._stop_flag.wait(self.interval):
            self.sample()

    def stop(self) -> int:
        self.sample()
        self._stop_flag.set()
        self.join(timeout=5)
        return self.peak


def main() -> int:
    impl, mode, cfg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    torch.set_num_threads(1)
    budget = int(cfg["budget_seqs"])
    heads = np.empty((budget, 2), dtype=np.int64)
    rss = PeakRSS()
    rss.start()
    t_import = time.perf_counter() - _T_START
    t0 = time.perf_counter()
    it = iter(readers.build(impl, mode, cfg))
    n, t_first, bad_shape = 0, None, None
    for item in it:
        if t_first is None:
            t_first = time.perf_counter()
        x = item if item.dim() == 2 else item.unsqueeze(0)
        if x.dtype != torch.int64 or x.shape[1] != SEQ_LEN:
            bad_shape = f"{tuple(item.shape)} {item.dtype}"
            break
        take = min(x.shape[0], budget - n)
        heads[n:n + take] = x[:take, :2].numpy()
        n += take
        if n >= budget:
            break
    t_end = time.perf_counter()
    peak = rss.stop()
    del it
    first = t_first if t_first is not None else t_end
    result = {
        "impl": impl, "mode": mode, "n": n, "ended_early": n < budget, "bad_output": bad_shape,
        "import_s": t_import, "ttfb_s": first - t0,
        "tok_s": (n - (1 if mode == "inproc" else readers.BATCH)) * SEQ_LEN / max(t_end - first, 1e-9),
        "wall_s": t_end - t0, "rss_peak_mb": peak / 2**20, "load": os.getloadavg()[0],
    }
    if cfg.get("heads_out"):
        np.save(cfg["heads_out"], heads[:n])
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
