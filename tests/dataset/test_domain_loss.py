"""DomainLossMeter / domain_loss_sums: exact against a naive loop, masks, errors, and the all-reduce."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from paths import REPO

from autoscale_data.dataset import DomainLossMeter, domain_loss_sums

ROOT = REPO


def naive(batches: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]], names: list[str]) -> dict[str, float]:
    """The definition: every counted token's loss, added one at a time in Python, over its domain's token count."""
    sums, counts = [0.0] * len(names), [0] * len(names)
    for losses, domain, mask in batches:
        for b, d in enumerate(domain.tolist()):
            row = losses[b].reshape(-1).tolist()
            keep = [True] * len(row) if mask is None else mask[b].reshape(-1).tolist()
            for value, k in zip(row, keep, strict=True):
                if k:
                    sums[d] += value
                    counts[d] += 1
    return {n: (s / c if c else math.nan) for n, s, c in zip(names, sums, counts, strict=True)}


@st.composite
def batches(draw: st.DrawFn) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]]:
    num_domains = draw(st.integers(1, 5))
    out = []
    for _ in range(draw(st.integers(1, 4))):
        rows, length = draw(st.integers(1, 6)), draw(st.integers(1, 7))
        seed = draw(st.integers(0, 2**31 - 1))
        gen = torch.Generator().manual_seed(seed)
        losses = torch.rand(rows, length, generator=gen, dtype=torch.float32) * 10
        domain = torch.randint(0, num_domains, (rows,), generator=gen)
        mask = torch.rand(rows, length, generator=gen) > 0.3 if draw(st.booleans()) else None
        out.append((losses, domain, mask))
    return num_domains, out


@settings(max_examples=60, deadline=None)
@given(batches(), st.booleans())
def test_meter_equals_the_naive_loop(drawn, check_ids: bool) -> None:
    num_domains, data = drawn
    names = [f"d{i}" for i in range(num_domains)]
    meter = DomainLossMeter(names, check_ids=check_ids)
    for losses, domain, mask in data:
        meter.update(losses, domain, mask)
    got, want = meter.compute(), naive(data, names)
    for name in names:
        if math.isnan(want[name]):
            assert math.isnan(got[name])
        else:
            assert got[name] == pytest.approx(want[name], rel=1e-12, abs=1e-12)
    counted = {n: sum(int((m if m is not None else torch.ones_like(x, dtype=torch.bool))[d == i].sum())
                      for x, d, m in data) for i, n in enumerate(names)}
    assert meter.tokens() == counted


def test_sums_of_one_batch_and_reset() -> None:
    losses = torch.tensor([[1.0, 3.0], [2.0, 2.0], [10.0, 0.0]])
    domain = torch.tensor([1, 1, 0])
    sums, tokens = domain_loss_sums(losses, domain, 3)
    assert sums.tolist() == [10.0, 8.0, 0.0] and tokens.tolist() == [2.0, 4.0, 0.0]
    mask = torch.tensor([[True, False], [True, True], [True, False]])  # e.g. labels != -100
    sums, tokens = domain_loss_sums(losses, domain, 3, mask)
    assert sums.tolist() == [10.0, 5.0, 0.0] and tokens.tolist() == [1.0, 3.0, 0.0]
    meter = DomainLossMeter(["a", "b", "c"])
    meter.update(losses, domain, mask)
    assert meter.compute() == pytest.approx({"a": 10.0, "b": 5 / 3, "c": math.nan}, nan_ok=True)
    meter.update(torch.tensor([4.0]), torch.tensor([2]))  # a [B] tensor: one token per row
    assert meter.compute()["c"] == 4.0
    meter.reset()
    assert all(math.isnan(v) for v in meter.compute().values()) and meter.tokens() == {"a": 0, "b": 0, "c": 0}


def test_gradients_untouched_and_state_round_trip() -> None:
    losses = torch.tensor([[1.0, 2.0]], requires_grad=True)
    meter = DomainLossMeter(["a", "b"])
    meter.update(losses * 2, torch.tensor([1]))
    assert losses.grad is None
    other = DomainLossMeter(["a", "b"])
    other.load_state_dict(meter.state_dict())
    assert other.compute() == pytest.approx({"a": math.nan, "b": 3.0}, nan_ok=True)
    with pytest.raises(ValueError, match="for domains"):
        DomainLossMeter(["a", "c"]).load_state_dict(meter.state_dict())


@pytest.mark.parametrize(("losses", "domain", "mask", "match"), [
    (torch.ones(3, 2), torch.tensor([0, 1]), None, "one row per entry"),
    (torch.ones(2, 2), torch.tensor([0, 2]), None, r"lie in \[0, 2\)"),
    (torch.ones(2, 2), torch.tensor([0, -1]), None, r"lie in \[0, 2\)"),
    (torch.ones(2, 2), torch.tensor([0.0, 1.0]), None, "integer ids"),
    (torch.ones(2, 2), torch.tensor([0, 1]), torch.ones(2, 3, dtype=torch.bool), "shape of token_losses"),
    (torch.tensor(1.0), torch.tensor([0]), None, "one row per entry"),
])
def test_bad_input_is_refused(losses, domain, mask, match) -> None:
    with pytest.raises(ValueError, match=match):
        DomainLossMeter(["a", "b"]).update(losses, domain, mask)


def test_bad_names_and_all_reduce_without_a_group() -> None:
    for names in ([], ["a", "a"], ["a", 3]):
        with pytest.raises(ValueError, match="distinct strings"):
            DomainLossMeter(names)
    with pytest.raises(RuntimeError, match="process group"):
        DomainLossMeter(["a"]).compute(all_reduce=True)


_WORKER = textwrap.dedent("""
    import json, sys
    import torch
    import torch.distributed as dist
    from autoscale_data.dataset import DomainLossMeter

    rank, port = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    meter = DomainLossMeter(["a", "b", "c"])
    if rank == 0:
        meter.update(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([0, 1]))
    else:
        meter.update(torch.tensor([[5.0, 7.0]]), torch.tensor([0]))
    local = meter.compute()
    both = meter.compute(all_reduce=True)
    sums, tokens = meter.totals(all_reduce=True)
    print("RESULT " + json.dumps({"rank": rank, "local": local, "all": both, "tokens": tokens.tolist(),
                                  "local_again": meter.compute()}), flush=True)
    dist.destroy_process_group()
""")


@pytest.mark.timeout(120)
def test_all_reduce_over_two_gloo_ranks(tmp_path: Path) -> None:
    import json

    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, str(script), str(r), port], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env) for r in range(2)]
    results = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=100)
        assert proc.returncode == 0, out
        line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
        r = json.loads(line[len("RESULT "):])
        results[r["rank"]] = r
    for rank in (0, 1):
        r = results[rank]
        # a: (1 + 2) on rank 0 and (5 + 7) on rank 1 -> 15 / 4 tokens; b: 7 / 2; c: no tokens anywhere
        assert r["all"]["a"] == 15 / 4 and r["all"]["b"] == 7 / 2 and math.isnan(r["all"]["c"])
        assert r["tokens"] == [4.0, 2.0, 0.0]
        assert r["local_again"] == r["local"]  # the all-reduce works on a copy
    assert results[0]["local"]["a"] == 1.5 and results[1]["local"]["a"] == 6.0
