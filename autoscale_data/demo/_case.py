"""What the demo's cases share: writing a case's record and its Markdown table side by side."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._io import atomic_write_json, atomic_write_text
from .._records import Record

__all__ = ["write_case"]


def write_case(out: Path, stem: str, result: Record, text: str, log: Callable[[str], None]) -> None:
    """Write ``OUT/<stem>.json`` (the record) and ``OUT/<stem>.md`` (``text``), then log ``text``."""
    atomic_write_json(out / f"{stem}.json", result.to_json())
    atomic_write_text(out / f"{stem}.md", text + "\n")
    log(text)
