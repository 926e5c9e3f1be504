"""The DDO proxies' tokens for two budgets ``[N1, N2]`` and three ``[N0 = N1 / 2, N1, N2]``, per example config.

What ``autoscale-data run CONFIG --dry-run`` prints as "proxy cost" (:func:`~autoscale_data.runner.describe.proxy_costs`:
every proxy run planned as the runner would, in whole global batches), as one markdown table for the
docs (``docs/runner.md``, "Three budgets"). A config whose stores are absent here is planned on as many
stand-in domains of ample data as ``--domains`` gives it (uniform base: the token counts depend only on
the domain count and the batch rounding). Seconds on a 2-core CPU.

Run: ``python benchmarks/proxy_cost.py examples/tiny-cpu.yaml examples/gpt2-large-redpajama.yaml:7``
(``CONFIG:K``: K stand-in domains when its stores are missing).
"""

from __future__ import annotations

import argparse

from autoscale_data.runner.config import load_config
from autoscale_data.runner.describe import proxy_costs
from autoscale_data.runner.planning.data import DomainInfo, inspect_domains


def stand_in(count: int) -> DomainInfo:
    """``count`` domains of 10^12 tokens each (no cap binds)."""
    names = tuple(f"d{k}" for k in range(count))
    return DomainInfo(names=names, paths={d: d for d in names}, train_tokens=dict.fromkeys(names, 10**12),
                      val_tokens=dict.fromkeys(names, 10**6), fingerprints=dict.fromkeys(names, ""),
                      vocab_size=50257, eos_id=0, tokenizer="")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", metavar="CONFIG[:K]")
    args = parser.parse_args()
    print("| config | domains | target run | two budgets: runs, proxy tokens (target runs) | three budgets: runs, "
          "proxy tokens (target runs) | three / two |")
    print("|---|---:|---:|---|---|---:|")
    for item in args.configs:
        path, _, count = item.partition(":")
        config = load_config(path)
        try:
            domains, where = inspect_domains(config), "stores"
        except (FileNotFoundError, ValueError):
            if not count:
                raise
            domains, where = stand_in(int(count)), "stand-in"
        two, three = proxy_costs(config, domains)

        def cell(c):  # noqa: ANN001, ANN202
            return (f"[{', '.join(f'{n:,}' for n in c.budgets)}]: {c.runs} runs, {c.tokens:,} "
                    f"({c.target_runs:.2f})")

        print(f"| `{path}` | {len(domains.names)} ({where}) | {two.target_tokens:,} | {cell(two)} | {cell(three)} | "
              f"{three.tokens / two.tokens:.3f}x |")


if __name__ == "__main__":
    main()
