"""Document readers for ``prepare``: every input kind becomes a stream of document texts.

Supported inputs (the order documents come out in is fixed, so the held-out split is too):

- ``.jsonl``: one JSON object per line, the text in field ``text`` (``text_field=``); blank lines
  are skipped; invalid JSON or a missing / non-string field is an error naming ``file:line``.
- ``.txt``: the whole file is one document.
- ``.parquet``: the ``text_field`` column, row by row (needs ``pyarrow``).
- ``.tar`` / ``.tar.gz`` / ``.tgz``: webdataset shards; members are grouped into samples by their
  key (path up to the first dot of the file name); a sample's ``.txt`` member, else its ``.text``
  member, else the ``text_field`` of its ``.json`` member is one document; samples with none of
  these are skipped.
- a directory saved by ``datasets.Dataset.save_to_disk`` (or a ``DatasetDict``: its splits in the
  saved order), recognised by ``dataset_info.json`` + ``state.json`` (or ``dataset_dict.json``);
  the ``text_field`` column (needs ``datasets``).
- any other directory: every supported file and dataset directory under it, recursively, in sorted
  path order (hidden entries are ignored).
- files with an extension named in ``text_ext`` (e.g. ``(".py", ".md")``, ``prepare --text-ext``):
  read like ``.txt``, one document per file (source code, docs, logs ...).
- any of these text files compressed with gzip, bzip2 or xz (``.gz``, ``.bz2``, ``.xz``: ``a.jsonl.gz``,
  ``a.txt.xz``, ``ls.1.gz`` with ``text_ext`` ``.1`` or ``.gz``; ``.tar.bz2`` too): read decompressed, so they
  give the same documents as the plain files.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import lzma
import os
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["SUPPORTED_SUFFIXES", "input_files", "iter_documents", "list_sources", "text_extensions"]

SUPPORTED_SUFFIXES = (".jsonl", ".txt", ".parquet", ".tar", ".tar.gz", ".tgz")
_FORMATS_HINT = "pip install 'autoscale-data[formats]'"


def text_extensions(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """Normalise extra plain-text extensions: ``".py,md"`` or ``[".py", "md"]`` -> ``(".md", ".py")``.

    Raises:
        ValueError: an empty or path-like extension, or one of the structured formats (``.jsonl`` ...).
    """
    if spec is None:
        return ()
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = set()
    for item in items:
        ext = str(item).strip().lower()
        ext = ext if ext.startswith(".") else "." + ext
        if ext == "." or "/" in ext or os.sep in ext or any(c.isspace() for c in ext):
            raise ValueError(f"text extension {item!r} is invalid: expected a file extension such as '.py'")
        if ext in SUPPORTED_SUFFIXES and ext != ".txt":
            raise ValueError(f"text extension {item!r} names a structured format read on its own; "
                             f"expected a plain-text extension such as '.py'")
        out.add(ext)
    return tuple(sorted(out))


#: Compression suffix -> its name and the stdlib's opener: ``a.txt.gz`` reads as ``a.txt`` decompressed.
_COMPRESSED: dict[str, tuple[str, Callable[..., IO[bytes]]]] = {
    ".gz": ("gzip", gzip.open), ".bz2": ("bzip2", bz2.open), ".xz": ("xz", lzma.open)}
#: The formats read as one stream of bytes, so also when compressed.
_STREAMED = (".jsonl", ".txt", ".tar")


def _suffix(path: Path, text_ext: tuple[str, ...] = ()) -> str | None:
    name = path.name.lower()
    for suffix in sorted(SUPPORTED_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return suffix
    compression = Path(name).suffix
    plain = name.removesuffix(compression) if compression in _COMPRESSED else name
    if plain != name:
        for suffix in _STREAMED:
            if plain.endswith(suffix):
                return suffix
    return ".txt" if any(n.endswith(e) for e in text_ext for n in (name, plain)) else None


def _is_hf_dataset(path: Path) -> bool:
    return path.is_dir() and (
        ((path / "dataset_info.json").is_file() and (path / "state.json").is_file())
        or (path / "dataset_dict.json").is_file())


def list_sources(path: str | os.PathLike[str], text_ext: Iterable[str] | str | None = None) -> list[Path]:
    """The readable sources under ``path``: files and dataset directories, in reading order.

    ``text_ext``: extra extensions read as plain text, one document per file (:func:`text_extensions`).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: an unsupported file, or a directory holding no supported input.
    """
    root = Path(path)
    ext = text_extensions(text_ext)
    if not root.exists():
        raise FileNotFoundError(f"input path {os.fspath(root)!r} does not exist")
    if root.is_file():
        if _suffix(root, ext) is None:
            raise ValueError(f"input file {os.fspath(root)!r} has an unsupported type: expected one of "
                             f"{', '.join(SUPPORTED_SUFFIXES)}, a dataset saved with save_to_disk, or a "
                             "directory of these; to read it as plain text, one document per file, name its "
                             f"extension with --text-ext {root.suffix or '.EXT'} (text_ext=)")
        return [root]
    if _is_hf_dataset(root):
        return [root]
    if not root.is_dir():
        raise ValueError(f"input path {os.fspath(root)!r} is neither a regular file nor a directory")
    found = _walk(root, ext)
    if not found:
        seen = sorted({p.suffix.lower() for p in root.rglob("*") if p.is_file() and p.suffix})[:8]
        hint = (f"; it has {', '.join(seen)} files: read them as plain text, one document per file, with "
                f"--text-ext {','.join(seen)} (text_ext=)" if seen else "")
        raise ValueError(f"input directory {os.fspath(root)!r} holds no supported input "
                         f"({', '.join(SUPPORTED_SUFFIXES)} files or save_to_disk datasets){hint}")
    return found


def _walk(directory: Path, ext: tuple[str, ...]) -> list[Path]:
    try:
        entries = sorted(directory.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise ValueError(f"cannot list input directory {os.fspath(directory)!r}: {exc.strerror}") from exc
    found: list[Path] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            found.extend([entry] if _is_hf_dataset(entry) else _walk(entry, ext))
        elif entry.is_file() and _suffix(entry, ext) is not None:
            found.append(entry)
    return found


def input_files(path: str | os.PathLike[str], text_ext: Iterable[str] | str | None = None) -> list[Path]:
    """Every file whose content determines the documents of ``path`` (for change detection)."""
    files: list[Path] = []
    for source in list_sources(path, text_ext):
        if source.is_dir():
            files.extend(sorted((p for p in source.rglob("*") if p.is_file()), key=lambda p: p.as_posix()))
        else:
            files.append(source)
    return files


def _open_error(path: Path, exc: OSError) -> ValueError:
    return ValueError(f"cannot read input file {os.fspath(path)!r}: {exc.strerror or exc}")


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[IO[bytes]]:
    """``path`` open for reading bytes, decompressed when its name ends in a compression suffix (``.gz``,
    ``.bz2``, ``.xz``); a file that does not decompress is a ``ValueError`` naming it."""
    kind, opener = _COMPRESSED.get(Path(path.name.lower()).suffix, ("", open))
    try:
        fh = opener(path, "rb")
    except OSError as exc:
        raise _open_error(path, exc) from exc
    with fh:
        try:
            yield fh
        except (OSError, EOFError, lzma.LZMAError) as exc:
            if not kind:
                raise
            raise ValueError(f"cannot read input file {os.fspath(path)!r}: not a valid {kind} file, or a "
                             f"truncated one ({exc})") from exc


def _iter_jsonl(path: Path, field: str) -> Iterator[str]:
    with _opened(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ValueError(f"{os.fspath(path)}:{lineno}: invalid JSON ({exc})") from exc
            yield _field(obj, field, f"{os.fspath(path)}:{lineno}")


def _field(obj: Any, field: str, where: str) -> str:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if field not in obj:
        raise ValueError(f"{where}: field {field!r} is missing (fields: {sorted(obj)[:10]}); "
                         "choose the text field with --text-field")
    text = obj[field]
    if not isinstance(text, str):
        raise ValueError(f"{where}: field {field!r} is not a string (got {type(text).__name__})")
    return text


def _iter_txt(path: Path) -> Iterator[str]:
    try:
        with _opened(path) as fh:
            data = fh.read()
    except OSError as exc:
        raise _open_error(path, exc) from exc
    try:
        yield data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{os.fspath(path)}: not valid UTF-8 text ({exc})") from exc


def _check_column(names: list[str], field: str, where: str) -> None:
    if field not in names:
        raise ValueError(f"{where}: has no column {field!r} (columns: {names}); choose it with --text-field")


def _strings(texts: Iterable[object], where: str, field: str) -> Iterator[str]:
    """``texts``, each checked to be a string (the message names its row)."""
    for row, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{where}: row {row}: column {field!r} is not a string (got "
                             f"{type(text).__name__})")
        yield text


def _iter_parquet(path: Path, field: str) -> Iterator[str]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ValueError(f"reading {os.fspath(path)!r} needs pyarrow: {_FORMATS_HINT}") from exc
    try:
        pfile = pq.ParquetFile(path)
    except OSError as exc:
        raise ValueError(f"cannot read parquet file {os.fspath(path)!r}: {exc}") from exc
    _check_column(pfile.schema_arrow.names, field, os.fspath(path))
    batches = pfile.iter_batches(columns=[field], batch_size=1024)
    yield from _strings((text for b in batches for text in b.column(0).to_pylist()), os.fspath(path), field)


def _iter_hf(path: Path, field: str) -> Iterator[str]:
    try:
        import datasets
    except ImportError as exc:
        raise ValueError(f"reading the dataset directory {os.fspath(path)!r} needs `datasets`: "
                         f"{_FORMATS_HINT}") from exc
    loaded = datasets.load_from_disk(os.fspath(path))
    parts = list(loaded.items()) if isinstance(loaded, datasets.DatasetDict) else [("", loaded)]
    for split, ds in parts:
        where = f"{os.fspath(path)}" + (f" (split {split!r})" if split else "")
        _check_column(list(ds.column_names), field, where)
        batches = ds.select_columns([field]).iter(batch_size=1024)
        yield from _strings((text for b in batches for text in b[field]), where, field)


def _sample_text(path: Path, key: str, members: dict[str, bytes], field: str) -> str | None:
    where = f"{os.fspath(path)}:{key}"
    for ext in ("txt", "text"):
        if ext in members:
            try:
                return members[ext].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where}.{ext}: not valid UTF-8 text ({exc})") from exc
    if "json" in members:
        try:
            obj = json.loads(members["json"])
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{where}.json: invalid JSON ({exc})") from exc
        return _field(obj, field, f"{where}.json")
    return None


def _iter_tar(path: Path, field: str) -> Iterator[str]:
    key: str | None = None
    members: dict[str, bytes] = {}
    try:
        archive = tarfile.open(path, mode="r|*")
    except (OSError, tarfile.TarError) as exc:
        raise ValueError(f"cannot read tar file {os.fspath(path)!r}: {exc}") from exc
    try:
        with archive:
            for info in archive:
                if not info.isfile():
                    continue
                directory, _, base = info.name.rpartition("/")
                if base.startswith(".") or "." not in base:
                    continue
                stem, ext = base.split(".", 1)
                sample = f"{directory}/{stem}" if directory else stem
                if sample != key:
                    if key is not None and (text := _sample_text(path, key, members, field)) is not None:
                        yield text
                    key, members = sample, {}
                fh = archive.extractfile(info)
                members[ext.lower()] = fh.read() if fh is not None else b""
    except (tarfile.TarError, EOFError) as exc:
        raise ValueError(f"tar file {os.fspath(path)!r} is corrupt or truncated: {exc}") from exc
    if key is not None and (text := _sample_text(path, key, members, field)) is not None:
        yield text


def iter_documents(path: str | os.PathLike[str], text_field: str = "text",
                   text_ext: Iterable[str] | str | None = None) -> Iterator[str]:
    """Yield the text of every document under ``path``, in a fixed order (see the module docstring).

    ``text_ext``: extra extensions read as plain text, one document per file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: unsupported or unreadable input; malformed records (message names file and line).
    """
    ext = text_extensions(text_ext)
    readers = {".jsonl": _iter_jsonl, ".txt": lambda p, _: _iter_txt(p), ".parquet": _iter_parquet}
    for source in list_sources(path, ext):
        read = _iter_hf if source.is_dir() else readers.get(_suffix(source, ext), _iter_tar)  # the rest: tar
        yield from read(source, text_field)
