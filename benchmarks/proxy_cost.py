"""The DDO proxies' cost for two budgets ``[N1, N2]`` and three ``[N0 = N1 / 2, N1, N2]``, per example config.

What ``autoscale-data run CONFIG --dry-run`` prints as "proxy cost" (:func:`~autoscale_data.runner.describe.proxy_costs`:
every proxy run planned as the runner would, in whole global batches, priced in training FLOPs against one
target run), as one markdown table for the docs (``docs/runner.md``, "Three budgets" and "A proxy model of its
own"). A config whose stores are absent here is planned on as many stand-in domains of ample data (GPT-2's
vocabulary) as ``CONFIG:K`` gives it (uniform base: the token counts depend only on the domain count and the
batch rounding). ``--proxy-model`` sets ``ddo.proxy_model`` of every config (a preset name, or a JSON mapping
``{"preset": ..., "overrides": {...}}``). Seconds on a 2-core CPU.

Run: ``python benchmarks/proxy_cost.py examples/tiny-cpu.yaml examples/gpt2-large-redpajama.yaml:7``
(``CONFIG:K``: K stand-in domains when its stores are missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

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
    parser.add_argument("--proxy-model", metavar="PRESET|JSON", help="ddo.proxy_model of every config")
    args = parser.parse_args()
    print("| config | domains | proxy model | target run: tokens, FLOPs | two budgets: runs, proxy tokens, "
          "proxy FLOPs (target runs) | three budgets: runs, proxy tokens, proxy FLOPs (target runs) | three / two |")
    print("|---|---:|---|---:|---|---|---:|")
    proxy = args.proxy_model
    if proxy is not None and proxy.lstrip().startswith("{"):
        proxy = json.loads(proxy)
    for item in args.configs:
        path, _, count = item.partition(":")
        config = load_config(path)
        if proxy is not None:
            config = dataclasses.replace(config, ddo=dataclasses.replace(config.ddo, proxy_model=proxy))
        model = config.ddo.proxy_model
        shown = "(the target's)" if model is None else f"{model.preset} {json.dumps(model.overrides) if model.overrides else ''}"
        try:
            domains, where = inspect_domains(config), "stores"
        except (FileNotFoundError, ValueError):
            if not count:
                raise
            domains, where = stand_in(int(count)), "stand-in"
        two, three = proxy_costs(config, domains)

        def cell(c):  # noqa: ANN001, ANN202
            return (f"[{', '.join(f'{n:,}' for n in c.budgets)}]: {c.runs} runs, {c.tokens:,}, {c.flops:.3g} "
                    f"({c.target_runs:.2f})")

        print(f"| `{path}` | {len(domains.names)} ({where}) | {shown.strip()} | {two.target_tokens:,}, "
              f"{two.target_flops:.3g} | {cell(two)} | {cell(three)} | {three.flops / two.flops:.3f}x |")


if __name__ == "__main__":
    main()
