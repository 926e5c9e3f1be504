"""webdataset interop: export a token store to ``.tar`` shards and import it back bit-exactly.

Layout written by :func:`export_webdataset` into ``OUT/``::

    train-000000.tar, train-000001.tar, …   the train split (tars roll over at ``tar_bytes``)
    val-000000.tar, …                       the held-out split
    wds-index.json                          the store's manifest (verbatim) and the list of tars

One webdataset *sample* is a chunk of up to ``sample_tokens`` consecutive tokens of one store shard
(chunks never cross a shard, so the last chunk of a shard may be shorter). Sample key
``<shard stem>_<chunk:06d>`` (e.g. ``train-00003_000012``) with two members:

* ``.npy`` — the tokens as a 1-D little-endian ``uint16``/``uint32`` array (``np.save`` format);
* ``.json`` — ``{"store", "split", "shard", "offset", "num_tokens", "dtype"}``: where the chunk
  came from (``offset`` counts tokens from the start of the shard).

With ``sample_tokens = seq_len`` and store shards whose size is a multiple of ``seq_len``, one
sample is one training sequence, which is what a plain ``webdataset.WebDataset(...).decode()``
pipeline expects. Tars are deterministic (members sorted as written, mtime 0, uid/gid 0), so
exporting the same store twice gives byte-identical tars. :func:`import_webdataset` rebuilds the
shards in order, checks that every chunk is where the index says, and verifies every shard's
SHA-256 against the manifest before renaming it into place; the manifest is written last and
verbatim, so the imported store is bit-identical to the exported one.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .._checks import check_int
from .._io import atomic_write_json, atomic_write_text, fsync_dir
from .manifest import MANIFEST_NAME, Manifest, ShardInfo
from .reader import TokenStore
from .writer import ShardFile

__all__ = ["WDS_FORMAT", "WDS_INDEX", "WdsExport", "export_webdataset", "import_webdataset",
           "iter_wds_samples"]

WDS_FORMAT = "autoscale-data-webdataset"
WDS_INDEX = "wds-index.json"
_VERSION = 1


@dataclass(frozen=True)
class WdsExport:
    """What :func:`export_webdataset` wrote: tar file names per split and the sample count."""

    out_dir: Path
    tars: dict[str, list[str]]
    num_samples: int

    def urls(self, split: str = "train") -> list[str]:
        """Absolute paths of ``split``'s tars, in order (give them to ``webdataset.WebDataset``)."""
        return [os.fspath(self.out_dir / name) for name in self.tars.get(split, [])]


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class _TarRoller:
    """Writes samples into ``{split}-{i:06d}.tar`` files, starting a new one past ``tar_bytes``."""

    def __init__(self, out_dir: Path, split: str, tar_bytes: int) -> None:
        self.out_dir, self.split, self.tar_bytes = out_dir, split, tar_bytes
        self.names: list[str] = []
        self._tar: tarfile.TarFile | None = None
        self._fh: BinaryIO | None = None
        self._tmp: Path | None = None
        self._size = 0

    def _open(self) -> None:
        name = f"{self.split}-{len(self.names):06d}.tar"
        self._tmp = self.out_dir / f".{name}.tmp"
        self._fh = open(self._tmp, "wb")
        self._tar = tarfile.open(fileobj=self._fh, mode="w", format=tarfile.USTAR_FORMAT)
        self.names.append(name)
        self._size = 0

    def add(self, key: str, members: dict[str, bytes]) -> None:
        if self._tar is None or self._size >= self.tar_bytes:
            self.close()
            self._open()
        assert self._tar is not None  # opened just above
        for ext, data in members.items():
            self._tar.addfile(_tarinfo(f"{key}.{ext}", len(data)), io.BytesIO(data))
            self._size += len(data) + 1024

    def close(self) -> None:
        if self._tar is None or self._fh is None or self._tmp is None:
            return
        self._tar.close()
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self._tmp, self.out_dir / self.names[-1])
        self._tar = self._fh = self._tmp = None


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def _export_split(ts: TokenStore, split: str, out: Path, sample_tokens: int,
                  tar_bytes: int) -> tuple[list[str], int]:
    """Write one split's samples into its tars: (their names, the number of samples)."""
    data = ts.train if split == "train" else ts.val
    roller = _TarRoller(out, split, tar_bytes)
    start = num_samples = 0
    try:
        for shard in ts.manifest.splits[split].shards:
            stem = shard.file.rsplit(".", 1)[0]
            for chunk, offset in enumerate(range(0, shard.num_tokens, sample_tokens)):
                n = min(sample_tokens, shard.num_tokens - offset)
                tokens = data.tokens(start + offset, start + offset + n)
                meta = {"store": ts.name, "split": split, "shard": shard.file, "offset": offset,
                        "num_tokens": n, "dtype": ts.manifest.dtype}
                roller.add(f"{stem}_{chunk:06d}", {"npy": _npy_bytes(tokens),
                                                  "json": json.dumps(meta, sort_keys=True).encode()})
                num_samples += 1
            start += shard.num_tokens
    finally:
        roller.close()
    return roller.names, num_samples


