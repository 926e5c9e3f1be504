"""The remote-store cache directory: size accounting, LRU eviction, a cross-process lock, and the
per-process registry of memory-mapped (pinned) shards. Policy is described in ``remote.py``."""

from __future__ import annotations

import contextlib
import os
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np

try:  # POSIX only; without it concurrent processes may evict each other's fresh downloads
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["CACHE_ENV", "cache_usage_bytes", "default_cache_dir", "evict_for", "locked", "pin"]

CACHE_ENV = "AUTOSCALE_DATA_CACHE"
_SHARD_SUFFIX = ".bin"
_PINNED: dict[str, int] = {}  # resolved shard path -> live memory maps of it in this process


def default_cache_dir() -> Path:
    """``$AUTOSCALE_DATA_CACHE``, else ``~/.cache/autoscale-data/stores``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "autoscale-data" / "stores"


def _unpin(key: str) -> None:
    left = _PINNED.get(key, 0) - 1
    if left > 0:
        _PINNED[key] = left
    else:
        _PINNED.pop(key, None)


def pin(path: Path, mm: np.ndarray) -> None:
    """Keep ``path`` from eviction while the memory map ``mm`` (or any view of it) is alive."""
    key = str(path.resolve())
    _PINNED[key] = _PINNED.get(key, 0) + 1
    weakref.finalize(mm, _unpin, key)


def _cached_shards(root: Path) -> Iterator[Path]:
    if root.is_dir():
        for sub in root.iterdir():
            if sub.is_dir():
                yield from (p for p in sub.iterdir() if p.name.endswith(_SHARD_SUFFIX) and p.is_file())


def cache_usage_bytes(cache_dir: str | os.PathLike[str] | None = None) -> int:
    """Total size of the shards cached under ``cache_dir`` (default :func:`default_cache_dir`)."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return sum(p.stat().st_size for p in _cached_shards(root))


@contextlib.contextmanager
def locked(path: Path, *, create: bool = False) -> Iterator[None]:
    """An exclusive lock on the file ``path`` across processes (``flock``; created first if ``create``)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    with open(path, "a+b" if create else "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def evict_for(root: Path, limit: int | None, incoming: int) -> None:
    """Delete least-recently-used unpinned shards until ``incoming`` more bytes fit under ``limit``.

    Call with the cache root's lock (``locked(root / ".lock", create=True)``) held. Warns
    (``ResourceWarning``) when pinned shards alone leave no room; the caller then proceeds anyway.
    """
    if limit is None:
        return
    files = [(p.stat(), p) for p in _cached_shards(root)]
    total = sum(st.st_size for st, _ in files)
    for st, path in sorted(files, key=lambda item: item[0].st_mtime_ns):
        if total + incoming <= limit:
            return
        if str(path.resolve()) in _PINNED:
            continue
        path.with_name(path.name + ".sha256").unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        total -= st.st_size
    if total + incoming > limit:
        warnings.warn(f"remote store cache {os.fspath(root)!r} holds {total} bytes of shards in use; "
                      f"adding {incoming} exceeds cache_limit_bytes={limit}", ResourceWarning, stacklevel=4)
