"""Stores behind a URL: shards fetched on first touch into a local, checksummed, size-bounded cache.

User guide (URLs, retries, the checks on a manifest from elsewhere, eviction and pinning): docs/ecosystem.md,
"Stores behind a URL". The cache, ``CACHE_DIR/<16 hex of sha256(url)>/``, holds each shard complete
(downloaded to a temporary file, checked, renamed) beside ``<file>.sha256``, the digest it was verified
against (a store rewritten upstream is downloaded again). Eviction is least-recently-used over all stores;
"used" is the file's mtime, set at download and (at most every ``_TOUCH_S``) when a process maps the shard.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import json
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_int, check_number
from .._io import atomic_write_bytes, atomic_write_text
from ._cache import CACHE_ENV, cache_usage_bytes, default_cache_dir, evict_for, locked, pin
from ._fetch import PERMANENT_ERRORS, is_remote_url, join_url, stream_to
from .manifest import MANIFEST_NAME, Manifest, ShardInfo
from .reader import ShardFiles, TokenStore, Verify

__all__ = [
    "CACHE_ENV",
    "CachedShards",
    "RemoteConfig",
    "RemoteStore",
    "RemoteTokenStore",
    "cache_usage_bytes",
    "default_cache_dir",
    "is_remote_url",
    "open_store",
]

_TOUCH_S = 60.0  # a shard's last-use time is refreshed at most this often


@dataclass(frozen=True)
class RemoteConfig:
    """Where and how remote shards are cached and fetched: :func:`open_store`'s settings of the same names."""

    cache_dir: str | None = None
    cache_limit_bytes: int | None = None
    retries: int = 3
    backoff_s: float = 0.5
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        check_int("cache_limit_bytes", self.cache_limit_bytes, allow_none=True)
        check_int("retries", self.retries, minimum=0)
        check_number("backoff_s", self.backoff_s, positive=False)
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0, got {self.backoff_s}")
        check_number("timeout_s", self.timeout_s)

    @property
    def root(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()


class RemoteStore:
    """One store behind a URL and its directory in the local cache.

    Args:
        url: the store's URL (the directory holding ``manifest.json``; the forms: :mod:`._fetch`).
        config: cache and retry settings.
    """

    def __init__(self, url: str, config: RemoteConfig | None = None) -> None:
        if not is_remote_url(url):
            raise ValueError(f"{url!r} is not a remote URL (expected http(s)://, pipe:…{{file}}…, or an "
                             "fsspec scheme such as s3://); open local stores with TokenStore")
        self.url = url
        self.config = config or RemoteConfig()
        self.root = self.config.root
        self.local_dir = self.root / hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
        self.local_dir.mkdir(parents=True, exist_ok=True)
        manifest_json = self._fetch_manifest()
        where = join_url(url, MANIFEST_NAME)
        try:
            self.manifest = Manifest.from_json(json.loads(manifest_json))
        except json.JSONDecodeError as exc:
            raise ValueError(f"manifest at {where} is not valid JSON: {exc}") from exc
        except ValueError as exc:  # a bad field, e.g. a shard name that is no plain file name
            raise ValueError(f"manifest at {where} is refused: {exc}") from exc
        if self.manifest.in_place:
            raise ValueError(f"manifest at {where} describes data read in place (a split data_dir or shard "
                             "byte ranges); only stores written by `autoscale-data prepare` can be remote")
        self.itemsize = np.dtype(self.manifest.dtype).itemsize

    # -- downloading ----------------------------------------------------------------------------
    def _fetch_manifest(self) -> bytes:
        url = join_url(self.url, MANIFEST_NAME)
        local = self.local_dir / MANIFEST_NAME
        try:
            data = self._download(url, None, None, into=None)
        except ConnectionError as exc:
            if not local.is_file():
                raise
            warnings.warn(f"{exc}; using the cached manifest {os.fspath(local)!r}", RuntimeWarning,
                          stacklevel=3)
            return local.read_bytes()
        atomic_write_bytes(local, data)
        return data

    def _download(self, url: str, sha256: str | None, size: int | None, *, into: Path | None) -> bytes:
        """Fetch ``url`` (retrying); into memory when ``into`` is None, else into that temp file."""
        cfg = self.config
        attempts = cfg.retries + 1
        failure, corrupted = "", False
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(cfg.backoff_s * 2 ** (attempt - 1), 30.0))
            digest = hashlib.sha256()
            try:
                with (open(into, "wb") if into is not None else io.BytesIO()) as out:
                    n = stream_to(url, out, timeout_s=cfg.timeout_s, on_chunk=digest.update)
                    data = out.getvalue() if isinstance(out, io.BytesIO) else b""
                    if into is not None:
                        out.flush()
                        os.fsync(out.fileno())
            except PERMANENT_ERRORS:
                raise
            except (OSError, http.client.HTTPException) as exc:  # network, timeout, failing pipe command
                failure, corrupted = f"{type(exc).__name__}: {exc}", False
                continue
            got = digest.hexdigest()
            if size is not None and n != size:
                failure, corrupted = f"got {n} bytes, expected {size} (sha256 {got}, expected {sha256})", True
                continue
            if sha256 is not None and got != sha256:
                failure, corrupted = f"sha256 {got} does not match the expected {sha256}", True
                continue
            return data
        if corrupted:
            raise ValueError(f"download of {url} is corrupted after {attempts} attempts: {failure}")
        raise ConnectionError(f"download of {url} failed after {attempts} attempts: {failure}")

    def is_cached(self, file: str, sha256: str) -> bool:
        """Whether ``file`` is in the cache, complete and verified against ``sha256``."""
        path = self.local_dir / file
        stamp = path.with_name(file + ".sha256")
        try:
            return path.is_file() and stamp.read_text("ascii").strip() == sha256
        except FileNotFoundError:
            return False

    def fetch(self, file: str, sha256: str, num_tokens: int) -> Path:
        """Make sure shard ``file`` is cached (downloading and verifying it if needed); its local path."""
        path = self.local_dir / file
        if self.is_cached(file, sha256):
            return path
        with locked(self.local_dir / f".{file}.lock", create=True):  # one process downloads, others wait
            if not self.is_cached(file, sha256):
                self._fetch_into(path, file, sha256, num_tokens)
        return path

    def _fetch_into(self, path: Path, file: str, sha256: str, num_tokens: int) -> None:
        size = num_tokens * self.itemsize
        url = join_url(self.url, file)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{file}.", suffix=".tmp", dir=self.local_dir)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            self._download(url, sha256, size, into=tmp)
            with locked(self.root / ".lock", create=True):  # the cache root's lock, across processes
                evict_for(self.root, self.config.cache_limit_bytes, size)
                stamp = path.with_name(file + ".sha256")
                stamp.unlink(missing_ok=True)  # a stale file is never "cached" under the new digest
                os.replace(tmp, path)
                atomic_write_text(stamp, sha256 + "\n")  # the stamp commits the download
        finally:
            tmp.unlink(missing_ok=True)