def export_webdataset(
    store: str | os.PathLike[str] | TokenStore,
    out_dir: str | os.PathLike[str],
    *,
    sample_tokens: int = 1 << 20,
    tar_bytes: int = 1 << 30,
    splits: tuple[str, ...] = ("train", "val"),
) -> WdsExport:
    """Write ``store`` as webdataset tar shards (layout in the module docstring).

    Args:
        store: a store directory or an open :class:`TokenStore` (a remote one is fetched as read).
        out_dir: output directory (created; existing tars of the same names are replaced).
        sample_tokens: tokens per sample (chunks never cross a store shard).
        tar_bytes: a tar is closed once it holds about this many bytes.
        splits: which splits to export (missing ones are skipped).

    Returns:
        The tar names per split and the number of samples written.
    """
    check_int("sample_tokens", sample_tokens)
    check_int("tar_bytes", tar_bytes)
    ts = store if isinstance(store, TokenStore) else TokenStore(store)
    if ts.manifest.in_place:
        raise ValueError(f"store {os.fspath(ts.path)!r} reads Megatron / datasets files in place; its shards "
                         "are byte ranges of those files and cannot be exported as webdataset tars")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / WDS_INDEX).unlink(missing_ok=True)  # not a finished export until the index lands
    manifest_text = (ts.path / MANIFEST_NAME).read_text("utf-8")
    tars: dict[str, list[str]] = {}
    num_samples = 0
    for split in splits:
        if split in ts.manifest.splits:
            tars[split], written = _export_split(ts, split, out, sample_tokens, tar_bytes)
            num_samples += written
    index = {"format": WDS_FORMAT, "version": _VERSION, "sample_tokens": sample_tokens,
             "tars": tars, "manifest_json": manifest_text}
    fsync_dir(out)
    atomic_write_json(out / WDS_INDEX, index)
    return WdsExport(out, tars, num_samples)


def iter_wds_samples(tar_path: str | os.PathLike[str]) -> Iterator[tuple[str, dict[str, Any], np.ndarray]]:
    """``(key, metadata, tokens)`` for each sample of one exported tar, in order (stdlib tarfile)."""
    pending: dict[str, dict[str, bytes]] = {}
    with tarfile.open(tar_path, mode="r|") as tar:
        for member in tar:
            if not member.isfile():
                continue
            key, _, ext = member.name.partition(".")
            fh = tar.extractfile(member)
            if fh is None:  # pragma: no cover - isfile() members always have data
                continue
            parts = pending.setdefault(key, {})
            parts[ext] = fh.read()
            if "npy" in parts and "json" in parts:
                del pending[key]
                meta = json.loads(parts["json"])
                tokens = np.load(io.BytesIO(parts["npy"]), allow_pickle=False)
                yield key, meta, tokens
    if pending:
        raise ValueError(f"{os.fspath(tar_path)!r}: samples {sorted(pending)[:5]} lack their .npy or .json "
                         "member")


