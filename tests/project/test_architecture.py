"""The layer picture holds: imports only point down, and the pure layers never import torch.

Every ``import`` and ``from ... import`` in the package is read with :mod:`ast`, wherever it sits
(module level or inside a function: a lazy import is still a dependency). Layers, top to bottom::

    cli.py, commands/  ->  demo/  ->  runner/ | integrations/  ->  dataset/ | evaluation/  ->  online/  ->  mixing/ | store/ | solver/

The three bottom packages are independent of each other. Inside the runner the same rule
holds between its folders and top modules (:data:`RUNNER_RANKS`). The package root's private helpers
(``_checks``, ``_io``, ``_extras``, ``_options``, ``_runner_names``) sit below everything; ``autoscale_data/__init__.py`` is the
lazy facade and names its exports as strings, not imports. A part imports another part through that
part's public face (its ``__init__``, or a module of :data:`PUBLIC_FACES`), never from its modules.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import autoscale_data

PACKAGE = Path(autoscale_data.__file__).parent
_DOTTED = re.compile(r"autoscale_data(\.[A-Za-z_]\w*)+")

#: Layer rank of each top-level part: a module may import parts of a strictly lower rank (and its own part).
RANKS: dict[str, int] = {
    "cli": 6, "commands": 6,
    "demo": 5,
    "runner": 4, "integrations": 4,
    "dataset": 3, "evaluation": 3,
    "online": 2,
    "mixing": 1, "store": 1, "solver": 1,
    "_checks": 0, "_io": 0, "_extras": 0, "_options": 0, "_runner_names": 0, "_records": 0,
}
PURE = ("mixing", "online", "solver")  # never torch, not even lazily

#: Modules that are public faces of their part besides its ``__init__``.
PUBLIC_FACES = {
    "autoscale_data.solver.contrib": "the solver's experimental surface (docs/solver.md, 'Public surface')",
    "autoscale_data.solver.vocabulary": "the one definition of the closed name sets (objectives, laws, projection "
                                        "methods) that the config, the CLI and the docs read",
    "autoscale_data.runner.layout": "the output folder's file names, the one place they are spelt (read by the "
                                    "CLI and the demo; see test_no_module_but_the_layout_spells_an_output_file_name)",
}
#: Imports from another part's module that stay, each with its reason: (importing module, imported module).
_SOLVER_INTERNAL = "kept out of the solver's pinned surface on purpose (tests/solver/test_solver_surface.py INTERNAL)"
PRIVATE_IMPORTS_ALLOWED = {
    ("autoscale_data.commands._args", "autoscale_data.solver.design"): f"objective_weight: {_SOLVER_INTERNAL}",
    ("autoscale_data.commands.ddo", "autoscale_data.solver.ddo"): f"FIT_MODES: {_SOLVER_INTERNAL}",
    ("autoscale_data.commands.baseline", "autoscale_data.solver.regression"): f"REGRESSORS: {_SOLVER_INTERNAL}",
    ("autoscale_data.runner.config.method_sections", "autoscale_data.solver.regression"):
        f"LINEAR, REGRESSORS: {_SOLVER_INTERNAL}",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(text: str, module: str, *, is_package: bool = False, names: bool = False) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``text`` (the source of ``module``), lazy ones too, and
    of every string that is a dotted name in the package (``"autoscale_data.runner.training.train"``: imported
    by name, as ``registry.load`` or ``python -m`` do), docstrings left out. ``names``: ``from m import a`` gives
    ``m.a`` (a submodule or a name in ``m``)."""
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(text)
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                and _DOTTED.fullmatch(node.value) and _names_a_module(node.value):
            yield node.lineno, node.value
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None or names:  # `from . import x`: x may be a submodule
                yield from ((node.lineno, f"{target}.{alias.name}") for alias in node.names)
            else:
                yield node.lineno, target


