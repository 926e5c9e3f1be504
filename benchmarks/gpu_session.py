"""One short GPU session: the GPU tests, the step and proxy benchmarks and AutoScale on real text, by a deadline.

Made for a GPU machine lent for minutes: everything is written under ``--out`` as it finishes, and
whatever is unfinished at ``--deadline`` seconds is stopped (the experiment's ledger keeps every
finished run, so the same command on the same stores continues it).

1. ``env.json``: GPU, driver, torch / deepspeed / transformers versions, date.
2. ``small-proxies.json``: benchmarks/bench_small_proxies.py (the experiment's 6 x 384 model: one run,
   four sharing the GPU, a 4x batch, compiled, CUDA graphs); its four-run figure sizes the experiment.
3. ``train-step.json``: benchmarks/bench_train_step.py on gpt2-small and gpt2-large (context 1024, bf16):
   the runner's step (compiled, as it trains on CUDA, and eager) against the reference step, with MFU.
4. ``experiment.tgz``: the real-text AutoScale experiment (``--corpus``: ``<domain>.jsonl[.xz]`` files,
   ``--tokenizer``: a tokenizer directory; stores are prepared here while the GPU measures), a 6 x 384
   GPT-2 in bf16 with four runs sharing the GPU: proxies at two or three budgets with an identifying
   design, then the targets for AutoScale (the default answer), uniform, natural and DDO(N2): seed 0
   first, then seed 1. Its runs' data wait is their report's. Runs with the GPU tests (``gpu-tests.log``:
   pytest -m gpu tests/gpu, the torch resume on CUDA among them), which need no quiet GPU.
5. ``throughput.json`` (only with ``--with-throughput``): benchmarks/gpu_throughput.py, the runner's loop
   fed by the mixture vs a raw memmap loader (data wait at context 1024).

The experiment is sized to ``--plan-s`` seconds of GPU time (default: what is left of the deadline), at
the four-run throughput measured in step 2 (else by ``benchmarks/bench_train_step.py`` in ``--measure-s``):
:func:`gpu_plan.plan_session` picks the largest target (``ratio x N2``, ratio 8 down to 2) and proxies (the
smallest >= 10M tokens, each budget 1.5 x the one before) whose tokens, plus each run's fixed cost, fit; when
nothing fits, ``plan.json`` says so and the smallest plan runs (the ledger keeps what finishes). A plan
longer than one call continues in the next: ``--resume-from`` an earlier ``experiment.tgz`` reuses its
budgets and its finished runs. ``--dry-run`` prints the plan for ``--tokens-per-s`` without a GPU::

    python benchmarks/gpu_session.py --out OUT --corpus DIR --tokenizer DIR --deadline 510 --plan-s 600
    python benchmarks/gpu_session.py --out OUT --corpus DIR --tokenizer DIR --deadline 240 --skip measure,tests \
        --resume-from OUT1/experiment.tgz
    python benchmarks/gpu_session.py --dry-run --tokens-per-s 2e6 --deadline 540
    python benchmarks/gpu_session.py --make-inputs CORPUS --out DIR   # on the CPU machine: DIR/corpus, DIR/tokenizer

``--make-inputs`` trains the byte-level BPE (8192) on the first 4 MB of each domain of a corpus built by
``../shared/corpus/build_corpus.sh`` and writes each domain xz-compressed (what the GPU machine gets).
``--resume-from`` unpacks an earlier session's ``experiment.tgz`` first: with stores prepared from the
same inputs under the same ``--work``, its finished runs are reused.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
START = time.monotonic()
#: one global batch (128 x 256 tokens); the budgets of the 2026-11-26 session: N1, N2 and the target (8 x N2)
STEP_TOKENS = 128 * 256
N1, N2 = 320 * STEP_TOKENS, 480 * STEP_TOKENS
#: seconds kept for what follows the experiment (stopping, packing) and precedes it (env, stores)
RESERVE_S = 45.0


def log(msg: str) -> None:
    print(f"[{time.monotonic() - START:6.1f}s] {msg}", flush=True)


def env_info(out: Path) -> None:
    import torch

    info: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": torch.__version__,
                            "cuda": torch.version.cuda,
                            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
                            "python": sys.version.split()[0]}
    for name in ("deepspeed", "transformers", "numpy"):
        try:
            info[name] = __import__(name).__version__
        except Exception as exc:  # noqa: BLE001 - recorded, not raised: the session goes on without it
            info[name] = f"unavailable: {type(exc).__name__}: {exc}"
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True)
        info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    (out / "env.json").write_text(json.dumps(info, indent=1))
    log(f"env: {info}")


def prepare_stores(corpus: Path, tokenizer: Path, work: Path, domains: list[str]) -> Path:
    """Decompress the corpus (``.jsonl.xz``) and prepare one store per domain under ``work/stores``."""
    from autoscale_data.store.prepare import prepare

    files = {}
    for d in domains:
        plain, packed = corpus / f"{d}.jsonl", corpus / f"{d}.jsonl.xz"
        if not plain.is_file():
            plain = work / f"{d}.jsonl"
            if not plain.is_file():
                with lzma.open(packed) as src, open(plain, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        files[d] = os.fspath(plain)
    stores = work / "stores"
    prepare(files, stores, os.fspath(tokenizer), progress=False, workers=max(1, min(8, (os.cpu_count() or 2) // 2)))
    return stores


def experiment_config(stores: Path, seeds: list[int], repetition: str, smoke: bool = False,
                      budgets: tuple[int, ...] = (N1, N2, 8 * N2)) -> dict[str, Any]:
    """The experiment's runner config, at ``budgets`` (the proxy budgets, then the target) (``smoke``: the
    same plan shrunk to try the session on a CPU)."""
    *proxies, target = budgets
    cfg = {
        "name": "real-text-gpu", "domains": os.fspath(stores),
        "model": {"preset": "gpt2-small", "overrides": {"n_layer": 6, "n_embd": 384, "n_head": 6}},
        "seq_len": 256, "micro_batch_size": 128, "global_batch_size": 128, "precision": "bf16", "device": "cuda",
        "optimizer": {"lr": 2e-3, "weight_decay": 0.1, "warmup_fraction": 0.05, "betas": [0.9, 0.95]},
        # eager: a compile costs each run's process tens of seconds, about what a 10M-token proxy trains in here
        "train": {"compile": False},
        "dropout": 0.0, "num_workers": 2, "cpu_threads": 2, "checkpoint_every": 400, "max_epochs": 16,
        "ddo": {"budgets": list(proxies), "multipliers": [[3, 1.7], [3, 1.7]], "objective": "mean_loss",
                "min_weight": 0.02, "repetition": repetition},
        "target": {"budget": target, "baselines": ["uniform", "natural", "ddo_n2"], "seeds": seeds,
                   "keep_checkpoints": False},
        "seeds": [0], "eval": {"heldout_tokens_per_domain": 131072, "proxy_points": 1, "target_points": 4,
                               "batch_size": 128},
        "executor": {"max_parallel": 4, "runs_per_gpu": 4},
    }
    if smoke:
        cfg.update(model={"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 32, "n_head": 2}}, seq_len=32,
                   micro_batch_size=8, global_batch_size=8, device="cpu", precision="fp32", num_workers=0,
                   cpu_threads=1, executor={"max_parallel": 2})
        cfg["ddo"]["budgets"] = [n // 1024 // 8 * 8 for n in proxies]
        cfg["target"]["budget"] = 8 * cfg["ddo"]["budgets"][-1]
        cfg["eval"] = {"heldout_tokens_per_domain": 1024, "proxy_points": 1, "target_points": 2}
    return cfg


class Experiment(threading.Thread):
    """The runner, seed 0's targets first, then seed 1's (``--allow-config-change`` reuses every finished run)."""

    def __init__(self, args: argparse.Namespace, work: Path, out: Path) -> None:
        super().__init__(daemon=True)
        self.args, self.work, self.out = args, work, out
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self.phases: list[dict[str, Any]] = []
        self.done = False
        self.gpu_free = threading.Event()  # set once the throughput benchmark is done with the GPU
        self.budgets: tuple[int, ...] = (N1, N2, 8 * N2)  # the session's plan sets them before gpu_free

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # noqa: BLE001 - the session packs what exists and ends on time either way
            log("experiment failed:\n" + traceback.format_exc())
        finally:
            self.done = True

    def _run(self) -> None:
        stores = prepare_stores(Path(self.args.corpus), Path(self.args.tokenizer), self.work,
                                self.args.domains.split(","))
        log(f"stores prepared in {self.work / 'stores'}")
        self.gpu_free.wait()
        for i, seeds in enumerate(([0], [0, 1])):
            if self.stopped:
                return
            cfg = self.work / f"config-seeds{len(seeds)}.json"
            cfg.write_text(json.dumps(experiment_config(stores, seeds, self.args.repetition, self.args.smoke,
                                                        self.budgets), indent=1))
            cmd = [sys.executable, "-m", "autoscale_data.cli", "run", os.fspath(cfg), "--out",
                   os.fspath(self.work / "experiment"), "--no-progress"] + (["--allow-config-change"] if i else [])
            t = time.monotonic()
            with open(self.out / "runner.log", "ab") as fh:
                self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
                code = self.proc.wait()
            self.phases.append({"seeds": seeds, "exit": code, "seconds": time.monotonic() - t})
            log(f"experiment phase seeds={seeds}: exit {code} after {time.monotonic() - t:.0f}s")
            if code:
                return

    def stop(self) -> None:
        self.stopped = True
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)


def run_logged(cmd: list[str], log_path: Path, timeout: float) -> int | None:
    """Run ``cmd`` with its output in ``log_path``; ``None`` when it ran past ``timeout`` (then killed)."""
    with open(log_path, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


def left(deadline: float) -> float:
    return deadline - (time.monotonic() - START)


def measure_throughput(seconds: float, batch: int = 128) -> float:
    """Tokens/s of the runner's training step for the experiment's model (6 x 384, context 256, bf16) on the
    GPU, from ``benchmarks/bench_train_step.py`` in a process of its own, stopped after ``seconds``."""
    from dataclasses import asdict

    from bench_train_step import SHAPES, Shape  # benchmarks/, beside this script

    shape = Shape(**{**asdict(SHAPES["realtext"]), "batch": batch, "precision": "bf16", "threads": None,
                     "steps": 15, "warmup": 3})
    cmd = [sys.executable, os.fspath(REPO / "benchmarks" / "bench_train_step.py"), "--child", "runner", "--shape",
           json.dumps(asdict(shape)), "--device", "cuda"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds, check=True)
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["tokens_per_s"])


def size_plan(args: argparse.Namespace, tokens_per_s: float, seconds: float) -> Any:
    """The session's experiment plan (:func:`gpu_plan.plan_session`) for the measured throughput."""
    from gpu_plan import plan_session  # benchmarks/, beside this script

    return plan_session(tokens_per_s * args.share_gain, seconds, domains=len(args.domains.split(",")),
                        step_tokens=STEP_TOKENS, seeds=2, run_overhead_s=args.run_overhead_s, parallel=4)


