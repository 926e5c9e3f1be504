"""The config reference and the methods' table of ``docs/runner.md``, from docstrings and the registry.

Every field of a section is documented by the string literal right after it (as the records are);
:func:`config_table` renders those, with each field's type and default, for :class:`RunnerConfig`'s
sections and every registered method's; :func:`method_table` renders each method's
:class:`~autoscale_data.runner.registry.MethodDoc`. Regenerate both between their markers in
``docs/runner.md`` with ``python -m autoscale_data.runner.config.docs`` (a test fails until it is).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, get_args, get_type_hints

from .. import registry
from .runner_config import RunnerConfig
from .sections import CHOICES

__all__ = ["BEGIN", "END", "METHODS_BEGIN", "METHODS_END", "attribute_docs", "config_table", "main",
           "method_table", "with_config_table", "with_method_table"]

BEGIN = "<!-- config table: generated from runner/config/'s docstrings by python -m autoscale_data.runner.config.docs -->"
END = "<!-- end of the generated config table -->"
METHODS_BEGIN = ("<!-- methods table: generated from the method registry by python -m "
                 "autoscale_data.runner.config.docs -->")
METHODS_END = "<!-- end of the generated methods table -->"
_ROLE = re.compile(r":\w+:`~?([^`]+)`")


def attribute_docs(cls: type) -> dict[str, str]:
    """Each field of dataclass ``cls`` -> its attribute docstring, on one line (fields without one left
    out)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    return {node.target.id: " ".join(doc.value.value.split())
            for node, doc in zip(body, body[1:], strict=False)
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and isinstance(doc, ast.Expr)
            and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)}


def _markdown(text: str) -> str:
    return _ROLE.sub(r"``\1``", text).replace("``None``", "``null``").replace("``", "`").replace("|", "\\|")


def _shown(value: Any, inner: bool = False) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (tuple, list)):
        return f"[{', '.join(_shown(v, inner=True) for v in value)}]"
    if isinstance(value, float):
        return f"{value:g}"
    return f"`{value}`" if isinstance(value, (str, dict)) and not inner else str(value)


def _default(f: dataclasses.Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _section_class(hint: Any) -> type | None:
    """The dataclass of a field that is a section (``ModelConfig``, ``SwarmConfig | None``), else ``None``."""
    found = [t for t in (hint, *get_args(hint)) if isinstance(t, type) and dataclasses.is_dataclass(t)]
    return found[0] if found else None


def _row(key: str, default: str, kind: str, meaning: str) -> str:
    return f"| `{key}` | {default} | {kind} | {_markdown(meaning)} |"


def _section_doc(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split())


def _rows(cls: type, prefix: str = "") -> list[str]:
    hints, docs, rows = get_type_hints(cls), attribute_docs(cls), []
    for f in dataclasses.fields(cls):
        key, section = prefix + f.name, _section_class(hints[f.name])
        if cls is RunnerConfig and f.name == "sections":
            for name, path in registry.sections().items():
                readers = ", ".join(f"`{m.name}`" for m in registry.MIXING_METHODS.values()
                                    if m.section == name)
                section = registry.load(path)
                rows += [_row(name, _shown(None), "section", f"{_section_doc(section)} Read by {readers} "
                              "(unset: their defaults)."), *_rows(section, f"{name}.")]
        elif cls is RunnerConfig and f.name == "base_dir":
            continue  # set from the config file's location
        elif section is not None:
            rows += [_row(key, _shown(None) if f.default is None else "", "section",
                          docs.get(f.name) or _section_doc(section)), *_rows(section, f"{key}.")]
        elif f.name not in docs:
            raise ValueError(f"config field {key} of {cls.__name__} has no docstring (a string right after "
                             "it)")
        else:
            names = f" Each one of {', '.join(f'`{n}`' for n in f.metadata[CHOICES]())}." if CHOICES in f.metadata else ""
            rows.append(_row(key, _shown(_default(f)), f"`{str(f.type).replace(' | ', ' or ')}`",
                             docs[f.name] + names))
    return rows


def config_table() -> str:
    """The config reference as a markdown table: every key of a config file, its default, type and meaning."""
    return "\n".join(["| key | default | type | meaning |", "|---|---|---|---|", *_rows(RunnerConfig)])


def method_table() -> str:
    """The registered methods as a markdown table, one row per
    :class:`~autoscale_data.runner.registry.MethodDoc` (methods with equal docs share it)."""
    rows: dict[registry.MethodDoc, list[str]] = {}
    for m in registry.MIXING_METHODS.values():
        rows.setdefault(m.doc or registry.MethodDoc(m.source), []).append(f"`{m.name}`")
    head = ["| method | where its mix comes from | runs it needs (its cost) | source |", "|---|---|---|---|"]
    return "\n".join([*head, *(f"| {', '.join(names)} | {d.mix} | {d.cost} | {d.origin} |" for d, names in
                                rows.items())])


def _between(text: str, begin: str, end: str, table: str) -> str:
    if begin not in text or end not in text.split(begin, 1)[1]:
        raise ValueError(f"expected the markers {begin!r} and {end!r} around the table")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{table}\n{end}{rest.split(end, 1)[1]}"


def with_config_table(text: str) -> str:
    """``text`` (``docs/runner.md``) with :func:`config_table` between :data:`BEGIN` and :data:`END`.

    Raises:
        ValueError: ``text`` lacks the markers.
    """
    return _between(text, BEGIN, END, config_table())


def with_method_table(text: str) -> str:
    """``text`` (``docs/runner.md``) with :func:`method_table` between the methods' markers.

    Raises:
        ValueError: ``text`` lacks the markers.
    """
    return _between(text, METHODS_BEGIN, METHODS_END, method_table())


def main(path: str = "docs/runner.md") -> None:
    """Rewrite the config table and the methods' table of ``path`` (``python -m
    autoscale_data.runner.config.docs [PATH]``)."""
    doc = Path(path)
    doc.write_text(with_method_table(with_config_table(doc.read_text(encoding="utf-8"))), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:2])
