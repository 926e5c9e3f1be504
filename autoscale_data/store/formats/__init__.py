"""Layouts of tokenized data read in place, one module each, behind one registry.

Each format module defines its options dataclass, its reader (data -> :class:`InPlaceSource`: the
token dtype and the files' segments of whole documents) and its :class:`InPlaceFormat` entry;
:data:`FORMATS` maps each format's name to that entry. Registration
(:func:`autoscale_data.store.register_in_place`) looks a format up by name, or finds the one whose
``detect`` accepts the path. Version 1 manifests record the formats' former names (:data:`FORMER_NAMES`).

* ``megatron``: :mod:`.megatron`, a Megatron indexed dataset ``PREFIX.bin`` + ``PREFIX.idx``.
* ``hf``: :mod:`.hf`, a Hugging Face ``datasets`` directory written by ``save_to_disk``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from . import hf, megatron
from .base import READABLE_DTYPES, InPlaceFormat, InPlaceSource, Segment
from .hf import HFOptions, hf_source
from .megatron import MegatronIndex, MegatronOptions, megatron_hint, megatron_source, read_megatron_index

__all__ = [
    "FORMATS",
    "FORMER_NAMES",
    "HFOptions",
    "InPlaceFormat",
    "InPlaceSource",
    "MegatronIndex",
    "MegatronOptions",
    "READABLE_DTYPES",
    "Segment",
    "detect_format",
    "get_format",
    "hf_source",
    "megatron_hint",
    "megatron_source",
    "read_megatron_index",
]

#: Every in-place format, by name.
FORMATS: Mapping[str, InPlaceFormat] = MappingProxyType({f.name: f for f in (megatron.FORMAT, hf.FORMAT)})
#: A format's name by the name that version 1 manifests record in ``source["format"]`` (before 2026-11-28).
FORMER_NAMES: Mapping[str, str] = MappingProxyType({"megatron-indexed": megatron.FORMAT.name,
                                                      "hf-datasets": hf.FORMAT.name})


def get_format(name: str) -> InPlaceFormat:
    """The format called ``name``.

    Raises:
        ValueError: no format has that name (the message lists the names).
    """
    if name not in FORMATS:
        raise ValueError(f"unknown in-place format {name!r}; expected one of {sorted(FORMATS)}")
    return FORMATS[name]


def detect_format(path: str | os.PathLike[str]) -> InPlaceFormat:
    """The one format whose ``detect`` accepts ``path``.

    Raises:
        FileNotFoundError: no format accepts it (the message says what each format expects).
        ValueError: several do (give the format by name).
    """
    found = [f for f in FORMATS.values() if f.detect(Path(path))]
    if not found:
        expected = "; ".join(f"{f.name!r}: {f.expected}" for f in FORMATS.values())
        raise FileNotFoundError(f"no tokenized data of a known in-place format at {os.fspath(path)!r}; "
                                f"expected one of {expected}")
    if len(found) > 1:
        raise ValueError(f"{os.fspath(path)!r} could be read as any of the formats "
                         f"{[f.name for f in found]}: give format= one of them")
    return found[0]