def make_inputs(corpus: Path, out: Path, domains: list[str], vocab: int = 8192, sample_chars: int = 4_000_000) -> None:
    """The GPU machine's inputs from a corpus directory: ``out/tokenizer`` and ``out/corpus/<domain>.jsonl.xz``."""
    from eval_real_text import sample_texts  # benchmarks/, beside this script

    from autoscale_data.store import train_bpe_tokenizer

    train_bpe_tokenizer(sample_texts(corpus, domains, sample_chars), vocab, out / "tokenizer")
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    for d in domains:
        with open(corpus / f"{d}.jsonl", "rb") as src, lzma.open(out / "corpus" / f"{d}.jsonl.xz", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)


def pack(work: Path, out: Path) -> None:
    exp = work / "experiment"
    if not exp.is_dir():
        return
    skip = {"ckpt", "final_ckpt"}  # checkpoints stay behind: the ledger's finished runs are what continues
    with tarfile.open(out / "experiment.tgz", "w:gz") as tar:
        tar.add(exp, arcname="experiment", filter=lambda t: None if Path(t.name).name in skip else t)
        for cfg in sorted(work.glob("config-seeds*.json")):
            tar.add(cfg, arcname=cfg.name)


def resumed_budgets(work: Path) -> tuple[int, ...] | None:
    """The budgets (proxies, then target) of an earlier session's experiment unpacked in ``work``."""
    cfg = work / "config-seeds1.json"
    if not cfg.is_file():
        return None
    raw = json.loads(cfg.read_text())
    return (*raw["ddo"]["budgets"], raw["target"]["budget"])


