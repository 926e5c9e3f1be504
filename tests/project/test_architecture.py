"""The layer picture holds: imports only point down, and the pure layers never import torch.

Every ``import`` and ``from ... import`` in the package is read with :mod:`ast`, wherever it sits
(module level or inside a function: a lazy import is still a dependency). Layers, top to bottom::

    cli.py, commands/  ->  demo/  ->  runner/ | integrations/  ->  dataset/ | online/  ->  mixing/ | store/ | solver/

The three bottom packages are independent of each other. The package root's private helpers
(``_checks``, ``_io``, ``_extras``, ``_options``) sit below everything; ``autoscale_data/__init__.py`` is the
lazy facade and names its exports as strings, not imports.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import autoscale_data

PACKAGE = Path(autoscale_data.__file__).parent

#: Layer rank of each top-level part: a module may import parts of a strictly lower rank (and its own part).
RANKS: dict[str, int] = {
    "cli": 5, "commands": 5,
    "demo": 4,
    "runner": 3, "integrations": 3,
    "dataset": 2, "online": 2,
    "mixing": 1, "store": 1, "solver": 1,
    "_checks": 0, "_io": 0, "_extras": 0, "_options": 0, "_records": 0,
}
PURE = ("mixing", "online", "solver")  # never torch, not even lazily


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(text: str, module: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``text`` (the source of ``module``), lazy ones too."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:  # `from . import x`: x may be a submodule
                yield from ((node.lineno, f"{target}.{alias.name}") for alias in node.names)
            else:
                yield node.lineno, target


def _part(module: str) -> str | None:
    """``autoscale_data.runner.plan`` -> ``runner``; ``None`` outside the package or for the root itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "autoscale_data" and len(parts) > 1 else None


def _sources() -> list[tuple[str, str, bool]]:
    """(module name, source text, is a package) of every module of the package."""
    return [(_module_name(f), f.read_text(encoding="utf-8"), f.name == "__init__.py")
            for f in sorted(PACKAGE.rglob("*.py"))]


def _upward_imports(sources: list[tuple[str, str, bool]]) -> list[str]:
    wrong = []
    for module, text, is_package in sources:
        source = _part(module)
        if source is None:  # the facade: autoscale_data/__init__.py
            continue
        for line, target in _imports(text, module, is_package=is_package):
            if target.split(".")[0] != "autoscale_data":
                continue
            dest = _part(target)
            if dest is None or dest.startswith("__"):  # the facade itself or one of its dunders
                if source != "cli":  # only the CLI reads __version__
                    wrong.append(f"{module}:{line} imports the package facade")
                continue
            if dest != source and RANKS.get(dest, 99) >= RANKS[source]:
                wrong.append(f"{module}:{line} ({source}) imports {target} ({dest})")
    return wrong


def _torch_imports(sources: list[tuple[str, str, bool]], part: str) -> list[str]:
    return [f"{module}:{line} imports {target}" for module, text, is_package in sources if _part(module) == part
            for line, target in _imports(text, module, is_package=is_package) if target.split(".")[0] == "torch"]


def test_every_part_has_a_rank() -> None:
    parts = {_part(module) for module, _, _ in _sources()} - {None}
    assert parts <= set(RANKS), f"parts without a layer: {sorted(parts - set(RANKS))}; add them to RANKS"


def test_imports_only_point_down() -> None:
    wrong = _upward_imports(_sources())
    assert not wrong, "imports that do not point down:\n" + "\n".join(wrong)


@pytest.mark.parametrize("part", PURE)
def test_pure_layers_never_import_torch(part: str) -> None:
    found = _torch_imports(_sources(), part)
    assert not found, "\n".join(found)


def test_the_checks_see_lazy_relative_and_sibling_imports() -> None:
    probe = "import numpy\n\ndef f():\n    from ..runner import plan\n    from ..store import reader\n    import torch.nn\n"
    fake = [("autoscale_data.solver.probe", probe, False)]
    assert _upward_imports(fake) == [
        "autoscale_data.solver.probe:4 (solver) imports autoscale_data.runner (runner)",
        "autoscale_data.solver.probe:5 (solver) imports autoscale_data.store (store)"]
    assert _torch_imports(fake, "solver") == ["autoscale_data.solver.probe:6 imports torch.nn"]
    fine = [("autoscale_data.runner.x", "from ..dataset import mixture\nfrom . import plan\nfrom .._io import a\n", False)]
    assert _upward_imports(fine) == []


SUBPACKAGES = ("autoscale_data.store", "autoscale_data.mixing", "autoscale_data.solver", "autoscale_data.dataset",
               "autoscale_data.runner", "autoscale_data.demo", "autoscale_data.online")


