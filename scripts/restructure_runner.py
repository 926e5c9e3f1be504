"""Move ``autoscale_data/runner/`` from flat modules into folders that show its jobs (a one-off; delete after use).

Run it from the repository root of a checkout with no uncommitted changes, with the project's venv::

    .venv/bin/python scripts/restructure_runner.py            # move, rewrite, check
    .venv/bin/python scripts/restructure_runner.py --dry-run  # only list the moves
    .venv/bin/python scripts/restructure_runner.py --place new_module=planning/new_module  # one MOVES lacks

What it does:

1. ``git mv`` each flat module of ``runner/`` to its place in :data:`MOVES` (a module it does not know stops it
   before anything is written: add it to :data:`MOVES`, or name its place with ``--place``);
2. writes the new folders' ``__init__.py`` (a docstring with the folder's job and the sorted ``__all__`` of
   its modules; ``config/`` re-exports ``RunnerConfig`` and its loaders, so ``autoscale_data.runner.config``
   keeps its names);
3. moves ``DomainInfo`` from the plan to ``planning/data.py``, where ``inspect_domains`` builds it;
4. rewrites every import of a moved module in the Python files of the repository (absolute and relative,
   lazy ones inside functions included; ``from autoscale_data.runner import train as t`` too), every dotted
   module path in their text (``python -m autoscale_data.runner.train``, monkeypatch targets, docstrings)
   and in the Markdown, YAML and shell files, and every ``runner/<module>.py`` file path;
5. adds the runner's folder ranks to ``tests/project/test_architecture.py`` and the layout to
   ``docs/development.md``;
6. sorts the imports it touched with ruff, then checks: every import in the package resolves to a module
   that binds the imported names, every runner module imports, ``ruff check`` is clean.

Old module paths do not stay importable (no compatibility modules). A second run on its result changes
nothing. Anything it cannot map (an unknown module, an import with a comment inside it that must be
split, a name the target module does not bind) stops it with a message naming the file and line.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Callable
from pathlib import Path

PKG = "autoscale_data.runner"
RUNNER = Path("autoscale_data/runner")
SELF = Path("scripts/restructure_runner.py")
TEXT_SUFFIXES = (".md", ".yaml", ".yml", ".toml", ".cfg", ".sh", ".txt", ".rst")

#: Each flat module of runner/ -> its path under runner/ (without .py). Modules that stay at the top map to
#: themselves. A module of runner/ that is not a key here stops the script.
MOVES: dict[str, str] = {
    # the top: orchestration, the output folder and its records, the models ("records" may not exist yet)
    "pipeline": "pipeline", "describe": "describe", "experiment": "experiment", "ledger": "ledger",
    "records": "records", "layout": "layout", "models": "models",
    # config/: what the user writes
    "config": "config/runner_config", "sections": "config/sections", "method_sections": "config/method_sections",
    # planning/: which runs, with how many tokens of each domain
    "plan": "planning/plan", "data": "planning/data", "estimate": "planning/estimate",
    "repetition": "planning/repetition",
    # mixes/: how each target mix is chosen
    "methods": "mixes/methods", "fitting": "mixes/fitting", "online": "mixes/online", "hooks": "mixes/hooks",
    # training/: one run
    "train": "training/train", "dist": "training/dist", "checkpoint": "training/checkpoint",
    "evaluate": "training/evaluate", "extension": "training/extension",
    # reporting/: the report and the console summary
    "report": "reporting/report", "report_types": "reporting/report_types", "wording": "reporting/wording",
    "plots": "reporting/plots", "metrics": "reporting/metrics", "comparison": "reporting/comparison",
    "summary": "reporting/summary", "reference": "reporting/reference",
}

#: Each new folder's job (the first line of its __init__ docstring, then one line per module).
FOLDERS: dict[str, str] = {
    "config": "The runner's configuration: :class:`RunnerConfig`, loaded from YAML or JSON, and its sections.\n\n"
              "Every section is a frozen dataclass checked in ``__post_init__``; a bad value raises ``ValueError``\n"
              "naming the field, the value and what was expected. ``runner_config`` holds :class:`RunnerConfig` and\n"
              "its loaders, ``sections`` the model, optimizer, DDO, target, eval, DeepSpeed and executor sections,\n"
              "``method_sections`` those of the other mixing methods (``regmix:``, ``doremi:``, ``online:``).",
    "planning": "Planning: which runs an experiment trains, with how many tokens of each domain.\n\n"
                "The stores as the plan sees them (``data``: :class:`~.data.DomainInfo`), the plan and its run ids\n"
                "(``plan``), repetition-matched proxies (``repetition``) and time estimates (``estimate``).",
    "mixes": "The mixing methods: how each target mix is chosen, what runs that needs, and its cost.\n\n"
             "The registry (``methods``), AutoScale's fits and projection (``fitting``), online mixing\n"
             "(``online``) and the step hooks the methods' runs train with (``hooks``: DoReMi, online controllers).",
    "training": "Training one run: the trainer, its processes, checkpoints and per-domain evaluation.\n\n"
                "``train`` is the one entry point (in process, or ``python -m autoscale_data.runner.training.train\n"
                "--job job.json`` per rank); ``dist`` the process group and device, ``checkpoint`` the resumable\n"
                "checkpoints, ``evaluate`` the validation loss of every domain, ``extension`` a finished target run\n"
                "continued to a larger budget (its parent, mix and learning rate).",
    "reporting": "The report: ``report.json`` and its typed records, ``report.md``, plots and the console summary.\n\n"
                 "``report`` builds and writes it from an output folder, ``report_types`` declares its shape,\n"
                 "``comparison`` the table of mixing methods, ``metrics`` the numbers from curves, ``reference`` the\n"
                 "held-out reference losses, ``plots`` the PNGs, ``wording`` the shared sentences, ``summary`` the\n"
                 "console table.",
}

#: A moved module whose folder re-exports its ``__all__``: imports of those names go to the folder.
FACES: dict[str, str] = {"config": "config"}

#: (module, name) -> module: a definition that moves to another module.
MOVED_DEFINITIONS: dict[tuple[str, str], str] = {("plan", "DomainInfo"): "data"}


class Stop(Exception):
    """Something the script cannot map: the message says where."""


def full(name: str) -> str:
    return f"{PKG}.{MOVES[name].replace('/', '.')}"


MODMAP: dict[str, str] = {}
FACEMAP = {f"{PKG}.{old}": f"{PKG}.{face}" for old, face in FACES.items()}
DEFMAP: dict[tuple[str, str], str] = {}
PATTERNS: dict[str, re.Pattern[str]] = {}


def place(extra: dict[str, str]) -> None:
    """Add ``extra`` (module -> folder/module) to MOVES and build the maps and patterns from MOVES."""
    MOVES.update(extra)
    MODMAP.clear()
    MODMAP.update({f"{PKG}.{old}": full(old) for old in MOVES})
    DEFMAP.clear()
    DEFMAP.update({(f"{PKG}.{m}", n): full(to) for (m, n), to in MOVED_DEFINITIONS.items()})
    names = "|".join(sorted(MOVES, key=len, reverse=True))
    # ``autoscale_data.runner.<module>[.<name>]`` anywhere, ``runner.<module>[.<name>]`` after ` or ~, file paths
    PATTERNS["dotted"] = re.compile(r"(?<![\w.])autoscale_data\.runner\.(" + names + r")(?!\w)((?:\.\w+)?)")
    PATTERNS["short"] = re.compile(r"(?<=[`~])runner\.(" + names + r")(?!\w)((?:\.\w+)?)(?![\w(])")
    PATTERNS["path"] = re.compile(r"(?<![\w/])((?:autoscale_data/)?runner/)(" + names + r")\.py\b")


place({})


# ----------------------------------------------------------------------------------------------- the tree

def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def repo_files() -> list[Path]:
    names = git("ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    return sorted({Path(n) for n in names if n and Path(n).is_file() and Path(n) != SELF})


def module_of(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def plan_moves() -> list[tuple[Path, Path]]:
    """(from, to) of every module still to move; stops on a module MOVES does not know or a clash."""
    flat = {p.stem for p in RUNNER.glob("*.py") if p.name != "__init__.py"}
    unknown = sorted(flat - set(MOVES))
    if unknown:
        raise Stop(f"runner/ has modules the script does not place: {unknown}; place each with "
                   f"--place MODULE=FOLDER/MODULE (FOLDER: {', '.join(FOLDERS)}; MODULE=MODULE keeps it at the top), "
                   f"or add it to MOVES in scripts/restructure_runner.py")
    moves = []
    for old, new in MOVES.items():
        src, dst = RUNNER / f"{old}.py", RUNNER / f"{new}.py"
        if src == dst:  # stays at the top (or is not there yet)
            continue
        if src.exists() and dst.exists():
            raise Stop(f"both {src} and {dst} exist: resolve by hand")
        if src.exists():
            moves.append((src, dst))
        elif not dst.exists():
            raise Stop(f"neither {src} nor {dst} exists: MOVES names a module the tree does not have")
    return moves


# ------------------------------------------------------------------------------------------ module names

class Names:
    """Where every module of the package is before and after the move."""

    def __init__(self, moves: list[tuple[Path, Path]], files: list[Path]) -> None:
        self.moved = {src: dst for src, dst in moves}
        self.new_modules: set[str] = set()
        for f in files:
            if f.suffix == ".py" and f.parts[0] == "autoscale_data":
                self.new_modules.add(module_of(self.moved.get(f, f)))
        for folder in FOLDERS:
            self.new_modules.add(f"{PKG}.{folder}")

    def is_new_module(self, name: str) -> bool:
        return name in self.new_modules


def resolve_name(old: str, name: str, exports: dict[str, set[str]]) -> str:
    """The module that binds ``name`` after the move, for ``from old import name``."""
    if (old, name) in DEFMAP:
        return DEFMAP[(old, name)]
    if old in FACEMAP and name in exports.get(old, set()):
        return FACEMAP[old]
    return MODMAP[old]


def map_module_alias(full_name: str) -> str:
    """``from PKG import sub``: the module ``sub`` is after the move (a faced module: its folder)."""
    return FACEMAP.get(full_name, MODMAP[full_name])


def relative(target: str, package: str) -> tuple[int, str]:
    """(level, module) of ``target`` imported relatively from ``package``."""
    t, p = target.split("."), package.split(".")
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    if common == 0:
        raise Stop(f"{target} cannot be imported relatively from {package}")
    return len(p) - common + 1, ".".join(t[common:])


def absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


# ------------------------------------------------------------------------------------------- the imports

HEADER = re.compile(r"from\s+(\.*[\w.]*)\s+import\b")


def _comments(segment: str) -> list[tuple[int, int, str]]:
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(segment).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.start[1], tok.string))
    return out


def spell(target: str, is_relative: bool, package: str) -> str:
    """``target`` as an import spells it: absolute, or relative to ``package``."""
    if not is_relative:
        return target
    level, mod = relative(target, package)
    return "." * level + mod


def rewrite_imports(text: str, where: Path, old_module: str, new_module: str, is_package: bool,
                    names: Names, exports: dict[str, set[str]]) -> str:
    """``text`` (the source of ``old_module``, to become ``new_module``) with every import re-aimed."""
    old_package = old_module if is_package else old_module.rpartition(".")[0]
    new_package = new_module if is_package else new_module.rpartition(".")[0]
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = absolute(node, old_package)
        if not base.startswith("autoscale_data") and not node.level:
            continue
        groups: dict[str, list[tuple[str, str | None]]] = {}
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in MODMAP:  # `from PKG import module`
                target = map_module_alias(sub)
                parent, _, leaf = target.rpartition(".")
                asname = alias.asname or (alias.name if leaf != alias.name else None)
                groups.setdefault(parent, []).append((leaf, asname))
            elif base in MODMAP and not names.is_new_module(sub):
                if alias.name == "*":
                    raise Stop(f"{where}:{node.lineno}: `from {base} import *` cannot be mapped")
                target = resolve_name(base, alias.name, exports)
                if target == new_module:  # a definition that moved into this very module
                    continue
                groups.setdefault(target, []).append((alias.name, alias.asname))
            else:
                groups.setdefault(base, []).append((alias.name, alias.asname))
        same = (len(groups) == 1 and [(a.name, a.asname) for a in node.names] == next(iter(groups.values())))
        first, last = node.lineno - 1, node.end_lineno - 1
        segment = "".join(lines[first:last + 1])
        indent = lines[first][:node.col_offset]
        if indent.strip():
            raise Stop(f"{where}:{node.lineno}: an import that does not start its line")
        tail = lines[last][node.end_col_offset:]
        if tail.strip() and not tail.strip().startswith("#"):
            raise Stop(f"{where}:{node.lineno}: code after an import on the same line")
        if same:
            header = f"from {spell(next(iter(groups)), bool(node.level), new_package)} import"
            new = HEADER.sub(header.replace("\\", "\\\\"), segment, count=1)
            if new != segment:
                edits.append((first, last, [new]))
            continue
        comment = tail.strip()
        inner = [c for (ln, col, c) in _comments(segment)
                 if not (ln == last - first + 1 and col >= node.end_col_offset)]
        if inner:
            raise Stop(f"{where}:{node.lineno}: this import must be split but has comments inside it: split it "
                       f"by hand ({inner})")
        out = []
        for target, aliases in groups.items():
            spelt = ", ".join(n if a is None else f"{n} as {a}" for n, a in aliases)
            line = f"{indent}from {spell(target, bool(node.level), new_package)} import {spelt}"
            out.append(line + (f"  {comment}" if comment else "") + "\n")
        edits.append((first, last, out))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last + 1] = new
    return "".join(lines)


# -------------------------------------------------------------------------------------------- the text

def rewrite_text(text: str, names: Names, exports: dict[str, set[str]]) -> str:
    """Dotted module paths (``autoscale_data.runner.train``, ```runner.fitting.x```) and file paths."""

    def target(m: re.Match[str]) -> str | None:
        old, attr = f"{PKG}.{m.group(1)}", m.group(2)
        if attr and names.is_new_module(old + attr):  # already a path of the new layout
            return None
        new = resolve_name(old, attr[1:], exports) if attr else FACEMAP.get(old, MODMAP[old])
        return None if new == old else new.removeprefix(f"{PKG}.") + attr

    text = PATTERNS["dotted"].sub(lambda m: f"{PKG}.{target(m)}" if target(m) else m.group(0), text)
    text = PATTERNS["short"].sub(lambda m: f"runner.{target(m)}" if target(m) else m.group(0), text)
    return PATTERNS["path"].sub(lambda m: f"{m.group(1)}{MOVES[m.group(2)]}.py", text)


# ------------------------------------------------------------------------------------ moving a definition

def top_level_bound(tree: ast.Module) -> set[str]:
    """Names a module binds at its top (defs, classes, assignments, imports; inside if/try blocks too)."""
    bound: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    bound.add(a.asname or a.name.split(".")[0])
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            bound.add(n.id)
            if isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return bound


def _all_node(tree: ast.Module) -> ast.Assign | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return node
    return None


def set_all(text: str, change: Callable[[list[str]], list[str]]) -> str:
    tree = ast.parse(text)
    node = _all_node(tree)
    if node is None:
        raise Stop("a module without __all__ in a definition move")
    names = sorted(change(list(ast.literal_eval(node.value))))
    lines = text.splitlines(keepends=True)
    one = "__all__ = [" + ", ".join(f'"{n}"' for n in names) + "]\n"
    if node.lineno != node.end_lineno or len(one) > 110:
        one = "__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n"
    lines[node.lineno - 1:node.end_lineno] = [one]
    return "".join(lines)


def _after_imports(tree: ast.Module) -> int:
    """The line (0-based) after the last top-level import."""
    last = max((n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))), default=0)
    return last


def move_definition(texts: dict[Path, str], src: Path, dst: Path, name: str, src_module: str,
                    dst_module: str) -> None:
    """Cut the top-level definition ``name`` out of ``src`` into ``dst`` (after its ``__all__``)."""
    src_tree, dst_tree = ast.parse(texts[src]), ast.parse(texts[dst])
    if name in {n.name for n in dst_tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}:
        return  # moved already
    node = next((n for n in src_tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == name), None)
    if node is None:
        raise Stop(f"{src} does not define {name} at its top, nor does {dst}")
    lines = texts[src].splitlines(keepends=True)
    start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    block = "".join(lines[start:node.end_lineno]).rstrip() + "\n"
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    src_defs = {n.name for n in src_tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    src_defs |= {t.id for n in src_tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    local = sorted(used & src_defs - {name})
    if local:
        raise Stop(f"{name} uses {local}, defined in {src}: move them too, or by hand")
    imports = []
    dst_bound = top_level_bound(dst_tree)
    for n in src_tree.body:
        if isinstance(n, ast.ImportFrom) and n.module != "__future__":
            for a in n.names:
                bound = a.asname or a.name
                if bound in used and bound not in dst_bound:
                    if n.level:
                        raise Stop(f"{name} uses {bound}, imported relatively in {src}: move it by hand")
                    imports.append(f"from {n.module} import {a.name}" + (f" as {a.asname}" if a.asname else "") + "\n")
        elif isinstance(n, ast.Import):
            for a in n.names:
                bound = a.asname or a.name.split(".")[0]
                if bound in used and bound not in dst_bound:
                    imports.append(f"import {a.name}" + (f" as {a.asname}" if a.asname else "") + "\n")
    # cut from src, import it back there if src still uses it
    rest = lines[:start] + lines[node.end_lineno:]
    src_text = re.sub(r"\n{4,}", "\n\n\n", "".join(rest))
    src_text = set_all(src_text, lambda ns: [n for n in ns if n != name])
    still = {n.id for n in ast.walk(ast.parse(src_text)) if isinstance(n, ast.Name)}
    if name in still:
        tree = ast.parse(src_text)
        at = _after_imports(tree)
        level, mod = relative(dst_module, src_module.rpartition(".")[0])
        src_lines = src_text.splitlines(keepends=True)
        src_lines.insert(at, f"from {'.' * level}{mod} import {name}\n")
        src_text = "".join(src_lines)
    texts[src] = src_text
    # paste into dst after its __all__, with the imports it needs
    dst_text = set_all(texts[dst], lambda ns: [*ns, name])
    tree = ast.parse(dst_text)
    all_end = _all_node(tree).end_lineno
    dst_lines = dst_text.splitlines(keepends=True)
    dst_lines[all_end:all_end] = ["\n", "\n", block]
    at = _after_imports(tree)
    dst_lines[at:at] = imports
    texts[dst] = "".join(dst_lines)


# ------------------------------------------------------------------------------- tests, docs, __init__s

ARCH = Path("tests/project/test_architecture.py")
ARCH_DOC_ANCHOR = "The three bottom packages are independent of each other."
ARCH_DOC_ADD = (" Inside the runner the same rule\nholds between its folders and top modules (:data:`RUNNER_RANKS`).")
ARCH_BLOCK = '''

#: Rank of each part of the runner (a folder, or a module at its top): a runner module may import its own part
#: and parts of a strictly lower rank, as between the package's parts. ``__init__`` is the runner's public face.
RUNNER_RANKS: dict[str, int] = {
    "__init__": 12, "pipeline": 11, "describe": 10, "executors": 9, "training": 8, "mixes": 7, "reporting": 6,
    "ledger": 5, "records": 4, "planning": 3, "experiment": 2, "config": 1, "layout": 0, "models": 0,
}
RUNNER_FOLDERS = ("mixes", "planning", "reporting", "training")  # each __init__ lists its modules


def _runner_part(module: str) -> str | None:
    """``autoscale_data.runner.planning.plan`` -> ``planning``; ``__init__`` for the runner itself."""
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
    assert not wrong, "runner imports that do not point down:\\n" + "\\n".join(wrong)


def test_the_runner_check_sees_an_import_up() -> None:
    probe = "from .. import layout\\nfrom . import plan\\n\\ndef f():\\n    from ..training import train\\n"
    assert _runner_upward_imports([("autoscale_data.runner.planning.probe", probe, False)]) == [
        "autoscale_data.runner.planning.probe:5 (planning) imports autoscale_data.runner.training (training)"]


@pytest.mark.parametrize("folder", RUNNER_FOLDERS)
def test_each_runner_folder_lists_its_modules(folder: str) -> None:
    mod = importlib.import_module(f"autoscale_data.runner.{folder}")
    modules = sorted(p.stem for p in (PACKAGE / "runner" / folder).glob("*.py") if p.stem != "__init__")
    assert mod.__all__ == modules
'''

DEV = Path("docs/development.md")
DEV_ANCHOR = "that points at the stores it prepared, so the runner knows no demo.\n"
DEV_BLOCK = """
Inside `runner/` each folder is one job, and imports point down this list as well (the same test):