def _names_a_module(dotted: str) -> bool:
    """Whether ``dotted`` is a module of the package, or a name in a module file (``package.module.Name``, as
    ``registry.load`` takes), rather than a format tag (``"autoscale_data.MixturePlan"``)."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() or (
        path.parent != PACKAGE and path.parent.with_suffix(".py").is_file())


def _part(module: str) -> str | None:
    """``autoscale_data.runner.planning.specs`` -> ``runner``; ``None`` outside the package or for the root itself."""
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


def _submodules_named(text: str, module: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, module) of every submodule taken by name from its package: ``from ..dataset import online``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join([*base, node.module])
            folder = PACKAGE.parent.joinpath(*target.split("."))
            for alias in node.names:
                submodule = (folder / f"{alias.name}.py").is_file() or (folder / alias.name / "__init__.py").is_file()
                if submodule and alias.name not in getattr(importlib.import_module(target), "__all__", ()):
                    yield node.lineno, f"{target}.{alias.name}"  # (a name in __all__ is the object it exports)


def _private_imports(sources: list[tuple[str, str, bool]]) -> list[str]:
    """Imports of another part's modules (not its package, not a public face, not allowed with a reason)."""
    wrong = []
    for module, text, is_package in sources:
        source = _part(module)
        if source is None:
            continue
        for line, target in sorted([*_imports(text, module, is_package=is_package),
                                    *_submodules_named(text, module, is_package=is_package)]):
            parts = target.split(".")
            if parts[0] != "autoscale_data" or len(parts) < 3 or parts[1] in (source, *(p for p in RANKS if p[0] == "_")):
                continue
            if target not in PUBLIC_FACES and (module, target) not in PRIVATE_IMPORTS_ALLOWED:
                wrong.append(f"{module}:{line} imports {target}: import it from autoscale_data.{parts[1]}")
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


def test_imports_of_another_part_go_through_its_public_face() -> None:
    wrong = _private_imports(_sources())
    assert not wrong, "imports of another part's modules:\n" + "\n".join(wrong)
    imported = {(m, t) for m, text, p in _sources() for _, t in _imports(text, m, is_package=p)}
    stale = sorted(set(PRIVATE_IMPORTS_ALLOWED) - imported)
    assert not stale, f"PRIVATE_IMPORTS_ALLOWED lists imports that no longer exist: {stale}"


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
    deep = ("from ..store.reader import TokenStore\nfrom ..solver import fit_ddo\nfrom ..solver.contrib import power_law\n"
            "from .plan import RunSpec\n\ndef f():\n    from ..dataset import online\n    import autoscale_data.mixing.budget\n")
    assert _private_imports([("autoscale_data.runner.x", deep, False)]) == [
        "autoscale_data.runner.x:1 imports autoscale_data.store.reader: import it from autoscale_data.store",
        "autoscale_data.runner.x:7 imports autoscale_data.dataset.online: import it from autoscale_data.dataset",
        "autoscale_data.runner.x:8 imports autoscale_data.mixing.budget: import it from autoscale_data.mixing"]


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
    from autoscale_data.runner import layout, registry

    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str) and k not in vars(registry)
             and k not in ("RUNS_CSV", "DDO", "BOOTSTRAP", "RUNS", "PLOTS", "FITS", "CHECKPOINT_DIR")}
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


# ----------------------------------------------------------------------------------- import cycles