@pytest.mark.parametrize("module", ["autoscale_data", *SUBPACKAGES])
def test_all_is_the_sorted_list_of_what_resolves(module: str) -> None:
    mod = importlib.import_module(module)
    names = mod.__all__
    assert names == sorted(set(names)), f"{module}.__all__ is not sorted or repeats a name"
    for name in names:
        assert getattr(mod, name) is not None, name


def test_top_level_names_load_lazily_and_solver_names_never_import_torch() -> None:
    code = ("import sys, autoscale_data as a; assert 'torch' not in sys.modules; a.fit_ddo; a.MixturePlan; "
            "a.open_store; assert 'torch' not in sys.modules, 'a solver/store name imported torch'; "
            "a.ScaleAwareMixtureDataset; assert 'torch' in sys.modules; print(len(a.__all__))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with pytest.raises(AttributeError, match="no attribute 'MixtureRunner'"):
        autoscale_data.MixtureRunner  # noqa: B018  (the runner is a subpackage behind an extra)


def test_no_module_but_the_layout_spells_an_output_file_name() -> None:
    """Every path of the runner's output folder comes from ``runner/layout.py`` (runner, demo, CLI)."""
    from autoscale_data.runner import layout

    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)
             and k not in ("AUTOSCALE", "ANYTIME", "DDO_N2", "NATURAL", "REFERENCE", "UNIFORM", "RUNS_CSV", "DDO",
                           "BOOTSTRAP", "RUNS", "PLOTS", "FITS", "CHECKPOINT_DIR", "DOREMI", "REGMIX", "MIXING_LAW")}
    prefixes = tuple(f"{p}_" for p in (layout.RUNS_CSV, layout.DDO, layout.BOOTSTRAP))
    offenders = []
    for part in ("runner", "demo", "commands"):
        for path in sorted((PACKAGE / part).rglob("*.py")):
            if path.name == "layout.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value
                    if text in names or (text.startswith(prefixes) and text.endswith((".json", ".csv"))):
                        offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {text!r}")
    assert not offenders, "output file names spelt outside runner/layout.py:\n" + "\n".join(offenders)


#: The writers of JSON files, and which positional argument is what they write.
_WRITERS = {"atomic_write_json": 1, "dump": 0}
#: The modules that declare the records of the output folder, by file name (they may build a JSON object by hand).
_RECORD_MODULES = ("records.py", "report_types.py")


def _inline_dicts(text: str) -> list[tuple[int, str]]:
    """(line, writer) of every ``atomic_write_json`` / ``json.dump`` whose payload is a dict built in the call:
    a literal ``{...}``, a comprehension ``{k: v for ...}`` or ``dict(key=...)``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name not in _WRITERS or len(node.args) <= _WRITERS[name]:
            continue
        payload = node.args[_WRITERS[name]]
        built = isinstance(payload, (ast.Dict, ast.DictComp)) or (
            isinstance(payload, ast.Call) and isinstance(payload.func, ast.Name) and payload.func.id == "dict"
            and bool(payload.keywords))
        if built:
            found.append((node.lineno, name))
    return found


def test_the_dict_check_sees_literals_comprehensions_and_dict_calls() -> None:
    planted = ("def f(path, spec, fh, losses):\n"
               "    atomic_write_json(path / layout.FAILURE, {'run_id': spec.run_id, 'reason': 'x'})\n"
               "    _io.atomic_write_json(path, {d: r.to_json() for d, r in losses.items()})\n"
               "    json.dump(dict(tag='a', step=1), fh)\n"
               "    atomic_write_json(path, {**spec, 'extra': []}, indent=None)\n"
               "    atomic_write_json(path, spec.to_json())\n"
               "    json.dump(to_json(losses), fh)\n"
               "    atomic_write_json(path, dict(spec))\n")
    assert _inline_dicts(planted) == [(2, "atomic_write_json"), (3, "atomic_write_json"), (4, "dump"),
                                      (5, "atomic_write_json")]


def test_no_output_file_is_written_from_a_dict_built_outside_its_record() -> None:
    """What the runner and the CLI write goes through a typed record (``runner/records.py``, the report's types,
    :mod:`autoscale_data._records`), never a dict spelt out in the call that writes it."""
    offenders = []
    for part in ("runner", "commands"):
        for path in sorted((PACKAGE / part).rglob("*.py")):
            where = path.relative_to(PACKAGE).as_posix()
            if path.name in _RECORD_MODULES:
                continue
            offenders += [f"{where}:{line}: {writer}" for line, writer in _inline_dicts(path.read_text())]
    assert not offenders, "a dict written to an output file outside its record:\n" + "\n".join(offenders)
