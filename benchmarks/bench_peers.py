"""Peer benchmark: our mixture dataset against five data-mixing loaders and a raw memmap baseline.

One command::

    python benchmarks/bench_peers.py            # about 10-15 minutes on 2 cores, first run included

It (1) creates or reuses a separate virtualenv for the peers (they conflict with our pins: see
README), (2) writes one synthetic 7-domain corpus (RedPajama-like domain sizes, LLaMA-1 weights,
2049-token sequences; ``peers/synth.py``) as our store and in each peer's recommended format
(``peers/formats.py``), (3) runs every reader in a fresh subprocess, in-process and through two
DataLoader workers with batches of 8, with interleaved repetitions (the order rotates each
repetition), and (4) prints one table with ratios to the raw memmap baseline measured in the same
run, and writes everything to ``bench_out/peers.json``.

Readers (``peers/readers.py``): raw numpy memmap (i.i.d. weighted picks, with replacement);
``ours`` (``ScaleAwareMixtureDataset``); torchdata.nodes ``MultiNodeWeightedSampler``; LitData
``CombinedStreamingDataset``; webdataset ``RandomMix``; HF datasets ``interleave_datasets``;
MosaicML streaming ``StreamingDataset`` with per-stream ``proportion``.

Every reader runs with the peers' venv Python; ``ours`` too (our package is put on ``PYTHONPATH``
from this checkout), so all share one torch/numpy build. If our package cannot be imported there,
``ours`` runs with this interpreter instead and the output says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "peers"))

from synth import DOMAINS, LLAMA_WEIGHTS, SEQ_LEN, decode, domain_sequences, make_sequences  # noqa: E402

# Installed in three steps: litdata and mosaicml-streaming require torchvision, and no torchvision
# wheel matches the pinned CPU torch, so pip backtracks for a long time; they go in with --no-deps,
# then their other requirements, then a torchvision stand-in (see _torchvision_stand_in).
PEER_PACKAGES = ["torch", "torchdata", "webdataset", "datasets", "psutil", "pyyaml", "numpy<2.2",
                 "transformers<5", "huggingface-hub<1"]
PEER_NO_DEPS = ["litdata", "mosaicml-streaming"]
PEER_DEPS_OF_NO_DEPS = ["lightning-utilities", "filelock", "boto3", "requests", "tifffile", "obstore", "Brotli>=1.0.9",
                        "google-cloud-storage<3.3.0,>=2.9.0", "matplotlib<4", "paramiko<4", "python-snappy<1",
                        "tqdm<5", "xxhash<4", "zstd<2", "catalogue<3", "azure-storage-blob<13",
                        "azure-storage-file-datalake<13,>=12.11.0", "azure-identity", "oci<3,>=2.88"]
IMPLS = ("raw", "ours", "torchdata", "litdata", "webdataset", "hf_datasets", "streaming")
LABELS = {"raw": "raw numpy memmap", "ours": "autoscale_data (ours)",
          "torchdata": "torchdata.nodes MultiNodeWeightedSampler", "litdata": "LitData CombinedStreamingDataset",
          "webdataset": "webdataset RandomMix", "hf_datasets": "HF datasets interleave_datasets",
          "streaming": "MosaicML StreamingDataset (proportion)"}
FIRST = 10_000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ the peers' venv
_STAND_IN = {
    "__init__.py": '"""Benchmark-venv stand-in: the torchvision wheel pip finds needs CUDA torch."""\n'
                   '__version__ = "0.0+standin"\n',
    "datasets/__init__.py": "class VisionDataset:\n"
                            "    def __init__(self, *args, **kwargs):\n"
                            "        raise RuntimeError('torchvision stand-in: no vision datasets in the benchmark venv')\n",
    "transforms/__init__.py": "",
    "transforms/functional.py": "def to_tensor(pic):\n"
                                "    raise RuntimeError('torchvision stand-in: no image transforms in the benchmark venv')\n",
}


def _torchvision_stand_in(site: Path) -> None:
    """``import streaming`` imports torchvision, whose wheel here needs CUDA torch.

    Inside the benchmark venv only, put a module providing the three names ``streaming`` imports
    at import time (they raise if used; the benchmark reads token data only).
    """
    import shutil

    for old in site.glob("torchvision*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    for rel, text in _STAND_IN.items():
        path = site / "torchvision" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def ensure_venv(venv: Path) -> Path:
    """Create (or reuse) the peers' venv; returns its python."""
    python = venv / "bin" / "python"
    stamp = venv / ".bench-peers-stamp"
    want = " ".join(PEER_PACKAGES + PEER_NO_DEPS + PEER_DEPS_OF_NO_DEPS) + (REPO / "constraints.txt").read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    log(f"installing the peers into {venv} (a few minutes)")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    constraints = ["-c", str(REPO / "constraints.txt")]
    for extra in (constraints + PEER_PACKAGES, ["--no-deps", *PEER_NO_DEPS],
                  constraints + PEER_DEPS_OF_NO_DEPS + ["numpy<2.2", "transformers<5", "huggingface-hub<1"]):
        proc = subprocess.run(pip + extra, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"pip install {' '.join(extra)} into {venv} failed:\n{proc.stderr[-3000:]}")
    probe = subprocess.run([str(python), "-c", "import streaming"], capture_output=True, text=True)
    if probe.returncode != 0:
        site = Path(subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
        log(f"`import streaming` fails ({probe.stderr.strip().splitlines()[-1][:120]}); "
            "installing a torchvision stand-in in the benchmark venv")
        _torchvision_stand_in(site)
    subprocess.run([str(python), "-c", "import streaming, litdata, webdataset, datasets, torchdata.nodes"],
                   check=True)
    stamp.write_text(want)
    return python


# ------------------------------------------------------------------------------ the data
def ensure_data(root: Path, total_seqs: int, peers_python: Path | None, seed: int) -> dict[str, int]:
    """Our store (written here) and the peers' formats (written in their venv)."""
    from autoscale_data.store import StoreWriter, TokenizerInfo

    sizes = domain_sequences(total_seqs)
    meta = root / "corpus.json"
    if not (meta.exists() and json.loads(meta.read_text()) == {"sizes": sizes, "seed": seed}):
        log(f"writing the synthetic corpus ({sum(sizes.values())} sequences, "
            f"{sum(sizes.values()) * SEQ_LEN * 2 / 2**20:.0f} MB per format) to {root}")
        for done in root.glob("*.done"):
            done.unlink()
        tok = TokenizerInfo(spec="synthetic", fingerprint="bench-peers-synthetic", vocab_size=32000, eos_id=31999)
        for i, d in enumerate(DOMAINS):
            with StoreWriter(root / "store" / d, d, tok, shard_tokens=sizes[d] * SEQ_LEN) as w:
                for a in range(0, sizes[d], 4096):
                    block = make_sequences(i, a, min(4096, sizes[d] - a), seed)
                    w.add_tokens("train", block.reshape(-1), num_documents=block.shape[0])
        meta.write_text(json.dumps({"sizes": sizes, "seed": seed}))
    if peers_python is not None:
        t = time.perf_counter()
        subprocess.run([str(peers_python), str(HERE / "peers" / "formats.py"), str(root)], check=True,
                       cwd=HERE / "peers", stdout=sys.stderr)  # the peers' writers chat on stdout
        log(f"peer formats ready ({time.perf_counter() - t:.0f} s)")
    return sizes


# ------------------------------------------------------------------------------ running
def run_one(python: Path, impl: str, mode: str, cfg: dict[str, Any], env: dict[str, str],
            timeout: float) -> dict[str, Any]:
    proc = subprocess.Popen([str(python), str(HERE / "peers" / "worker.py"), impl, mode, json.dumps(cfg)],
                            cwd=HERE / "peers", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"impl": impl, "mode": mode, "error": f"timed out after {timeout:.0f} s"}
    finally:
        try:  # DataLoader / ParallelMapper workers left behind by a reader
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or ["(no output)"])[-1][:300]
        return {"impl": impl, "mode": mode, "error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1][len("RESULT "):])


def proportion_stats(heads: np.ndarray, weights: dict[str, float]) -> dict[str, Any]:
    dom, idx = decode(heads)
    w = np.array([weights[d] for d in DOMAINS])
    out: dict[str, Any] = {}
    for label, part in (("first", dom[:FIRST]), ("all", dom)):
        counts = np.bincount(part, minlength=len(DOMAINS))[: len(DOMAINS)]
        share = counts / max(1, part.size)
        out[f"max_err_pp_{label}"] = float(np.max(np.abs(share - w)) * 100)
        out[f"counts_{label}"] = counts.tolist()
    dev = np.abs(np.array(out["counts_all"]) - w * dom.size)
    out["max_count_dev_all"] = float(dev.max())
    out["exact_totals"] = bool(dev.max() < 1.0)
    pairs = dom * (1 << 32) + idx
    out["repeats"] = int(pairs.size - np.unique(pairs).size)
    out["bad_domain"] = int(np.sum((dom < 0) | (dom >= len(DOMAINS))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark data-mixing loaders against a raw memmap baseline.")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "autoscale-data")
    parser.add_argument("--venv", type=Path, default=None, help="the peers' venv (default CACHE_DIR/peers-venv)")
    parser.add_argument("--budget-seqs", type=int, default=12_000, help="sequences read per measurement")
    parser.add_argument("--data-factor", type=float, default=2.5,
                        help="corpus size / budget (2.5: no domain exceeds one epoch at LLaMA weights)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--impls", nargs="*", default=list(IMPLS), choices=IMPLS)
    parser.add_argument("--modes", nargs="*", default=["inproc", "loader"], choices=["inproc", "loader"])
    parser.add_argument("--timeout", type=float, default=300.0, help="per measurement, seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "bench_out" / "peers.json")
    args = parser.parse_args(argv)
    if args.budget_seqs < 1 or args.reps < 1 or args.data_factor <= 1:
        parser.error("--budget-seqs and --reps must be >= 1 and --data-factor > 1")

    t_start = time.perf_counter()
    load_start = os.getloadavg()
    peers_python = ensure_venv(args.venv or args.cache_dir / "peers-venv")  # the raw baseline runs there too
    total = int(args.budget_seqs * args.data_factor)
    root = args.cache_dir / "peers-data" / f"seqs{total}-seed{args.seed}"
    sizes = ensure_data(root, total, peers_python, args.seed)

    env = dict(os.environ, PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    ours_python = peers_python
    if "ours" in args.impls:
        probe = subprocess.run([str(peers_python), "-c", "import autoscale_data.dataset"], env=env,
                               capture_output=True, text=True)
        if probe.returncode != 0:
            ours_python = Path(sys.executable)
            log("our package does not import in the peers' venv; `ours` runs with " + sys.executable)

    heads_dir = root / "heads"
    heads_dir.mkdir(exist_ok=True)
    cfg = {"root": str(root), "budget_seqs": args.budget_seqs, "seed": args.seed, "weights": LLAMA_WEIGHTS}
    results: list[dict[str, Any]] = []
    for rep in range(args.reps):
        for mode in args.modes:
            order = args.impls[rep % len(args.impls):] + args.impls[: rep % len(args.impls)]
            for impl in order:
                run_cfg = dict(cfg, heads_out=str(heads_dir / f"{impl}-{mode}.npy") if rep == 0 else None)
                python = ours_python if impl == "ours" else peers_python
                r = run_one(python, impl, mode, run_cfg, env, args.timeout)
                r["rep"] = rep
                if rep == 0 and "error" not in r:
                    r.update(proportion_stats(np.load(heads_dir / f"{impl}-{mode}.npy"), LLAMA_WEIGHTS))
                results.append(r)
                status = r.get("error") or f"{r['tok_s'] / 1e6:.1f}M tok/s, first item {r['ttfb_s']:.2f} s"
                log(f"rep {rep} {mode:6s} {impl:12s} {status}")

    table = summarize(results, args.impls)
    elapsed = time.perf_counter() - t_start
    header = {
        "date": dt.date.today().isoformat(), "machine": f"{platform.machine()} {os.cpu_count()} CPU cores, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GB RAM",
        "python": platform.python_version(), "budget_seqs": args.budget_seqs, "seq_len": SEQ_LEN,
        "corpus_sequences": sizes, "weights": LLAMA_WEIGHTS, "reps": args.reps, "elapsed_s": elapsed,
        "load_avg_start": load_start, "load_avg_end": os.getloadavg(),
        "ours_python": str(ours_python), "peers_python": str(peers_python),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"header": header, "table": table, "runs": results}, indent=1))
    print(render(header, table))
    return 0


def _median(rs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rs if "error" not in r and not r.get("ended_early") and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def summarize(results: list[dict[str, Any]], impls: list[str]) -> list[dict[str, Any]]:
    rows = []
    for impl in impls:
        mine = {m: [r for r in results if r["impl"] == impl and r["mode"] == m] for m in ("inproc", "loader")}
        first = next((r for r in mine["inproc"] if r["rep"] == 0), {})
        errors = sorted({r["error"] for rs in mine.values() for r in rs if "error" in r})
        early = sorted({f"{r['mode']} stopped at {r['n']}" for rs in mine.values() for r in rs if r.get("ended_early")})
        rows.append({
            "impl": impl, "label": LABELS[impl],
            "tok_s_inproc": _median(mine["inproc"], "tok_s"), "tok_s_loader": _median(mine["loader"], "tok_s"),
            "ttfb_s_inproc": _median(mine["inproc"], "ttfb_s"), "ttfb_s_loader": _median(mine["loader"], "ttfb_s"),
            "rss_mb_inproc": _median(mine["inproc"], "rss_peak_mb"),
            "rss_mb_loader": _median(mine["loader"], "rss_peak_mb"),
            "max_err_pp_first": first.get("max_err_pp_first"), "max_err_pp_all": first.get("max_err_pp_all"),
            "max_count_dev_all": first.get("max_count_dev_all"), "exact_totals": first.get("exact_totals"),
            "repeats": first.get("repeats"), "notes": "; ".join(errors + early),
        })
    return rows


def render(header: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    raw = next((r for r in rows if r["impl"] == "raw"), {})

    def ratio(row: dict[str, Any], key: str) -> str:
        v, base = row.get(key), raw.get(key)
        if v is None:
            return "—"
        return f"{v / 1e6:.1f}M ({v / base:.2f}×)" if base else f"{v / 1e6:.1f}M"

    def num(v: Any, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    lines = [
        f"Peer benchmark, {header['date']}, {header['machine']}, Python {header['python']}; "
        f"{header['budget_seqs']} sequences of {header['seq_len']} tokens per measurement, "
        f"median of {header['reps']} interleaved repetitions; load average {header['load_avg_start'][0]:.1f} at start, "
        f"{header['load_avg_end'][0]:.1f} at end (shared machine: timings are rough).",
        "",
        "| reader | tokens/s in process (× raw) | tokens/s DataLoader 2 workers, batch 8 (× raw) | first item s "
        "(in proc / loader) | peak RSS MB (in proc / loader) | max share error, first 10k seqs (pp) | "
        "max share error, whole budget (pp) | exact totals (max dev, seqs) | repeated seqs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        exact = "—" if r["exact_totals"] is None else f"{'yes' if r['exact_totals'] else 'no'} ({r['max_count_dev_all']:.1f})"
        lines.append(
            f"| {r['label']} | {ratio(r, 'tok_s_inproc')} | {ratio(r, 'tok_s_loader')} | "
            f"{num(r['ttfb_s_inproc'], '.2f')} / {num(r['ttfb_s_loader'], '.2f')} | "
            f"{num(r['rss_mb_inproc'], '.0f')} / {num(r['rss_mb_loader'], '.0f')} | "
            f"{num(r['max_err_pp_first'], '.2f')} | {num(r['max_err_pp_all'], '.2f')} | {exact} | "
            f"{num(r['repeats'], 'd')} |")
    notes = [f"- {r['label']}: {r['notes']}" for r in rows if r["notes"]]
    if notes:
        lines += ["", "Problems:", *notes]
    lines += ["", f"Corpus sequences per domain: {header['corpus_sequences']}; weights: {header['weights']}.",
              f"Total benchmark time {header['elapsed_s'] / 60:.1f} min."]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
