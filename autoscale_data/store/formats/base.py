"""What every in-place format yields: segments of whole documents in files, and the format's registry
entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["READABLE_DTYPES", "InPlaceFormat", "InPlaceSource", "Segment"]

#: Token dtypes a store reads in place.
READABLE_DTYPES = ("uint16", "uint32", "int32", "int64")


@dataclass(frozen=True)
class Segment:
    """Whole documents stored back to back in one file: ``doc_lengths`` tokens from byte ``offset``."""

    file: str
    offset: int
    doc_lengths: np.ndarray
    file_bytes: int

    @property
    def num_tokens(self) -> int:
        return int(self.doc_lengths.sum())


@dataclass(frozen=True)
class InPlaceSource:
    """Token data found in place: its dtype, its directory and its segments, in document order.

    ``inputs`` are the files whose sizes and modification times identify the data (the token
    files and their index or ``state.json``); ``description`` goes into the manifest's ``source``.
    """

    dtype: str
    directory: Path
    segments: tuple[Segment, ...]
    inputs: tuple[Path, ...]
    description: dict[str, Any] = field(default_factory=dict)

    @property
    def num_documents(self) -> int:
        return sum(int(s.doc_lengths.size) for s in self.segments)

    @property
    def num_tokens(self) -> int:
        return sum(s.num_tokens for s in self.segments)


@dataclass(frozen=True)
class InPlaceFormat:
    """One layout of tokenized data read in place, as the registry holds it.

    Args:
        name: the registry key (``format=`` of the registration functions).
        options: the format's options dataclass (every field has a default).
        open: ``(path, options) -> (train, val or None)``: the data at ``path`` and its separate
            validation data, if the format or its options give one.
        detect: whether ``path`` holds data of this format (for ``format=None``).
        expected: what a path of this format is, for messages (``"a Megatron prefix ..."``).
        argument: what the path is called in the CLI (``prepare --from-NAME DOMAIN=ARGUMENT``).
        flags: older CLI spellings of an option field's flag (``prepare --NAME-FIELD``), by field.

    The ``prepare`` CLI derives its options from here: ``--from-NAME DOMAIN=ARGUMENT`` for each format, and
    ``--NAME-FIELD [DOMAIN=]VALUE`` for each field of its options (help: the field's ``Attributes:`` entry).
    """

    name: str
    options: type
    open: Callable[[Path, Any], tuple[InPlaceSource, InPlaceSource | None]]
    detect: Callable[[Path], bool]
    expected: str
    argument: str = "PATH"
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
