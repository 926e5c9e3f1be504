"""Every command and code snippet of README.md, docs/*.md and the example configs' headers runs.

The fenced ``bash`` and ``python`` blocks of the markdown files and the ``autoscale-data`` commands in
the leading comments of ``examples/*.yaml`` are extracted and run, file by file in document order, in
a copy of a working folder of tiny generated inputs: text files (``data/*.jsonl``, ``data/code/``,
``data/books.parquet``), token stores of the byte tokenizer (``store/``, ``stores/``: web, code, books,
math), a trained BPE ``data/tokenizer.json``, Megatron datasets ``data/web_text_document`` and ``data/code_text_document``, a tokenized
``datasets`` folder ``data/code_tokenized``, synthetic DDO run tables (``runs.csv``, ``n1.csv`` …) and a
copy of ``examples/``. What is substituted, and nothing else: absolute ``/data/`` paths become
``data/``; ``autoscale-data`` runs in process (``cli.main``); python blocks run with a few names bound
beforehand (:func:`_names`: sizes such as ``N``, a ``model``, a ``loader``), with a loop body that is
only ``...`` (the docs' "your training step") cut to one iteration and the few illustrative budgets of
:data:`SMALLER` (tens of billions of tokens) scaled down to the tiny stores; an input a command names under
``data/`` that does not exist yet is generated (a small ``.jsonl``).

A block the test cannot run here carries ``<!-- snippet: skip: REASON -->`` on the line above its
fence (in a YAML header: ``# snippet: skip: REASON`` above the command); :data:`SKIPPED` lists every
one, so a new skip must be added there too. ``<!-- snippet: slow -->`` blocks (whole experiments) run
under the slow marker; in the default run their commands are parsed by the CLI's own parser and their
python compiled (:func:`test_slow_snippets_parse`). A ``yaml`` block marked ``<!-- snippet: file: NAME -->``
is written to ``NAME`` for the blocks after it (other ``yaml`` blocks are not run).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from paths import EXAMPLES, REPO

from autoscale_data.cli import build_parser
from autoscale_data.cli import main as cli

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CONFIGS = sorted(EXAMPLES.glob("*.yaml"))

#: Every skipped snippet: (file, its first line) -> why it cannot run here.
SKIPPED = {
    ("README.md", "bash scripts/setup.sh && .venv/bin/autoscale-data demo"): "installs a venv; runs the demo",
    ("docs/development.md", "bash scripts/test.sh"): "runs the whole test suite",
    ("docs/demo-and-evaluation.md", "autoscale-data demo --out autoscale-demo"): "the full demo, about 7 min",
    ("docs/demo-and-evaluation.md", "python benchmarks/eval_real_text.py --out runs/real-text"): "about an hour",
    ("docs/ecosystem.md", "from autoscale_data import ScaleAwareMixtureDataset, open_store"): "a remote URL",
    ("docs/dataset.md", "import json"): "needs a finished experiment with kept final checkpoints",
    ("examples/tiny-cpu.yaml", "autoscale-data run examples/tiny-cpu.yaml --out runs/tiny"): "runs in runner.md",
    ("examples/tiny-cpu-deepspeed.yaml", "autoscale-data run examples/tiny-cpu-deepspeed.yaml --out runs/tiny-ds"):
        "DeepSpeed-launched runs, about 10 min",
    ("docs/demo-and-evaluation.md", "python -m autoscale_data.demo.scarce --out scarce-case"): "about 18 min",
    ("docs/dataset.md", "from torch.nn import functional as F"): "runs as examples/online_mixing.py --tiny",
    ("examples/gpt2-large-comparison.yaml", "autoscale-data run examples/gpt2-large-comparison.yaml --dry-run"):
        "needs the 7 RedPajama stores; its dry run is tested in tests/runner/mixes/test_runner_methods.py",
}

_MARK = re.compile(r"^\s*(?:<!--|#)\s*snippet:\s*(slow|skip|file)(?::\s*(.*?))?\s*(?:-->)?\s*$")
_FENCE = re.compile(r"^```(bash|python|yaml)\s*$")


@dataclass(frozen=True)
class Snippet:
    """One block (or one YAML header command) and how it is marked."""

    file: str
    line: int
    lang: str
    code: str
    mark: str = ""
    reason: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.file, self.code.strip().splitlines()[0].split("  #")[0].strip()

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def markdown_snippets(path: Path) -> list[Snippet]:
    lines = path.read_text().splitlines()
    out, k = [], 0
    while k < len(lines):
        fence = _FENCE.match(lines[k])
        if not fence:
            k += 1
            continue
        end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith("```"))
        mark = _MARK.match(lines[k - 1]) if k else None
        lang = fence.group(1)
        if lang != "yaml" or (mark and mark.group(1) == "file"):  # a YAML block runs only as a file to write
            out.append(Snippet(os.fspath(path.relative_to(REPO)), k + 1, lang, "\n".join(lines[k + 1:end]),
                               mark.group(1) if mark else "", (mark.group(2) or "") if mark else ""))
        k = end + 1
    return out


def config_snippets(path: Path) -> list[Snippet]:
    """The commands in the leading comment block of an example config (continued lines joined)."""
    out, mark, reason, current, start = [], "", "", "", 0
    lines = path.read_text().splitlines()
    for k, line in enumerate(lines):
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        found = _MARK.match(line)
        if found:
            mark, reason = found.group(1), found.group(2) or ""
            continue
        if current or text.startswith("autoscale-data "):
            start = start if current else k + 1
            current += " " + text.split("  #")[0].rstrip("\\ ").strip()
            if not text.split("  #")[0].rstrip().endswith("\\"):
                out.append(Snippet(os.fspath(path.relative_to(REPO)), start, "bash", current.strip(), mark, reason))
                current, mark, reason = "", "", ""
    return out


def all_snippets() -> list[Snippet]:
    return [s for p in DOCS for s in markdown_snippets(p)] + [s for p in CONFIGS for s in config_snippets(p)]


# ------------------------------------------------------------------------------------------ inputs
_WORDS = ("the of data token model mix domain budget train loss web code book math paper run seed plan "
          "scale law weight store shard sequence epoch batch value curve point").split()


def _texts(seed: int, n: int = 1500) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, int(rng.integers(20, 80)))) for _ in range(n)]


def _jsonl(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in _texts(seed)))


def _runs_csv(path: Path, budget: float, seed: int, domains: tuple[str, ...] = ("web", "code", "books")) -> None:
    from autoscale_data.solver.synthetic import synthetic_ddo_runs

    base = {d: budget / len(domains) for d in domains}
    alpha, beta = [0.2, 0.4, 0.3][: len(domains)], [0.5, 0.7, 0.6][: len(domains)]
    synthetic_ddo_runs(base, alpha, beta, multipliers=(3.0, 1.7), seeds=2, noise=0.002,
                       rng_seed=seed).to_csv(path)


def _megatron(prefix: Path, seed: int) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    rng = np.random.default_rng(seed)
    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
    for _ in range(2000):  # about 140k tokens: enough for the bert-tiny experiment of docs/new-user-flow.md
        doc = np.append(rng.integers(1, 256, int(rng.integers(20, 120))), 0)
        builder.add_document(doc, [doc.size])
    builder.finalize(f"{prefix}.idx")


#: The domains of ``store/`` a file's snippets take as given, where not web, code and books (``None``: none yet).
STORE = {"README.md": ("web", "code"), "docs/prepare.md": None}
#: Folders a file's snippets create themselves (removed from its copy of the working folder).
FRESH = {"docs/new-user-flow.md": ("stores",)}
#: The docs' illustrative budgets, too large for the tiny stores, divided by 10^4 or 10^5 (a literal each).
SMALLER = {"50_000_000_000": "500_000", "budget_tokens=50_000_000": "budget_tokens=500_000",
           "9_000_000_000": "90_000", "1_000_000_000": "10_000", "10_000_000_000": "100_000",
           "budget_tokens=10**9": "budget_tokens=10**5"}


def _stores(out: Path, names: tuple[str, ...]) -> None:
    """``out/``: a ``prepare`` output folder of ``names`` (byte tokenizer) from the generated texts."""
    from autoscale_data.store.prepare import prepare_domains

    data = out.parent / "data"
    inputs = {"web": data / "web.jsonl", "code": data / "code", "books": data / "books.parquet",
              "math": data / "math.jsonl"}
    prepare_domains({n: inputs[n] for n in names}, out, "bytes", holdout_every=10, workers=1, progress=False)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working folder every file's snippets start from (copied per file)."""
    import datasets

    from autoscale_data.store import train_bpe_tokenizer

    root = tmp_path_factory.mktemp("docs") / "work"
    shutil.copytree(EXAMPLES, root / "examples", ignore=shutil.ignore_patterns("__pycache__", "data"))
    data = root / "data"
    for k, name in enumerate(("web", "math")):
        _jsonl(data / f"{name}.jsonl", k)
    (data / "code").mkdir(parents=True)
    texts = _texts(2)
    for k in range(0, len(texts), 5):
        (data / "code" / f"f{k}.txt").write_text("\n".join(texts[k:k + 5]))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": _texts(3)}), data / "books.parquet")
    train_bpe_tokenizer(_texts(4, 200), 300, data / "tokenizer.json")
    _stores(root / "stores", ("web", "code", "books", "math"))
    _stores(root / "store", ("web", "code", "books"))
    _megatron(data / "web_text_document", 5)
    _megatron(data / "code_text_document", 7)
    rng = np.random.default_rng(6)
    datasets.Dataset.from_dict({"input_ids": [np.append(rng.integers(1, 256, 50), 0).tolist() for _ in range(100)]}
                               ).save_to_disk(str(data / "code_tokenized"))
    for name, budget in (("runs", 1e6), ("n1", 1e6), ("n2", 4e6), ("n3", 1.6e7), ("runs_1M", 1e6), ("runs_4M", 4e6),
                         ("runs_16M", 1.6e7)):
        _runs_csv(root / f"{name}.csv", budget, int(budget) % 97)
    for name, budget in (("sweep_1M", 1e6), ("sweep_4M", 4e6)):  # new-user-flow.md's own sweep: its two domains
        _runs_csv(root / f"{name}.csv", budget, int(budget) % 89, ("web", "code"))
    return root


