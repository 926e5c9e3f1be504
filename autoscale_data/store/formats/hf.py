"""Hugging Face ``datasets`` directories (``save_to_disk``) read in place.

A saved ``Dataset``: the Arrow stream files listed in its ``state.json``, column ``input_ids`` (a
list of ``int32``, ``int64``, ``uint16`` or ``uint32``, without nulls; the files must not be
compressed). Each record batch's token values are one contiguous byte range of its file; one row is
one document. A ``DatasetDict`` directory gives its ``train`` split and, if it has one, its
``validation`` split as the separate validation data.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .base import READABLE_DTYPES, InPlaceFormat, InPlaceSource, Segment

__all__ = ["FORMAT", "HFOptions", "hf_source"]


@dataclass(frozen=True)
class HFOptions:
    """Options of the ``datasets`` format.

    Attributes:
        column: the token-id column (a list of integers per row).
    """

    column: str = "input_ids"

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ValueError(f"column must be a non-empty column name, got {self.column!r}")


def _split_dirs(path: Path) -> tuple[Path, Path | None]:
    """(train dir, validation dir or None) of a saved ``Dataset`` or ``DatasetDict``."""
    if (path / "state.json").is_file():
        return path, None
    dict_file = path / "dataset_dict.json"
    if not dict_file.is_file():
        raise FileNotFoundError(f"{os.fspath(path)!r} is not a dataset saved with save_to_disk "
                                "(no state.json or dataset_dict.json)")
    splits = json.loads(dict_file.read_text("utf-8")).get("splits", [])
    if "train" not in splits:
        raise ValueError(f"the DatasetDict at {os.fspath(path)!r} has no 'train' split (splits: {splits})")
    val = next((s for s in ("validation", "valid", "val") if s in splits), None)
    return path / "train", (path / val if val else None)


def _data_files(directory: Path) -> tuple[Path, list[Path]]:
    """A saved ``Dataset``'s ``state.json`` and the Arrow files it lists (without an indices mapping)."""
    state_path = directory / "state.json"
    if not state_path.is_file():
        raise FileNotFoundError(f"{os.fspath(directory)!r} is not a Dataset saved with save_to_disk (no "
                                "state.json)")
    state = json.loads(state_path.read_text("utf-8"))
    if any("indices" in key and state[key] for key in state):
        raise ValueError(f"{os.fspath(directory)!r} has an indices mapping (a select/shuffle that was not "
                         "flattened): call dataset.flatten_indices() before save_to_disk")
    files = [directory / entry["filename"] for entry in state.get("_data_files", [])]
    if not files:
        raise ValueError(f"{os.fspath(state_path)!r} lists no data files")
    return state_path, files


def _segment(col: Any, file: Path, base: int, file_bytes: int) -> Segment:
    """A record batch's rows as a segment: where its ids lie in the memory-mapped ``file`` (at ``base``)."""
    values = col.values
    offsets = col.offsets.to_numpy().astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    itemsize = np.dtype(str(values.type)).itemsize
    buf = values.buffers()[1]
    start = (buf.address - base) if buf is not None else 0
    start += (values.offset + first) * itemsize
    if last > first and (buf is None or not 0 <= start <= file_bytes - (last - first) * itemsize):
        raise ValueError(f"the token ids of {os.fspath(file)!r} are not stored in the file as is "
                         "(a compressed Arrow file?); save it uncompressed to read it in place")
    return Segment(file.name, start, np.diff(offsets), file_bytes)


def hf_source(path: str | os.PathLike[str], column: str = "input_ids") -> InPlaceSource:
    """A saved ``Dataset`` directory's token column as segments (one per Arrow record batch).

    Raises:
        FileNotFoundError: no ``state.json`` or a missing data file.
        ImportError: pyarrow is not installed.
        ValueError: a missing or unsupported column, nulls, compressed buffers, or an indices mapping.
    """
    try:
        import pyarrow as pa
    except ImportError as exc:  # pragma: no cover - pyarrow comes with the formats extra
        raise ImportError("reading a datasets directory needs pyarrow: pip install "
                          "'autoscale-data[formats]'") from exc
    directory = Path(path)
    state_path, files = _data_files(directory)
    segments: list[Segment] = []
    dtype: str | None = None
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"data file {os.fspath(file)!r} listed in {os.fspath(state_path)!r} is "
                                    "missing")
        file_bytes = file.stat().st_size
        with pa.memory_map(os.fspath(file)) as mm:
            base = mm.read_buffer(1).address if file_bytes else 0
            mm.seek(0)
            reader = pa.ipc.open_stream(mm)
            if column not in reader.schema.names:
                raise ValueError(f"{os.fspath(file)!r} has no column {column!r} (columns: "
                                 f"{reader.schema.names})")
            for batch in reader:
                col = batch.column(column)
                if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
                    raise ValueError(f"column {column!r} of {os.fspath(file)!r} is {col.type}, expected a "
                                     "list of token ids")
                name = str(col.values.type)
                if name not in READABLE_DTYPES:
                    raise ValueError(f"column {column!r} of {os.fspath(file)!r} holds {name} ids; "
                                     f"expected one of {READABLE_DTYPES}")
                if dtype is not None and dtype != name:
                    raise ValueError(f"{os.fspath(directory)!r} mixes token dtypes {dtype} and {name}")
                dtype = name
                if col.null_count or col.values.null_count:
                    raise ValueError(f"column {column!r} of {os.fspath(file)!r} has null rows or ids")
                if batch.num_rows:
                    segments.append(_segment(col, file, base, file_bytes))
    return InPlaceSource(dtype or "int32", directory, tuple(segments), (state_path, *files),
                         {"format": FORMAT.name, "path": os.fspath(directory), "column": column})


def _open(path: Path, options: HFOptions) -> tuple[InPlaceSource, InPlaceSource | None]:
    train_dir, val_dir = _split_dirs(path)
    val = hf_source(val_dir, options.column) if val_dir is not None else None
    return hf_source(train_dir, options.column), val


def _detect(path: Path) -> bool:
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


FORMAT = InPlaceFormat("hf", HFOptions, _open, _detect,
                       "a datasets directory written by save_to_disk (a Dataset or a DatasetDict)", "DIR",
                       {"column": ("--column",)})