class _ShardBuilder(ShardFile):
    """A shard rebuilt from tars: renamed into place only when its SHA-256 is the manifest's (``info``)."""

    def __init__(self, path: Path, info: ShardInfo) -> None:
        super().__init__(path)
        self.info = info

    def check(self, info: ShardInfo) -> None:
        if info.sha256 != self.info.sha256:
            self.tmp.unlink(missing_ok=True)
            raise ValueError(f"imported shard {self.info.file!r} has sha256 {info.sha256}, the manifest says "
                             f"{self.info.sha256}: the tars do not hold this store's data")


def _next_builder(out: Path, shards: list[ShardInfo], k: int) -> tuple[int, _ShardBuilder | None]:
    """Create the empty shards from ``k`` on, then open the next shard that expects tokens."""
    while k < len(shards) and shards[k].num_tokens == 0:
        _ShardBuilder(out / shards[k].file, shards[k]).close()
        k += 1
    return k, (_ShardBuilder(out / shards[k].file, shards[k]) if k < len(shards) else None)


def _import_split(src: Path, out: Path, tar_names: list[str], split: str, shards: list[ShardInfo],
                  dtype: np.dtype) -> None:
    """Rebuild one split's ``shards`` in ``out`` from its tars, each checked against the manifest."""
    k, builder = _next_builder(out, shards, 0)
    try:
        for tar_name in tar_names:
            tar_path = src / tar_name
            if not tar_path.is_file():
                raise FileNotFoundError(f"tar {os.fspath(tar_path)!r} listed in {WDS_INDEX} is missing")
            for key, meta, tokens in iter_wds_samples(tar_path):
                where = f"sample {key!r} of {os.fspath(tar_path)!r}"
                if builder is None:
                    raise ValueError(f"{where} is beyond the last shard of split {split!r}")
                expected = (builder.info.file, builder.num_tokens)
                if (meta.get("shard"), meta.get("offset")) != expected or tokens.dtype != dtype:
                    raise ValueError(f"{where} holds shard {meta.get('shard')!r} offset {meta.get('offset')} "
                                     f"dtype {tokens.dtype}, expected {expected[0]!r} offset {expected[1]} "
                                     f"dtype {dtype}")
                builder.write(tokens.tobytes(), tokens.size, 0)
                if builder.num_tokens > builder.info.num_tokens:
                    raise ValueError(f"{where} overruns shard {builder.info.file!r} "
                                     f"({builder.info.num_tokens} tokens)")
                if builder.num_tokens == builder.info.num_tokens:
                    builder.close()
                    k, builder = _next_builder(out, shards, k + 1)
        if builder is not None:
            raise ValueError(f"the tars of split {split!r} end inside shard {builder.info.file!r} "
                             f"({builder.num_tokens} of {builder.info.num_tokens} tokens)")
    except BaseException:
        if builder is not None:
            builder.abort()
        raise


def import_webdataset(src_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> TokenStore:
    """Rebuild a token store from an :func:`export_webdataset` directory; returns the opened store.

    Raises:
        FileNotFoundError: ``src_dir`` has no ``wds-index.json`` or a listed tar is missing.
        ValueError: a sample is out of place, or a rebuilt shard's SHA-256 differs from the manifest.
    """
    src, out = Path(src_dir), Path(out_dir)
    index_path = src / WDS_INDEX
    if not index_path.is_file():
        raise FileNotFoundError(f"{os.fspath(index_path)!r} is missing: {os.fspath(src)!r} is not a finished "
                                "webdataset export of a token store")
    index = json.loads(index_path.read_text("utf-8"))
    if index.get("format") != WDS_FORMAT or index.get("version") != _VERSION:
        raise ValueError(f"{os.fspath(index_path)!r} has format {index.get('format')!r} version "
                         f"{index.get('version')!r}, expected {WDS_FORMAT!r} version {_VERSION}")
    manifest_text: str = index["manifest_json"]
    manifest = Manifest.from_json(json.loads(manifest_text))
    dtype = np.dtype(manifest.dtype).newbyteorder("<")
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    for split, info in manifest.splits.items():
        _import_split(src, out, index["tars"].get(split, []), split, list(info.shards), dtype)
    fsync_dir(out)
    atomic_write_text(out / MANIFEST_NAME, manifest_text)
    return TokenStore(out)