def _names(cwd: Path, code: str) -> dict[str, Any]:
    """What the python snippets take as given (sizes, a model, a loader …): the names ``code`` uses, bound."""
    import torch
    from torch.utils.data import DataLoader
    from transformers import BertConfig, BertForMaskedLM

    from autoscale_data import MixturePlan, ScaleAwareMixtureDataset
    from autoscale_data.solver import RunTable
    from autoscale_data.store import find_domain_stores

    weights = {"web": 0.4, "code": 0.3, "books": 0.2, "math": 0.1}
    stores = {d: f"stores/{d}" for d in ("web", "code", "math")}

    def ds() -> Any:
        there = find_domain_stores(cwd / "stores")
        return ScaleAwareMixtureDataset("stores/", {d: 1 / len(there) for d in there}, budget_tokens=8192,
                                        seq_len=32, seed=0)

    given: dict[str, Any] = {
        "ds": ds, "weights": lambda: weights, "N": lambda: 16384, "n": lambda: 4, "step": lambda: 3,
        "V": lambda: 257, "stores": lambda: stores, "new_budget": lambda: 32768,
        "loader": lambda: DataLoader(ds(), batch_size=8),
        "model": lambda: torch.nn.Sequential(torch.nn.Embedding(257, 16), torch.nn.Linear(16, 257)),
        "plan": lambda: MixturePlan.from_scales([(1e6, {"web": 3e5, "code": 3e5, "math": 4e5}),
                                                 (4e6, {"web": 1.4e6, "code": 1.1e6, "math": 1.5e6})]),
        "old_ds": lambda: ScaleAwareMixtureDataset(stores, {"web": 0.5, "code": 0.3, "math": 0.2}, 16384, 2048),
        "new_weights_or_plan_or_phases": lambda: {"web": 0.2, "code": 0.3, "math": 0.5},
        "bert": lambda: BertForMaskedLM(BertConfig(vocab_size=258, hidden_size=32, num_hidden_layers=1,
                                                   num_attention_heads=2, intermediate_size=64)),
        **{n: (lambda n=n: RunTable.from_csv(cwd / f"{n}.csv")) for n in ("runs_1M", "runs_4M", "runs_16M")},
    }
    return {name: make() for name, make in given.items() if re.search(rf"\b{name}\b", code)}