```
runner/__init__.py, pipeline.py  the public face; MixtureRunner, the steps in order; describe.py: --dry-run's text
runner/executors/                where runs train: this process, local slots, Slurm, Ray
runner/training/                 one run: the trainer (python -m autoscale_data.runner.training.train), extensions
runner/mixes/                    how each target mix is chosen: AutoScale's fits, baselines, DoReMi, online, hooks
runner/reporting/                report.json's records, report.md, plots, the methods' table, reference losses
{ledger}
runner/planning/                 the stores (DomainInfo), the plan and its run ids, repetition-matched proxies
runner/config/, experiment.py    RunnerConfig and its sections; the folder's config and its change check
runner/layout.py, models.py      every file name of the output folder; the model presets and their models
```
"""

LEDGER_LINES = ("runner/ledger.py                 the run ledger: one event per line, one result per run",
                "runner/ledger.py, records.py     the run ledger; the typed records of the files a run writes")


def init_text(folder: str, modules: list[str], texts: dict[Path, str]) -> str:
    doc = FOLDERS[folder]
    if folder in FACES.values():
        face_mod = next(MOVES[o].split("/")[1] for o, f in FACES.items() if f == folder)
        src = RUNNER / folder / f"{face_mod}.py"
        names = sorted(ast.literal_eval(_all_node(ast.parse(texts[src])).value))
        body = f"from .{face_mod} import {', '.join(names)}\n\n__all__ = [{', '.join(repr(n) for n in names)}]\n"
        body = body.replace("'", '"')
    else:
        body = "__all__ = [" + ", ".join(f'"{m}"' for m in sorted(modules)) + "]\n"
    return f'"""{doc}\n"""\n\nfrom __future__ import annotations\n\n{body}'


# ------------------------------------------------------------------------------------------------ checks

def check_imports(files: list[Path]) -> list[str]:
    """Every ``from autoscale_data... import name`` in ``files`` names a module that binds ``name``."""
    bound: dict[str, set[str]] = {}
    modules: dict[str, Path] = {}
    for p in Path("autoscale_data").rglob("*.py"):
        modules[module_of(p)] = p
    problems = []
    for f in files:
        if f.suffix != ".py":
            continue
        mod = module_of(f)
        package = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = absolute(node, package)
                if not base.startswith(PKG):
                    continue
                if base not in modules:
                    problems.append(f"{f}:{node.lineno}: no module {base}")
                    continue
                if base not in bound:
                    bound[base] = top_level_bound(ast.parse(modules[base].read_text()))
                for a in node.names:
                    if a.name not in bound[base] and f"{base}.{a.name}" not in modules:
                        problems.append(f"{f}:{node.lineno}: {base} binds no {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith(PKG) and a.name not in modules:
                        problems.append(f"{f}:{node.lineno}: no module {a.name}")
    return problems


def ruff() -> list[str]:
    exe = shutil.which("ruff") or os.fspath(Path(sys.executable).parent / "ruff")
    if not Path(exe).exists():
        raise Stop("ruff is not installed: run this script with the project's venv")
    return [exe]


# -------------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="only list the moves")
    parser.add_argument("--place", action="append", default=[], metavar="MODULE=FOLDER/MODULE",
                        help="also move runner/MODULE.py to runner/FOLDER/MODULE.py (MODULE=MODULE: it stays at the "
                             "top); for a module MOVES does not know. Repeat for several.")
    args = parser.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.place)
    bad = [f"{k}={v}" for k, v in extra.items() if v != k and (v.count("/") != 1 or v.split("/")[0] not in FOLDERS)]
    if bad:
        raise Stop(f"--place {bad}: expected MODULE=FOLDER/MODULE with FOLDER one of {sorted(FOLDERS)}, or MODULE=MODULE")
    place(extra)
    if not RUNNER.is_dir():
        raise Stop("run this from the repository root")
    moves = plan_moves()
    for src, dst in moves:
        print(f"move {src} -> {dst}")
    if args.dry_run:
        return 0
    files = repo_files()
    names = Names(moves, files)
    moved = dict(moves)
    texts = {f: f.read_text(encoding="utf-8") for f in files if f.suffix == ".py" or f.suffix in TEXT_SUFFIXES}
    original = dict(texts)

    # the names each faced module exports (its __all__)
    exports: dict[str, set[str]] = {}
    for old in FACES:
        p = RUNNER / f"{old}.py"
        p = p if p in texts else RUNNER / f"{MOVES[old]}.py"
        exports[f"{PKG}.{old}"] = set(ast.literal_eval(_all_node(ast.parse(texts[p])).value))

    # moved definitions, in the modules' present places and names
    for (src_old, name), dst_old in MOVED_DEFINITIONS.items():
        here = {old: (RUNNER / f"{old}.py" if RUNNER / f"{old}.py" in texts else RUNNER / f"{MOVES[old]}.py")
                for old in (src_old, dst_old)}
        move_definition(texts, here[src_old], here[dst_old], name, module_of(here[src_old]), module_of(here[dst_old]))

    # imports, then text
    for f, text in texts.items():
        if f.suffix == ".py":
            new_f = moved.get(f, f)
            try:
                text = rewrite_imports(text, f, module_of(f), module_of(new_f), f.name == "__init__.py", names, exports)
            except SyntaxError as exc:
                raise Stop(f"{f} does not parse: {exc}") from None
        texts[f] = rewrite_text(text, names, exports)

    # the test's ranks and the docs' layout
    if "RUNNER_RANKS" not in texts[ARCH]:
        t = texts[ARCH]
        if ARCH_DOC_ANCHOR in t:
            t = t.replace(ARCH_DOC_ANCHOR, ARCH_DOC_ANCHOR + ARCH_DOC_ADD, 1)
        else:
            print(f"note: {ARCH}'s docstring lacks {ARCH_DOC_ANCHOR!r}; the ranks are added without a word there")
        texts[ARCH] = t.rstrip("\n") + "\n" + ARCH_BLOCK
    if "runner/planning/" not in texts[DEV]:
        if DEV_ANCHOR not in texts[DEV]:
            raise Stop(f"{DEV} lacks the paragraph to put the runner's layout after: {DEV_ANCHOR!r}")
        ledger = (LEDGER_LINES[1] if (RUNNER / "records.py").exists() else LEDGER_LINES[0])
        texts[DEV] = texts[DEV].replace(DEV_ANCHOR, DEV_ANCHOR + DEV_BLOCK.format(ledger=ledger), 1)

    # write: move first (git keeps the history), then the new texts
    for src, dst in moves:
        dst.parent.mkdir(parents=True, exist_ok=True)
        git("mv", os.fspath(src), os.fspath(dst))
    touched = []
    for f, text in texts.items():
        if text != original[f] or f in moved:
            target = moved.get(f, f)
            target.write_text(text, encoding="utf-8")
            touched.append(target)
    new_inits = []
    for folder in FOLDERS:
        modules = sorted(p.stem for p in (RUNNER / folder).glob("*.py") if p.stem != "__init__")
        after = {moved.get(f, f): t for f, t in texts.items()}
        init = RUNNER / folder / "__init__.py"
        text = init_text(folder, modules, after)
        if not init.exists() or init.read_text() != text:
            init.write_text(text, encoding="utf-8")
            new_inits.append(init)
    if new_inits:
        git("add", *map(os.fspath, new_inits))
    py = sorted({os.fspath(p) for p in [*touched, *new_inits] if p.suffix == ".py"})
    if py:
        subprocess.run([*ruff(), "check", "--quiet", "--select", "I001", "--fix", *py], check=False)
    defs = [os.fspath(RUNNER / f"{MOVES[m]}.py") for pair in MOVED_DEFINITIONS.items() for m in (pair[0][0], pair[1])]
    subprocess.run([*ruff(), "check", "--quiet", "--select", "F401", "--fix", *defs], check=False)

    # checks
    problems = check_imports([p for p in repo_files() if p.suffix == ".py"])
    if problems:
        print("imports that do not resolve:\n" + "\n".join(problems), file=sys.stderr)
        return 1
    runner_modules = sorted(module_of(p) for p in RUNNER.rglob("*.py"))
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    done = subprocess.run([sys.executable, "-c", code, *runner_modules], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    if done.returncode:
        print("a runner module does not import:\n" + done.stderr[-3000:], file=sys.stderr)
        return 1
    lint = subprocess.run([*ruff(), "check", "autoscale_data", "tests", "benchmarks", "examples"],
                          capture_output=True, text=True)
    if lint.returncode:
        print("ruff is not clean:\n" + lint.stdout[-3000:], file=sys.stderr)
        return 1
    print(f"moved {len(moves)} modules, rewrote {len(touched)} files; imports resolve, runner imports, ruff clean")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Stop as exc:
        print(f"restructure_runner: {exc}", file=sys.stderr)
        sys.exit(2)
