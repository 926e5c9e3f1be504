"""The house metrics of a package: lines over 110 characters, functions with >= 8 parameters, functions over 50 lines,
string-key reads around the decision.

``python scripts/house_metrics.py [PACKAGE] [--list]`` prints the four counts (``--list``: each offender too). A
function's parameters are all of them (``self``, ``*args``, ``**kwargs`` included); its length runs from its
``def`` (decorators left out) to its last line. A string-key read is a subscript by a string constant that reads
(``x["key"]``) or a ``.get("key")`` call, in the modules between the solver's candidates and what the report and the
CLI print (:data:`DECISION`).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

LINE, PARAMS, BODY = 110, 8, 50
DECISION = ("solver/select.py", "solver/projections.py", "solver/backtest.py", "runner/reporting/report.py",
            "runner/reporting/wording.py", "commands/project.py", "commands/report.py")


def metrics(package: Path) -> dict[str, list[str]]:
    """Per metric, the offenders in ``package``'s ``.py`` files (``path:line``, with the measure)."""
    found: dict[str, list[str]] = {f"lines over {LINE} characters": [], f"functions with >= {PARAMS} parameters": [],
                                   f"functions over {BODY} lines": [], "string-key reads around the decision": []}
    long_lines, many_params, long_functions, key_reads = found.values()
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        long_lines += [f"{path}:{i} ({len(line)})" for i, line in enumerate(text.splitlines(), 1) if len(line) > LINE]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                count = len(a.posonlyargs + a.args + a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                where = f"{path}:{node.lineno} {node.name}"
                many_params += [f"{where} ({count})"] if count >= PARAMS else []
                long_functions += [f"{where} ({length})"] if length > BODY else []
            key = (node.slice if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) else
                   node.args[0] if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                   and node.func.attr == "get" and node.args else None)
            if path.relative_to(package).as_posix() in DECISION and isinstance(key, ast.Constant) \
                    and isinstance(key.value, str):
                key_reads.append(f"{path}:{node.lineno} {ast.unparse(node)}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="autoscale_data", type=Path)
    parser.add_argument("--list", action="store_true", help="print every offender")
    args = parser.parse_args()
    for name, offenders in metrics(args.package).items():
        print(f"{name}: {len(offenders)}")
        print("".join(f"  {o}\n" for o in offenders) if args.list else "", end="")


if __name__ == "__main__":
    main()