# ------------------------------------------------------------------------------------------ running
def _fit(code: str) -> str:
    """The docs' "your step here" loops (a body of only ``...``) cut to one pass."""
    for big, small in SMALLER.items():
        code = code.replace(big, small)
    return re.sub(r"^(\s+)\.\.\.\s*$", r"\1break", code, flags=re.M).replace("/data/", "data/")


def _commands(code: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", code)
    return [line.split("  #")[0].strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _inputs(argv: list[str], cwd: Path) -> None:
    """Generate the inputs a command names under ``data/`` that the folder does not have yet."""
    for arg in argv:
        _, sep, path = arg.partition("=")
        if sep and path.startswith("data/") and path.endswith(".jsonl") and not (cwd / path).exists():
            _jsonl(cwd / path, len(path))


def run_snippet(s: Snippet, cwd: Path) -> None:
    if s.mark == "file":  # <!-- snippet: file: NAME -->: the block is a file the next blocks use
        (cwd / s.reason).write_text(s.code + "\n")
        return
    if s.lang == "python":
        namespace = {"__name__": "__snippet__", **_names(cwd, s.code)}
        exec(compile(_fit(s.code), str(s), "exec", dont_inherit=True), namespace)  # noqa: S102
        return
    for command in _commands(_fit(s.code)):
        argv = shlex.split(command)
        if argv[0] == "autoscale-data":
            _inputs(argv, cwd)
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                rc = cli(argv[1:])
            assert rc == 0, f"{s}: `{command}` exited {rc}:\n{out.getvalue()[-3000:]}"
        elif argv[0] == "python":
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.fspath(REPO), os.environ.get("PYTHONPATH", "")])}
            done = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, capture_output=True, text=True, env=env,
                                  timeout=600)
            assert done.returncode == 0, f"{s}: `{command}`:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        else:
            raise AssertionError(f"{s}: `{command}`: only autoscale-data and python commands run here; mark the "
                                 "block <!-- snippet: skip: REASON --> if it cannot")


