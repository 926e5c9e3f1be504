"""Writing a token store: shards are written under a temporary name, checksummed while written,
renamed into place when complete, and the manifest is written last. An interrupted writer leaves
no manifest, so the directory is never mistaken for a finished store."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .._checks import check_int
from .._io import fsync_dir
from .manifest import Manifest, ShardInfo, SplitInfo, TokenizerInfo, dtype_for_vocab, write_manifest

__all__ = ["DEFAULT_SHARD_TOKENS", "ShardFile", "StoreWriter"]

DEFAULT_SHARD_TOKENS = 1 << 27  # 128M tokens: 256 MB of uint16 per shard


class ShardFile:
    """One shard being written: into ``NAME.tmp``, hashed as written, renamed to ``path`` by :meth:`close`."""

    def __init__(self, path: Path) -> None:
        self.final = path
        self.tmp = path.with_name(path.name + ".tmp")
        self.fh: BinaryIO = open(self.tmp, "wb")
        self.digest = hashlib.sha256()
        self.num_tokens = 0
        self.num_documents = 0

    def write(self, data: bytes, num_tokens: int, num_documents: int) -> None:
        self.fh.write(data)
        self.digest.update(data)
        self.num_tokens += num_tokens
        self.num_documents += num_documents

    def close(self) -> ShardInfo:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        info = ShardInfo(self.final.name, self.num_tokens, self.num_documents, self.digest.hexdigest())
        self.check(info)
        os.replace(self.tmp, self.final)
        return info

    def check(self, info: ShardInfo) -> None:
        """Hook: raise to keep the written file from being renamed into place."""

    def abort(self) -> None:
        self.fh.close()
        self.tmp.unlink(missing_ok=True)


class StoreWriter:
    """Append documents' tokens to the splits of one domain store.

    Example:
        >>> with StoreWriter("store/web", "web", tokenizer_info) as w:   # doctest: +SKIP
        ...     w.add_document("train", ids)          # EOS must already be appended
        ...     w.add_document("val", held_out_ids)

    A shard rolls over at ``shard_tokens`` tokens (documents may span two shards). On a clean
    ``close()`` the manifest is written; on an exception inside ``with`` the partial shards are
    removed and no manifest is written.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        name: str,
        tokenizer: TokenizerInfo,
        *,
        shard_tokens: int = DEFAULT_SHARD_TOKENS,
        holdout: dict[str, Any] | None = None,
        source: dict[str, Any] | None = None,
    ) -> None:
        check_int("shard_tokens", shard_tokens)
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"invalid domain name {name!r}: expected a plain non-empty name")
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "manifest.json").unlink(missing_ok=True)  # not a store until the new manifest lands
        self.name = name
        self.tokenizer = tokenizer
        self.dtype = np.dtype(dtype_for_vocab(tokenizer.vocab_size)).newbyteorder("<")
        self.shard_tokens = shard_tokens
        self.holdout = dict(holdout or {})
        self.source = dict(source or {})
        self._open: dict[str, ShardFile] = {}
        self._done: dict[str, list[ShardInfo]] = {"train": [], "val": []}
        self._closed = False

    def _shard(self, split: str) -> ShardFile:
        shard = self._open.get(split)
        if shard is None:
            index = len(self._done.setdefault(split, []))
            shard = ShardFile(self.dir / f"{split}-{index:05d}.bin")
            self._open[split] = shard
        return shard

    def add_document(self, split: str, tokens: np.ndarray | list[int]) -> None:
        """Append one document (its tokens, EOS included) to ``split`` (``"train"`` or ``"val"``)."""
        self.add_tokens(split, tokens, num_documents=1)

    def add_tokens(
        self,
        split: str,
        tokens: np.ndarray | list[int],
        *,
        num_documents: int | None = None,
        document_lengths: np.ndarray | list[int] | None = None,
    ) -> None:
        """Append already-concatenated tokens holding whole documents.

        Give ``num_documents`` (all of them are counted in the shard where ``tokens`` end) or
        ``document_lengths`` (each document is counted in the shard that holds its last token).
        """
        if self._closed:
            raise ValueError("StoreWriter is closed")
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            raise ValueError(f"tokens must be one-dimensional, got shape {arr.shape}")
        ends = self._document_ends(arr.size, num_documents, document_lengths)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.tokenizer.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.tokenizer.vocab_size}), got range "
                             f"[{int(arr.min())}, {int(arr.max())}]")
        arr = arr.astype(self.dtype, copy=False)
        pos = 0
        while arr.size:
            shard = self._shard(split)
            room = self.shard_tokens - shard.num_tokens
            part, arr = arr[:room], arr[room:]
            stop = pos + part.size
            # documents whose last token lies in (pos, stop]; empty ones at the very start count here
            before = int(np.searchsorted(ends, pos, side="right")) if pos else 0
            docs = int(np.searchsorted(ends, stop, side="right")) - before
            shard.write(part.tobytes(), part.size, docs)
            pos = stop
            if shard.num_tokens >= self.shard_tokens:
                self._done[split].append(shard.close())
                del self._open[split]

    @staticmethod
    def _document_ends(size: int, num_documents: int | None,
                       document_lengths: np.ndarray | list[int] | None) -> np.ndarray:
        if document_lengths is None:
            if num_documents is None or num_documents < 0:
                raise ValueError(f"give num_documents >= 0 or document_lengths, got {num_documents!r}")
            return np.full(num_documents, size, dtype=np.int64)
        lengths = np.asarray(document_lengths, dtype=np.int64)
        if lengths.ndim != 1 or (lengths.size and int(lengths.min()) < 0) or int(lengths.sum()) != size:
            raise ValueError(f"document_lengths must be non-negative and sum to the {size} tokens given")
        if num_documents is not None and num_documents != lengths.size:
            raise ValueError(f"num_documents={num_documents} disagrees with {lengths.size} document_lengths")
        return np.cumsum(lengths)

    def close(self) -> Manifest:
        """Finish every shard and write the manifest; returns it."""
        if self._closed:
            raise ValueError("StoreWriter is already closed")
        for split, shard in list(self._open.items()):
            self._done[split].append(shard.close())
        self._open.clear()
        self._closed = True
        fsync_dir(self.dir)
        manifest = Manifest(
            name=self.name,
            dtype=self.dtype.name,
            tokenizer=self.tokenizer,
            splits={split: SplitInfo(tuple(shards)) for split, shards in self._done.items()},
            holdout=self.holdout,
            source=self.source,
        )
        write_manifest(self.dir, manifest)
        return manifest

    def abort(self) -> None:
        """Drop unfinished shards; no manifest is written."""
        for shard in self._open.values():
            shard.abort()
        self._open.clear()
        self._closed = True

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
