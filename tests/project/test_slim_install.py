"""``pip install autoscale-data`` without extras: the sampler and the solver work, the runner names its extra.

A fresh virtual environment gets the package's wheel and only the core dependencies (the
``Requires-Dist`` lines without an extra, and theirs, recursively). To stay fast and offline, those
distributions are not downloaded again: their installed files are linked from this environment
(set up by ``scripts/setup.sh``, so torch is the CPU build pinned by ``constraints.txt``), and pip
then installs the wheel with ``--no-index`` and the constraints file, which fails if a core
dependency is missing or torch is not the pinned version. transformers, matplotlib, deepspeed and
the file-format packages are absent there. Takes about 30-60 s (``-m slim_install`` selects it).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from paths import REPO

pytestmark = pytest.mark.slim_install

ROOT = REPO
EXTRAS_ABSENT = ("transformers", "matplotlib", "deepspeed", "pyarrow", "datasets", "webdataset")


def _core_closure() -> list[importlib.metadata.Distribution]:
    """The installed distributions the core needs: autoscale-data's requirements without extras, recursively."""
    env = {"extra": ""}
    todo = [r for r in importlib.metadata.requires("autoscale-data") or []
            if Requirement(r).marker is None or Requirement(r).marker.evaluate(env)]
    seen: dict[str, importlib.metadata.Distribution] = {}
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        dist = importlib.metadata.distribution(req.name)
        seen[name] = dist
        todo += dist.requires or []
    return list(seen.values())


def _link_installed(dists: list[importlib.metadata.Distribution], site: Path) -> list[str]:
    """Link every top-level file or folder the distributions installed into ``site``; returns the names."""
    linked = []
    for dist in dists:
        base = Path(dist.locate_file(""))
        tops = {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in sorted(tops - {"__pycache__"}):
            if not (site / top).exists() and (base / top).exists():
                (site / top).symlink_to(base / top)
                linked.append(top)
    return linked


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def slim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the wheel and the core dependencies only; returns its ``bin`` folder."""
    tmp = tmp_path_factory.mktemp("slim")
    source = tmp / "source"  # a copy: building in the checkout would leave build/ there (stale files included)
    shutil.copytree(ROOT / "autoscale_data", source / "autoscale_data",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "setup.cfg", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    wheels = tmp / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                  "-w", str(wheels), str(source)])
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next(wheels.glob("autoscale_data-*.whl"))
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    assert site.is_dir() and site != Path(sysconfig.get_path("purelib"))
    _link_installed(_core_closure(), site)
    installed = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index",
                      "--no-build-isolation", "-c", str(ROOT / "constraints.txt"), str(wheel)])
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-3000:]
    return venv / "bin"


_SCRIPT = r'''
import importlib.util, json, sys, tempfile
from pathlib import Path

absent = [m for m in sys.argv[1].split(",") if importlib.util.find_spec(m) is not None]
assert not absent, f"the slim environment has {absent}"

import torch
import autoscale_data as a
from autoscale_data.solver.contrib import synthetic_ddo_runs

tmp = Path(tempfile.mkdtemp())
for i, name in enumerate(("web", "code")):
    docs = [json.dumps({"text": f"{name} document {d} " * (5 + i)}) for d in range(200)]
    (tmp / f"{name}.jsonl").write_text("\n".join(docs) + "\n")
a.prepare({n: tmp / f"{n}.jsonl" for n in ("web", "code")}, tmp / "stores", "bytes", workers=1, progress=False)
ds = a.ScaleAwareMixtureDataset(tmp / "stores", {"web": 0.7, "code": 0.3}, budget_tokens=64 * 32, seq_len=32, seed=0)
samples = list(ds)
counts = [sum(s["domain"] == d for s in samples) for d in range(2)]

base = {"web": 4e5, "code": 3e5, "books": 3e5}
fits = [a.fit_ddo(synthetic_ddo_runs({d: n * k for d, n in base.items()}, [2.0, 1.0, 3.0], [0.4, 0.6, 0.3]),
                  objective="mean_loss", min_weight=0.05) for k in (1, 4)]
fit = fits[0]
plan = a.MixturePlan.from_scales(fits)
try:
    import autoscale_data.runner
    runner_error = None
except a.MissingExtraError as exc:
    runner_error = {"extra": exc.extra, "message": str(exc), "is_import_error": isinstance(exc, ImportError)}
print(json.dumps({"torch": torch.__version__, "samples": len(samples), "counts": counts,
                  "weights": sum(fit.weights.values()), "plan": sum(plan.weights_for_budget(1e8).values()),
                  "runner_error": runner_error}))
'''


@pytest.mark.timeout(600)
def test_core_works_without_extras_and_the_runner_names_its_extra(slim: Path, tmp_path: Path) -> None:
    done = _run([str(slim / "python"), "-c", _SCRIPT, ",".join(EXTRAS_ABSENT)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    pin = next(line.split("==")[1].strip() for line in (ROOT / "constraints.txt").read_text().splitlines()
               if line.startswith("torch=="))
    assert out["torch"].split("+")[0] == pin
    assert out["samples"] == 64 and sorted(out["counts"]) == [19, 45]  # 0.3 and 0.7 of 64 sequences
    assert out["weights"] == pytest.approx(1.0) and out["plan"] == pytest.approx(1.0)
    err = out["runner_error"]
    assert err is not None and err["extra"] == "runner" and err["is_import_error"]
    assert "pip install 'autoscale-data[runner]'" in err["message"] and "transformers" in err["message"]


@pytest.mark.timeout(300)
def test_cli_exits_2_naming_the_extra(slim: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"domains": "stores"}))
    done = _run([str(slim / "autoscale-data"), "run", str(cfg)], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "autoscale-data run: error:" in done.stderr and "pip install 'autoscale-data[runner]'" in done.stderr
    assert "Traceback" not in done.stderr
    helped = _run([str(slim / "autoscale-data"), "--help"], cwd=tmp_path)
    assert helped.returncode == 0 and "ddo" in helped.stdout
