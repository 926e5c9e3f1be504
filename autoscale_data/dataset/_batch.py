"""Whole batches in one storage, and how they cross from a DataLoader worker to the main process.

A batch is ``input_ids [rows, seq_len]`` (``labels`` is the same tensor), ``domain [rows]`` and
``seq_index [rows]``, all views of ONE :class:`torch.UntypedStorage`. How it travels:

- small batches (storage <= :data:`PIPE_MAX_BYTES`): the worker yields a :class:`WireBatch`, a
  ``dict`` that pickles as the storage's raw bytes and unpickles, in the main process, as a plain
  ``dict`` of tensors over one fresh storage. The bytes go through the DataLoader's pipe: for a batch
  of 8 x 2048 ``uint16`` tokens (32 KiB) that costs far less than a shared-memory segment per batch
  (create, map, send its fd, map again), which is the DataLoader's per-batch bottleneck;
- larger batches: the storage is allocated in shared memory in the worker (as the DataLoader's own
  collate does) and crosses as one segment, where the copy through a pipe would cost more.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["PIPE_MAX_BYTES", "WireBatch", "batch_tensors", "new_batch"]

#: Largest batch storage (bytes) sent through the worker's pipe; larger ones go through shared memory.
PIPE_MAX_BYTES = 1 << 20

_KEYS = ("input_ids", "labels", "domain", "seq_index")


def _layout(rows: int, seq_len: int, token_dtype: torch.dtype) -> tuple[int, int]:
    """(byte offset of the int64 vectors, total bytes): tokens first, then 8-byte aligned ``int64`` x 2."""
    tok_bytes = rows * seq_len * token_dtype.itemsize
    meta_at = -(-tok_bytes // 8) * 8
    return meta_at, meta_at + 2 * rows * 8


def _views(storage: torch.UntypedStorage, rows: int, seq_len: int,
           token_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    meta_at, _ = _layout(rows, seq_len, token_dtype)
    # set_(storage, offset, size, stride): offsets count elements of the new tensor's dtype
    ids = torch.empty(0, dtype=token_dtype).set_(storage, 0, (rows, seq_len), (seq_len, 1))
    domain = torch.empty(0, dtype=torch.int64).set_(storage, meta_at // 8, (rows,), (1,))
    seq_index = torch.empty(0, dtype=torch.int64).set_(storage, meta_at // 8 + rows, (rows,), (1,))
    return ids, domain, seq_index


def batch_tensors(rows: int, seq_len: int, token_dtype: torch.dtype, *,
                  shared: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Uninitialized ``input_ids [rows, seq_len]``, ``domain [rows]``, ``seq_index [rows]`` in ONE storage.

    ``input_ids`` (``token_dtype``) starts at byte 0; the two ``int64`` vectors follow (8-byte
    aligned). With ``shared=True`` the storage is allocated in shared memory, so torch's
    multiprocessing pickler sends it as one segment without a further copy.
    """
    _, nbytes = _layout(rows, seq_len, token_dtype)
    storage = torch.UntypedStorage._new_shared(nbytes) if shared else torch.UntypedStorage(nbytes)
    return _views(storage, rows, seq_len, token_dtype)


def _rebuild(payload: bytes, rows: int, seq_len: int, token_dtype: torch.dtype,
             extra: dict[str, Any]) -> dict[str, Any]:
    """Unpickling side of :class:`WireBatch`: a plain dict of tensors over one writable storage."""
    storage = torch.frombuffer(bytearray(payload), dtype=torch.uint8).untyped_storage()
    ids, domain, seq_index = _views(storage, rows, seq_len, token_dtype)
    out: dict[str, Any] = {"input_ids": ids, "labels": ids, "domain": domain, "seq_index": seq_index}
    out.update(extra)
    return out


class WireBatch(dict):  # type: ignore[type-arg]
    """A batch dict that a DataLoader worker sends as raw bytes (see the module docstring).

    It is an ordinary ``dict`` in the worker (transforms may read, add or replace entries). If the
    four standard entries still hold the original tensors, pickling sends the one storage's bytes
    plus any added entries; otherwise it pickles as a plain ``dict``. Copies (``copy.copy``, as
    the DataLoader's ``default_convert`` makes) stay ``WireBatch``.
    """

    __slots__ = ("_tensors",)

    def __init__(self, ids: torch.Tensor, domain: torch.Tensor, seq_index: torch.Tensor) -> None:
        super().__init__(input_ids=ids, labels=ids, domain=domain, seq_index=seq_index)
        self._tensors = (ids, domain, seq_index)

    def __copy__(self) -> WireBatch:
        out = WireBatch(*self._tensors)
        dict.update(out, self)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        ids, domain, seq_index = self._tensors
        if any(self.get(k) is not t for k, t in zip(_KEYS, (ids, ids, domain, seq_index), strict=True)):
            return dict, (dict(self),)
        raw = torch.empty(0, dtype=torch.uint8).set_(ids.untyped_storage())
        extra = {k: v for k, v in self.items() if k not in _KEYS}
        return _rebuild, (raw.numpy().tobytes(), ids.shape[0], ids.shape[1], ids.dtype, extra)


def new_batch(rows: int, seq_len: int, token_dtype: torch.dtype, *,
              in_worker: bool) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch dict to fill, and its ``input_ids``, ``domain`` and ``seq_index`` tensors.

    ``in_worker``: the batch will be sent to another process (a DataLoader worker): small batches
    become a :class:`WireBatch`, larger ones get a shared-memory storage.
    """
    _, nbytes = _layout(rows, seq_len, token_dtype)
    wire = in_worker and nbytes <= PIPE_MAX_BYTES
    ids, domain, seq_index = batch_tensors(rows, seq_len, token_dtype, shared=in_worker and not wire)
    if wire:
        return WireBatch(ids, domain, seq_index), ids, domain, seq_index
    return {"input_ids": ids, "labels": ids, "domain": domain, "seq_index": seq_index}, ids, domain, seq_index