def _module_graph(sources: list[tuple[str, str, bool]]) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}``: every import (lazy and ``TYPE_CHECKING`` ones too),
    each to the module it names (``from .m import name``: ``m``; ``from . import name`` and ``from .p import
    name``: the submodule ``name`` if there is one, else the package)."""
    known = {module for module, _, _ in sources}
    graph: dict[str, set[str]] = {module: set() for module in known}
    for module, text, is_package in sources:
        for _, target in _imports(text, module, is_package=is_package, names=True):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module and target != "autoscale_data":  # the facade names exports as strings
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (each sorted), by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(groups)


#: Circles that stand for now, each with why; the test fails on any other, and on one listed here that is gone.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def test_no_import_cycle_between_modules() -> None:
    """No module imports, even lazily or for a type only, a module that imports it back (directly or not)."""
    cycles = [tuple(c) for c in _cycles(_module_graph(_sources()))]
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    assert not new, "modules that import each other (in a circle):\n" + "\n".join(" <-> ".join(c) for c in new)
    gone = sorted(set(KNOWN_CYCLES) - set(cycles))
    assert not gone, f"no longer circles: remove them from KNOWN_CYCLES: {gone}"


def test_the_cycle_check_sees_lazy_and_type_only_imports() -> None:
    fake = [("autoscale_data.solver", "from .a import f\n", True),
            ("autoscale_data.solver.a", "def f():\n    from .b import g\n", False),
            ("autoscale_data.solver.b", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n", False),
            ("autoscale_data.solver.c", "from . import a\nfrom .a import f\n", False)]
    assert _cycles(_module_graph(fake)) == [["autoscale_data.solver.a", "autoscale_data.solver.b"]]
    one_way = [fake[0], fake[1], ("autoscale_data.solver.b", "import numpy\n", False), fake[3]]
    assert _cycles(_module_graph(one_way)) == []
    methods = "autoscale_data.runner.mixes.methods"
    by_name = [("autoscale_data.runner.registry", f'"""{methods}"""\nM = "{methods}.AutoScale"\n', False),
               (methods, "from .. import registry\n", False)]
    assert _cycles(_module_graph(by_name)) == [[methods, "autoscale_data.runner.registry"]]
    tags = [(by_name[0][0], f'"""{methods}"""\nM = "autoscale_data.MixturePlan"\n', False), by_name[1]]
    assert _cycles(_module_graph(tags)) == []  # a docstring and a format tag name no import


def test_the_registry_imports_nothing_of_the_runner() -> None:
    """Not even by name: the built-in methods' classes are imported where they are declared
    (``runner/mixes/builtin_methods.py``), so the cycle check counts those imports."""
    graph = _module_graph(_sources())
    assert not [m for m in graph["autoscale_data.runner.registry"] if m.startswith("autoscale_data.runner")]
    assert "autoscale_data.runner.mixes.builtin_methods" in graph["autoscale_data.runner"]


# ------------------------------------------------------------------------------- one vocabulary

#: Each closed name set, spelt once: (the module that defines it, the name of the set there).
VOCABULARIES = (
    ("autoscale_data.solver.vocabulary", "OBJECTIVES"),
    ("autoscale_data.solver.vocabulary", "LAWS"),
    ("autoscale_data.solver.vocabulary", "PROJECTION_CHOICES"),  # auto, observed and the projections
    ("autoscale_data._runner_names", "EXECUTORS"),
    ("autoscale_data._runner_names", "SLURM_CLUSTERS"),
    ("autoscale_data._runner_names", "LR_SCHEDULES"),
    ("autoscale_data.runner.config.sections", "REPETITION_MODES"),
    ("autoscale_data.runner.config.sections", "PROXY_SCHEDULES"),
    ("autoscale_data.runner.config.sections", "COOLDOWN_SHAPES"),  # its 'linear' a decay shape, the regressor's a model
    ("autoscale_data.solver.regression", "REGRESSORS"),
)
#: The one executor kind no config names (``local`` with one slot runs in the runner's process).
SINGLE_NAMES = (("autoscale_data._runner_names", "INPROCESS"),)

#: (module, word): the same word in another sense, and why it is not the vocabulary's name.
VOCABULARY_ALLOWED = {
    ("autoscale_data.solver.bootstrap", "observed"):
        "BootstrapResult's JSON field 'observed' (the DDO weights of the runs as observed), not the method",
    ("autoscale_data.runner.planning", "wsd"): "the module planning.wsd in the package's __all__, not the schedule",
    ("autoscale_data.runner.planning.specs", "wsd"): "RunSpec.wsd's key in the run id's payload, not the schedule",
}


def _vocabulary() -> dict[str, set[str]]:
    """``{name: the modules that define a set holding it}``."""
    where: dict[str, set[str]] = {}
    for module, attr in VOCABULARIES:
        for name in getattr(importlib.import_module(module), attr):
            where.setdefault(name, set()).add(module)
    for module, attr in SINGLE_NAMES:
        where.setdefault(getattr(importlib.import_module(module), attr), set()).add(module)
    return where


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of every docstring node in ``tree`` (module, class and function docstrings)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _vocabulary_literals(sources: list[tuple[str, str, bool]], where: dict[str, set[str]]) -> list[str]:
    """``module:line: 'name'`` for each vocabulary name written as a string outside its definitions."""
    found = []
    for module, text, _ in sources:
        tree = ast.parse(text)
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in where
                    and id(node) not in docs and module not in where[node.value]
                    and (module, node.value) not in VOCABULARY_ALLOWED):
                found.append(f"{module}:{node.lineno}: {node.value!r}")
    return found


def test_every_vocabulary_name_is_spelt_only_where_it_is_defined() -> None:
    """Objectives, laws, projection methods, executors, regressors, extension schedules and repetition modes
    are read from their one definition."""
    found = _vocabulary_literals(_sources(), _vocabulary())
    assert not found, ("vocabulary names spelt outside their definition (import the constant, e.g. "
                       "solver.vocabulary.MEAN_LOSS or _runner_names.SLURM):\n" + "\n".join(found))


def test_the_vocabulary_check_catches_a_planted_literal() -> None:
    where = _vocabulary()
    assert {"mean_loss", "mean_ppl", "3p", "4p", "auto", "geometric", "joint", "robust", "observed", "local",
            "slurm", "ray", "inprocess", "linear", "lightgbm", "rewarm_decay", "constant", "off", "match"} <= set(where)
    probe = ('"""Module doc."""\n\ndef f(o):\n    """robust"""\n    if o == "mean_ppl":\n'
             '        return {"executor": "slurm", "law": LAW_3P}\n    return f"{o} joint"\n')
    fake = [("autoscale_data.runner.probe", probe, False)]
    assert _vocabulary_literals(fake, where) == ["autoscale_data.runner.probe:5: 'mean_ppl'",
                                                 "autoscale_data.runner.probe:6: 'slurm'"]
    assert _vocabulary_literals([("autoscale_data.solver.vocabulary", probe, False)], where) == [
        "autoscale_data.solver.vocabulary:6: 'slurm'"]  # its own names only, in the defining module
    assert _vocabulary_literals([("autoscale_data.solver.bootstrap", 'x = {"observed": 1}\n', False)], where) == []
#: The writers of JSON files, and which positional argument is what they write.
_WRITERS = {"atomic_write_json": 1, "dump": 0}
#: In the runner also ``json.dumps``: it writes the lines of ``ledger.jsonl`` and ``config_history.jsonl``
#: (the CLI's ``json.dumps`` prints to the terminal).
_RUNNER_WRITERS = {**_WRITERS, "dumps": 0}
#: The modules that declare the records of the output folder, by file name (they may build a JSON object by hand).
_RECORD_MODULES = ("records.py", "report_types.py")


def _inline_dicts(text: str, writers: dict[str, int] = _WRITERS) -> list[tuple[int, str]]:
    """(line, writer) of every ``atomic_write_json`` / ``json.dump`` whose payload is a dict built in the call:
    a literal ``{...}``, a comprehension ``{k: v for ...}`` or ``dict(key=...)``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name not in writers or len(node.args) <= writers[name]:
            continue
        payload = node.args[writers[name]]
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
    line = "def g(fh, event):\n    fh.write(json.dumps({'time': 1, **event}) + '\\n')\n    fh.write(json.dumps(event.to_json()))\n"
    assert _inline_dicts(line) == [] and _inline_dicts(line, _RUNNER_WRITERS) == [(2, "dumps")]