def small_proxies(out: Path, deadline: float) -> float | None:
    """benchmarks/bench_small_proxies.py into ``out/small-proxies.json``; its four-run tokens/s (None: failed)."""
    path = out / "small-proxies.json"
    code = run_logged([sys.executable, os.fspath(REPO / "benchmarks" / "bench_small_proxies.py"), "--steps", "20",
                       "--json", os.fspath(path)], out / "small-proxies.log", min(150.0, left(deadline) - 120))
    log(f"small proxies: exit {code}")
    if not path.is_file():  # the benchmark writes it after each case: a stopped one keeps what finished
        return None
    shared = json.loads(path.read_text())["tokens_per_s"].get("shared-4")
    return None if shared is None else float(shared)


def train_step(out: Path, deadline: float) -> None:
    """benchmarks/bench_train_step.py on gpt2-small and gpt2-large into ``out/train-step.json``."""
    code = run_logged([sys.executable, os.fspath(REPO / "benchmarks" / "bench_train_step.py"), "--shapes",
                       "gpt2-small,gpt2-large", "--device", "cuda", "--repeats", "1", "--steps", "20",
                       "--paths", "runner-compiled,runner,reference", "--json", os.fspath(out / "train-step.json")],
                      out / "train-step.log", min(240.0, left(deadline) - 120))
    log(f"train step: exit {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where the session's files go (required but with --dry-run)")
    parser.add_argument("--work", default="/tmp/autoscale-gpu", help="stores, runs and scratch")
    parser.add_argument("--corpus", help="<domain>.jsonl[.xz] files")
    parser.add_argument("--tokenizer", help="a tokenizer directory (tokenizer.json)")
    parser.add_argument("--make-inputs", metavar="CORPUS", help="write OUT/corpus and OUT/tokenizer from CORPUS and stop")
    parser.add_argument("--resume-from", metavar="TGZ", help="an earlier session's experiment.tgz to continue")
    parser.add_argument("--domains", default="code,tech,books")
    parser.add_argument("--repetition", default="match", choices=["match", "off"])
    parser.add_argument("--deadline", type=float, default=560.0, help="seconds from start to the packed results")
    parser.add_argument("--smoke", action="store_true", help="a CPU try of the session: a tiny experiment")
    parser.add_argument("--skip", default="", help="comma-separated steps to leave out: measure,tests,experiment")
    parser.add_argument("--with-throughput", action="store_true",
                        help="also run benchmarks/gpu_throughput.py (the runner's loop at context 1024, data wait)")
    parser.add_argument("--plan-s", type=float, default=None,
                        help="GPU seconds the experiment is planned for (default: what is left of the deadline "
                             "after the measurements, plus --next-call-s)")
    parser.add_argument("--next-call-s", type=float, default=0.0,
                        help="seconds of a following call (--resume-from) that will continue the experiment")
    parser.add_argument("--dry-run", action="store_true", help="print the plan for --tokens-per-s and stop")
    parser.add_argument("--tokens-per-s", type=float, default=None,
                        help="the GPU's training throughput (default: measured in the first --measure-s seconds)")
    parser.add_argument("--measure-s", type=float, default=30.0, help="the most seconds the measurement takes")
    parser.add_argument("--share-gain", type=float, default=1.0,
                        help="aggregate over one run's throughput with four runs sharing the GPU (1: assume none)")
    parser.add_argument("--run-overhead-s", type=float, default=20.0, help="one run's fixed seconds (start, eval)")
    args = parser.parse_args()
    if args.dry_run:
        plan = size_plan(args, args.tokens_per_s or 0.8e6, args.plan_s or args.deadline - RESERVE_S - args.measure_s)
        print(json.dumps({**plan.__dict__, "ratio": plan.ratio}, indent=1))
        print(plan.describe())
        return None
    if not args.out:
        parser.error("--out is required (but with --dry-run)")
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    if args.make_inputs:
        return make_inputs(Path(args.make_inputs), out, args.domains.split(","))
    if not args.corpus or not args.tokenizer:
        parser.error("--corpus and --tokenizer are required (or --make-inputs)")
    work.mkdir(parents=True, exist_ok=True)
    if args.resume_from and not (work / "experiment").exists():
        with tarfile.open(args.resume_from) as tar:
            tar.extractall(work, filter="data")
    skip = set(filter(None, args.skip.split(",")))
    timing: dict[str, Any] = {}
    try:
        env_info(out)
    except Exception:  # noqa: BLE001 - a missing tool must not cost the session its measurements
        log("env: " + traceback.format_exc())
    exp = Experiment(args, work, out)
    if "experiment" not in skip:  # the stores are prepared on the CPU while the GPU measures
        exp.start()
    tokens_per_s = args.tokens_per_s
    if "measure" not in skip:
        t = time.monotonic()
        measured = small_proxies(out, args.deadline)
        tokens_per_s = tokens_per_s or measured
        train_step(out, args.deadline)
        timing["measure_s"] = time.monotonic() - t
    if args.with_throughput:
        t = time.monotonic()
        code = run_logged([sys.executable, os.fspath(REPO / "benchmarks" / "gpu_throughput.py"), "--out",
                           os.fspath(work / "throughput")], out / "throughput.log", min(200.0, left(args.deadline) - 60))
        timing["throughput"] = {"exit": code, "seconds": time.monotonic() - t}
        if (work / "throughput" / "summary.json").is_file():
            shutil.copy(work / "throughput" / "summary.json", out / "throughput.json")
        log(f"throughput: exit {code}")
    if "experiment" not in skip:
        resumed = resumed_budgets(work)
        if resumed is not None:
            exp.budgets = resumed
            log(f"plan: the resumed experiment's budgets {resumed}")
        else:
            if tokens_per_s is None:
                try:
                    tokens_per_s = measure_throughput(args.measure_s)
                except Exception:  # noqa: BLE001 - the last session's figure keeps the session going
                    log("throughput measurement failed, planning at 0.8M tokens/s:\n" + traceback.format_exc())
                    tokens_per_s = 0.8e6
            plan = size_plan(args, tokens_per_s, args.plan_s or left(args.deadline) - RESERVE_S + args.next_call_s)
            exp.budgets = (*plan.proxy_budgets, plan.target)
            (out / "plan.json").write_text(json.dumps({**plan.__dict__, "ratio": plan.ratio}, indent=1))
            log(f"plan: {plan.describe()}")
    exp.gpu_free.set()
    if "tests" not in skip:
        t = time.monotonic()
        code = run_logged([sys.executable, "-m", "pytest", os.fspath(REPO / "tests" / "gpu"), "-m", "gpu", "-q", "-rA",
                           "-p", "no:cacheprovider", "-s"],
                          out / "gpu-tests.log", min(300.0, left(args.deadline) - 40))
        timing["tests"] = {"exit": code, "seconds": time.monotonic() - t}
        log(f"gpu tests: exit {code}")
    if exp.is_alive():
        exp.join(timeout=max(0.0, left(args.deadline) - 25))
        exp.stop()
        exp.join(timeout=10)
    timing["experiment"] = exp.phases
    t = time.monotonic()
    pack(work, out)
    timing["pack_s"] = time.monotonic() - t
    timing["total_s"] = time.monotonic() - START
    (out / "timing.json").write_text(json.dumps(timing, indent=1))
    log(f"done: {timing}")


if __name__ == "__main__":
    main()
