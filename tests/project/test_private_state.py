"""No class sets another object's private attributes: each object's state has one owner (issue 49)."""

from __future__ import annotations

import ast
from pathlib import Path

import autoscale_data

PACKAGE = Path(autoscale_data.__file__).parent


def foreign_private_writes(source: str) -> list[str]:
    """``obj._name = ...`` (also augmented or annotated) and ``setattr(obj, "_name", ...)`` on anything but
    ``self`` / ``cls``, as ``"line: target"``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
            targets = [ast.Attribute(node.args[0], str(node.args[1].value))]
        for target in targets:
            for sub in ast.walk(target):
                if (isinstance(sub, ast.Attribute) and sub.attr.startswith("_") and not sub.attr.startswith("__")
                        and not (isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"))):
                    found.append(f"{node.lineno}: {ast.unparse(sub)}")
    return found


def test_the_check_finds_foreign_writes() -> None:
    src = "def f(ds, x):\n    ds._stream = 1\n    x.a._b += 2\n    setattr(ds, '_c', 3)\n    self._ok = 4\n"
    assert foreign_private_writes(src) == ["2: ds._stream", "3: x.a._b", "4: ds._c"]


def test_no_module_sets_another_objects_private_attributes() -> None:
    found = [f"{p.relative_to(PACKAGE)}:{w}" for p in sorted(PACKAGE.rglob("*.py"))
             for w in foreign_private_writes(p.read_text())]
    assert found == []