class CachedShards(ShardFiles):
    """A remote store's shard files: downloaded into the cache when first asked for, pinned while mapped."""

    refetches = True

    def __init__(self, remote: RemoteStore) -> None:
        super().__init__(remote.local_dir)
        self.remote = remote

    def check_on_open(self, shards: Any, itemsize: int, verify: Verify) -> None:
        """Nothing to check before a shard is touched (the cache may not hold it yet)."""

    def local_path(self, shard: ShardInfo) -> tuple[Path, bool]:
        was_cached = self.remote.is_cached(shard.file, shard.sha256)
        return self.remote.fetch(shard.file, shard.sha256, shard.num_tokens), not was_cached

    def opened(self, path: Path, mapping: np.ndarray) -> None:
        pin(path, mapping)
        with contextlib.suppress(OSError):  # mark as recently used (coarsely: keeps the checksum memo valid)
            if time.time() - path.stat().st_mtime > _TOUCH_S:
                os.utime(path)


class RemoteTokenStore(TokenStore):
    """A :class:`TokenStore` over a :class:`RemoteStore`'s cache; shards are fetched on first touch.

    ``path`` is the local cache directory (it holds the manifest; shards appear as they are read).
    Pickling it (e.g. into DataLoader workers) sends the URL, settings and manifest, not the data.
    """

    def __init__(self, remote: RemoteStore, *, verify: Verify = "checksum") -> None:
        self.remote = remote
        super().__init__(remote.local_dir, verify=verify)

    def _load_manifest(self) -> Manifest:
        return self.remote.manifest

    def _shard_files(self) -> ShardFiles:
        return CachedShards(self.remote)

    def prefetch(self, splits: tuple[str, ...] = ("train", "val")) -> RemoteTokenStore:
        """Download (if needed) and map every shard of ``splits`` now; returns ``self``.

        The shards stay pinned in the cache while this object lives.
        """
        for split in splits:
            data = self.train if split == "train" else self.val
            for k in range(data.num_shards):
                data.shard(k)
        return self

    def __repr__(self) -> str:
        return (f"RemoteTokenStore({self.remote.url!r}, name={self.name!r}, tokens={self.num_tokens}, "
                f"cache={os.fspath(self.path)!r})")


def open_store(
    path_or_url: str | os.PathLike[str] | TokenStore,
    *,
    verify: Verify = "checksum",
    cache_dir: str | os.PathLike[str] | None = None,
    cache_limit_bytes: int | None = None,
    prefetch: bool = False,
    retries: int = 3,
    backoff_s: float = 0.5,
    timeout_s: float = 60.0,
) -> TokenStore:
    """Open a store from a local path, a ``file://`` URL or a remote URL (docs/ecosystem.md).

    Args:
        path_or_url: the store directory or URL; a :class:`TokenStore` is returned as is.
        verify: shard verification (``"checksum"``, ``"size"``, ``"none"``), as for :class:`TokenStore`;
            downloads are always checked against the manifest's SHA-256.
        cache_dir: cache root for remote stores (default :func:`default_cache_dir`).
        cache_limit_bytes: bound on the cache's total shard bytes (LRU eviction), None for none.
        prefetch: download every shard now instead of on first touch.
        retries: extra attempts per download after a failure or checksum mismatch.
        backoff_s: the sleep before retry ``i`` is ``backoff_s * 2**i`` seconds (capped at 30 s).
        timeout_s: network / pipe inactivity timeout per attempt.

    Returns:
        A :class:`TokenStore` (a :class:`RemoteTokenStore` for remote URLs).
    """
    if isinstance(path_or_url, TokenStore):
        return path_or_url
    if isinstance(path_or_url, str) and is_remote_url(path_or_url):
        config = RemoteConfig(None if cache_dir is None else os.fspath(cache_dir), cache_limit_bytes,
                              retries, backoff_s, timeout_s)
        store = RemoteTokenStore(RemoteStore(path_or_url, config), verify=verify)
        return store.prefetch() if prefetch else store
    path = os.fspath(path_or_url)
    if path.startswith("file://"):
        path = path[len("file://"):]
    return TokenStore(path, verify=verify)