def test_no_output_file_is_written_from_a_dict_built_outside_its_record() -> None:
    """What the runner and the CLI write goes through a typed record (``runner/records.py``, the report's types,
    :mod:`autoscale_data._records`), never a dict spelt out in the call that writes it."""
    offenders = []
    for part in ("runner", "commands"):
        for path in sorted((PACKAGE / part).rglob("*.py")):
            where = path.relative_to(PACKAGE).as_posix()
            if path.name in _RECORD_MODULES:
                continue
            writers = _RUNNER_WRITERS if part == "runner" else _WRITERS
            offenders += [f"{where}:{line}: {writer}" for line, writer in _inline_dicts(path.read_text(), writers)]
    assert not offenders, "a dict written to an output file outside its record:\n" + "\n".join(offenders)


#: Modules of the runner, the demo and the CLI that parse JSON that is not a file of the runner's output folder.
_OTHER_JSON = {
    "runner/config/runner_config.py": "the user's config file (JSON or YAML)",
    "demo/demo.py": "the demo's own marker demo.json (which demo the folder holds)",
    "demo/corpus.py": "the synthetic corpus's metadata",
    "commands/_args.py": "the user's input files (--weights-json, --scales …)",
}
_FILE_READS = ("read_text", "read_bytes")


def _raw_json_reads(text: str, json_names: set[str]) -> list[int]:
    """Lines that parse JSON outside :func:`layout.read`: a ``json.load`` / ``json.loads`` call (but the
    ``json.loads(json.dumps(x))`` copy), and a ``read_text`` / ``read_bytes`` of a path spelt with a layout name of
    a JSON file (``layout.RESULT``)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name in ("load", "loads") and isinstance(node.func.value, ast.Name) and node.func.value.id == "json":
            arg = node.args[0] if node.args else None
            copy = (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "dumps")
            if not copy:
                found.append(node.lineno)
        elif name in _FILE_READS and any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                                         and n.value.id == "layout" and n.attr in json_names
                                         for n in ast.walk(node.func.value)):
            found.append(node.lineno)
    return found


def test_the_raw_read_check_sees_loads_and_reads_of_output_files() -> None:
    planted = ("def f(path, out, fh):\n"
               "    a = json.loads(path.read_text())\n"
               "    b = json.load(fh)\n"
               "    c = (out / layout.RESULT).read_text()\n"
               "    d = json.loads(json.dumps(a))\n"
               "    e = layout.read(out, layout.RESULT)\n"
               "    f = (out / layout.REPORT_MD).read_text()\n")
    assert _raw_json_reads(planted, {"RESULT"}) == [2, 3, 4]


def test_no_output_file_is_read_but_through_layout_read() -> None:
    """Every JSON file of the output folder is read by ``layout.read`` (or ``layout.read_lines``), which returns
    its record: no module of the runner, the demo or the CLI parses one itself."""
    from autoscale_data.runner import layout

    json_names = {k for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)
                  and v.endswith((".json", ".jsonl"))}
    offenders = []
    for part in ("runner", "demo", "commands"):
        for path in sorted((PACKAGE / part).rglob("*.py")):
            where = path.relative_to(PACKAGE).as_posix()
            if where in _OTHER_JSON or where == "runner/layout.py":
                continue
            offenders += [f"{where}:{line}" for line in _raw_json_reads(path.read_text(), json_names)]
    assert not offenders, "JSON parsed outside layout.read (read the output file with layout.read):\n" + \
        "\n".join(offenders)


#: Rank of each part of the runner (a folder, or a module at its top): a runner module may import its own part
#: and parts of a strictly lower rank, as between the package's parts. ``__init__`` is the runner's public face.
RUNNER_RANKS: dict[str, int] = {
    "__init__": 13, "pipeline": 12, "describe": 11, "executors": 10, "mixes": 9, "training": 8, "reporting": 7,
    "ledger": 6, "records": 5, "planning": 4, "experiment": 3, "config": 2, "layout": 1, "models": 1, "registry": 0,
}
RUNNER_FOLDERS = ("mixes", "planning", "reporting", "training")  # each __init__ lists its modules


def _runner_part(module: str) -> str | None:
    """``autoscale_data.runner.planning.specs`` -> ``planning``; ``__init__`` for the runner itself."""
    parts = module.split(".")
    if parts[:2] != ["autoscale_data", "runner"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def _runner_upward_imports(sources: list[tuple[str, str, bool]]) -> list[str]:
    wrong = []
    for module, text, is_package in sources:
        source = _runner_part(module)
        if source is None:
            continue
        for line, target in _imports(text, module, is_package=is_package):
            dest = _runner_part(target)
            if dest is not None and dest != source and RUNNER_RANKS.get(dest, 99) >= RUNNER_RANKS.get(source, -1):
                wrong.append(f"{module}:{line} ({source}) imports {target} ({dest})")
    return wrong


def test_every_runner_part_has_a_rank() -> None:
    parts = {_runner_part(module) for module, _, _ in _sources()} - {None}
    assert parts <= set(RUNNER_RANKS), f"runner parts without a rank: {sorted(parts - set(RUNNER_RANKS))}"


def test_runner_imports_only_point_down() -> None:
    wrong = _runner_upward_imports(_sources())
    assert not wrong, "runner imports that do not point down:\n" + "\n".join(wrong)


def test_the_runner_check_sees_an_import_up() -> None:
    probe = "from .. import layout\nfrom . import plan\n\ndef f():\n    from ..training import train\n"
    assert _runner_upward_imports([("autoscale_data.runner.planning.probe", probe, False)]) == [
        "autoscale_data.runner.planning.probe:5 (planning) imports autoscale_data.runner.training (training)"]


@pytest.mark.parametrize("folder", RUNNER_FOLDERS)
def test_each_runner_folder_lists_its_modules(folder: str) -> None:
    mod = importlib.import_module(f"autoscale_data.runner.{folder}")
    modules = sorted(p.stem for p in (PACKAGE / "runner" / folder).glob("*.py") if p.stem != "__init__")
    assert mod.__all__ == modules


# ---------------------------------------------------------------------- the method registry is the source

#: (module, method name): a name of the registry written in a tuple, list or set, or compared, outside
#: ``runner/registry.py``, and why it stays.
METHOD_NAMES_ALLOWED = {
    ("autoscale_data.solver.baselines", name): "the solver's baseline weight functions (autoscale-data baseline), "
    "below the runner: the names the runner's registry trains with the same meaning"
    for name in ("uniform", "natural", "reference", "regmix", "mixing_law")
} | {
    ("autoscale_data.commands.baseline", name): "the `baseline` verb dispatches the solver's baselines by name"
    for name in ("reference", "regmix", "mixing_law")
} | {
    ("autoscale_data.runner.config.sections", "uniform"): "ddo.base_weights: 'uniform' is a weight spec, not the method",
    ("autoscale_data.runner.planning.data", "uniform"): "ddo.base_weights: 'uniform' is a weight spec, not the method",
    ("autoscale_data.runner.mixes.methods", "uniform"): "a reference spec ('uniform', 'natural' or a preset) of "
                                                       "doremi.reference / target.reference_weights",
    ("autoscale_data.runner.mixes.methods", "natural"): "a reference spec, as above",
    ("autoscale_data.runner.reporting", "reference"): "__all__ names the module reporting/reference.py",
    ("autoscale_data.runner.training.checkpoint", "autoscale"): "the key of the runner's state in a DeepSpeed "
                                                                "checkpoint's client state",
    ("autoscale_data.solver.gain", "reference"): "the reference allocation a candidate is compared with",
}


def _method_name_uses(sources: list[tuple[str, str, bool]], names: set[str]) -> list[str]:
    """``module:line: 'name'`` for each registered method name in a tuple, list or set literal or a comparison
    (``== "doremi"``, ``in ("regmix", ...)``) outside the registry: a hand-kept list of methods."""
    found = []
    for module, text, _ in sources:
        if module == "autoscale_data.runner.registry":
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                values = node.elts
            elif isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
            else:
                continue
            found += [f"{module}:{v.lineno}: {v.value!r}" for v in values
                      if isinstance(v, ast.Constant) and v.value in names and (module, v.value) not in METHOD_NAMES_ALLOWED]
    return sorted(set(found))


def test_no_method_name_is_listed_or_compared_outside_the_registry() -> None:
    """Which methods exist, where they run and what they need is read from ``runner/registry.py``."""
    from autoscale_data.runner import registry

    found = _method_name_uses(_sources(), set(registry.names()) | set(registry.selection_kinds()))
    assert not found, ("mixing-method names listed or compared outside runner/registry.py (read the registry: "
                       "registry.names(...), a declaration, or its constants):\n" + "\n".join(found))


def test_the_method_name_check_catches_a_planted_tuple_and_comparison() -> None:
    from autoscale_data.runner import registry

    probe = ('"""doremi"""\nKNOWN = ("regmix", "mixing_law")\n\ndef f(kind, label):\n    if kind == "swarm":\n'
             '        return label\n    return f"{label} doremi", {"x": "ado"}\n')
    names = set(registry.names()) | set(registry.selection_kinds())
    assert _method_name_uses([("autoscale_data.runner.probe", probe, False)], names) == [
        "autoscale_data.runner.probe:2: 'mixing_law'", "autoscale_data.runner.probe:2: 'regmix'",
        "autoscale_data.runner.probe:5: 'swarm'"]
    assert _method_name_uses([("autoscale_data.runner.registry", probe, False)], names) == []


def test_the_allowed_method_names_are_still_used() -> None:
    from autoscale_data.runner import registry

    names = set(registry.names()) | set(registry.selection_kinds())
    used = set()
    for module, text, _ in _sources():
        for node in ast.walk(ast.parse(text)):
            values = (node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else
                      [node.left, *node.comparators] if isinstance(node, ast.Compare) else [])
            used |= {(module, v.value) for v in values if isinstance(v, ast.Constant) and v.value in names}
    stale = sorted(set(METHOD_NAMES_ALLOWED) - used)
    assert not stale, f"METHOD_NAMES_ALLOWED lists uses that no longer exist: {stale}"