def _run_file(file: str, base: Path, tmp_path: Path, *, slow: bool, monkeypatch: pytest.MonkeyPatch,
              slow_after: str | None = None) -> int:
    """Run ``file``'s blocks in a copy of ``base`` (with ``slow``, the slow ones too; with ``slow_after``, a heading,
    only the slow ones below it); returns how many ran."""
    start = 0
    if slow_after is not None:
        start = (REPO / file).read_text().splitlines().index(slow_after) + 1
    cwd = tmp_path / "work"
    shutil.copytree(base, cwd, symlinks=True)
    for folder in FRESH.get(file, ()):
        shutil.rmtree(cwd / folder)
    if file in STORE:
        shutil.rmtree(cwd / "store")
        if STORE[file] is not None:
            _stores(cwd / "store", STORE[file])
    monkeypatch.chdir(cwd)
    ran = 0
    for s in all_snippets():
        if s.file == file and s.mark != "skip" and (s.mark == "slow") <= (slow and s.line > start):
            run_snippet(s, cwd)
            ran += 1
    return ran


FILES = sorted({s.file for s in all_snippets()})


def test_the_skipped_snippets_are_few_and_listed() -> None:
    skipped = {s.key: s.reason for s in all_snippets() if s.mark == "skip"}
    assert set(skipped) == set(SKIPPED), "a skip marker was added or removed: update SKIPPED"
    assert all(skipped.values()), "every skip marker gives its reason"
    assert len(all_snippets()) >= 30 and len(skipped) <= 11


@pytest.mark.timeout(600)
@pytest.mark.parametrize("file", FILES)
def test_snippets_run(file: str, base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_file(file, base, tmp_path, slow=False, monkeypatch=monkeypatch)


@pytest.mark.heavy
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("file", sorted({s.file for s in all_snippets() if s.mark == "slow"}))
def test_slow_snippets_run(file: str, base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run_file(file, base, tmp_path, slow=True, monkeypatch=monkeypatch)


#: A section whose slow blocks also run in the default suite (:func:`test_deepspeed_snippets_run`).
DEEPSPEED_SECTION = "## 5. Your own DeepSpeed loop on the plan: one process on a CPU, killed, resumed, then `evaluate`"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_deepspeed_snippets_run(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/new-user-flow.md's DeepSpeed path after the page's fast blocks: its own ``deepspeed.initialize`` loop
    on the plan, run through, SIGKILLed after a checkpoint and resumed bit for bit, then ``evaluate`` on the
    checkpoint folder. Its blocks are marked slow (the first ``deepspeed.initialize`` on a machine builds an op
    for minutes), so they are left out of :func:`test_snippets_run`; :func:`test_slow_snippets_parse` is the
    fast sibling."""
    pytest.importorskip("deepspeed")
    if not os.environ.get("TORCH_EXTENSIONS_DIR"):  # the suite's shared build cache
        monkeypatch.setenv("TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/autoscale-data/torch_extensions"))
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    ran = _run_file("docs/new-user-flow.md", base, tmp_path, slow=True, monkeypatch=monkeypatch,
                    slow_after=DEEPSPEED_SECTION)
    assert (tmp_path / "work" / "ckpt" / "latest").is_file() and ran > 8


def test_slow_snippets_parse() -> None:
    """The fast sibling of :func:`test_slow_snippets_run`: every command parses, every python block compiles."""
    parser = build_parser()
    slow = [s for s in all_snippets() if s.mark == "slow"]
    assert slow
    for s in slow:
        if s.lang == "python":
            compile(_fit(s.code), str(s), "exec")
            continue
        for command in _commands(s.code):
            argv = shlex.split(command)
            if argv[0] == "autoscale-data":
                parser.parse_args(argv[1:])
            else:
                assert argv[0] == "python", f"{s}: {command}"
                if argv[1] == "-m":  # a module of the package: it must import
                    assert importlib.util.find_spec(argv[2]) is not None, f"{s}: {command}"
                else:
                    assert (REPO / argv[1]).is_file(), f"{s}: {command}"
