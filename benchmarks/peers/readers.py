"""Every reader of the peer benchmark, built the way its documentation recommends for token data.

``build(impl, mode, cfg)`` returns an iterable: in ``"inproc"`` mode of int64 tensors ``[SEQ_LEN]``
(one sequence each), in ``"loader"`` mode of int64 tensors ``[8, SEQ_LEN]`` produced by two worker
processes (``DataLoader(num_workers=2, batch_size=8)`` or the library's own equivalent). Each
reader converts to int64 inside its pipeline (in the workers for ``loader``), so all do the same work.
Imports are local: each worker process imports only the library it measures.
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch
from synth import DOMAINS, SEQ_LEN

__all__ = ["IMPLS", "build"]

BATCH = 8
WORKERS = 2
IMPLS = ("raw", "ours", "torchdata", "litdata", "webdataset", "hf_datasets", "streaming")


def _store_file(root: str, domain: str) -> str:
    return os.path.join(root, "store", domain, "train-00000.bin")


_MAPS: dict[str, np.ndarray] = {}


def _seqs(path: str) -> np.ndarray:
    mm = _MAPS.get(path)
    if mm is None:
        mm = np.memmap(path, dtype=np.uint16, mode="r").reshape(-1, SEQ_LEN)
        _MAPS[path] = mm
    return mm


def _weights(cfg: dict[str, Any]) -> list[float]:
    return [cfg["weights"][d] for d in DOMAINS]


# ---------------------------------------------------------------- raw numpy memmap baseline
class RawMixture(torch.utils.data.IterableDataset):
    """i.i.d. weighted domain pick + uniform random sequence, sliced from a memmap (with replacement)."""

    def __init__(self, paths: list[str], weights: list[float], seed: int, n: int) -> None:
        self.paths, self.weights, self.seed, self.n = paths, np.asarray(weights) / sum(weights), seed, n

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = torch.utils.data.get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        rng = np.random.default_rng([self.seed, wid])
        maps = [_seqs(p) for p in self.paths]
        n_local = self.n // nw + (wid < self.n % nw)
        domains = rng.choice(len(maps), size=n_local, p=self.weights)
        for d in domains.tolist():
            seqs = maps[d]
            yield torch.from_numpy(seqs[int(rng.integers(seqs.shape[0]))].astype(np.int64))


def _raw(mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    ds = RawMixture([_store_file(cfg["root"], d) for d in DOMAINS], _weights(cfg), cfg["seed"], cfg["budget_seqs"])
    if mode == "inproc":
        return ds
    return torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=WORKERS)


# ---------------------------------------------------------------- ours
def _ours(mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    from autoscale_data.dataset import ScaleAwareMixtureDataset

    kwargs = dict(domains={d: os.path.join(cfg["root"], "store", d) for d in DOMAINS}, weights=cfg["weights"],
                  budget_tokens=cfg["budget_seqs"] * SEQ_LEN, seq_len=SEQ_LEN, seed=cfg["seed"])
    if mode == "inproc":
        return (s["input_ids"] for s in ScaleAwareMixtureDataset(**kwargs))
    ds = ScaleAwareMixtureDataset(**kwargs, batch_size=BATCH)  # its documented DataLoader usage
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=WORKERS)
    return (b["input_ids"] for b in loader)


# ---------------------------------------------------------------- torchdata.nodes
class _Indices:
    """A domain's sequence indices in a seeded permutation, as ``(domain, index)`` pairs (re-iterable)."""

    def __init__(self, d: int, n: int, seed: int) -> None:
        self.d, self.n, self.seed = d, n, seed

    def __iter__(self) -> Iterator[tuple[int, int]]:
        perm = np.random.default_rng([self.seed, self.d]).permutation(self.n)
        return ((self.d, int(k)) for k in perm)


def _read_seq(paths: list[str], item: tuple[int, int]) -> torch.Tensor:
    d, k = item
    return torch.from_numpy(_seqs(paths[d])[k].astype(np.int64))


def _torchdata(mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    from torchdata.nodes import (
        Batcher,
        IterableWrapper,
        Loader,
        Mapper,
        MultiNodeWeightedSampler,
        ParallelMapper,
    )

    paths = [_store_file(cfg["root"], d) for d in DOMAINS]
    sources = {name: IterableWrapper(_Indices(i, _seqs(paths[i]).shape[0], cfg["seed"]))
               for i, name in enumerate(DOMAINS)}
    mix = MultiNodeWeightedSampler(sources, cfg["weights"], seed=cfg["seed"])
    read = functools.partial(_read_seq, paths)
    if mode == "inproc":
        return Loader(Mapper(mix, read))
    node = ParallelMapper(mix, read, num_workers=WORKERS, method="process", in_order=True)
    node = Mapper(Batcher(node, batch_size=BATCH), torch.stack)
    return Loader(node)


# ---------------------------------------------------------------- LitData
def _to_long(x: Any) -> torch.Tensor:
    return torch.as_tensor(x).to(torch.int64)


def _litdata(mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
    from litdata.streaming.item_loader import TokensLoader

    parts = [StreamingDataset(input_dir=os.path.join(cfg["root"], "litdata", d),
                              item_loader=TokensLoader(block_size=SEQ_LEN), shuffle=True, seed=cfg["seed"],
                              transform=_to_long)
             for d in DOMAINS]
    combined = CombinedStreamingDataset(datasets=parts, weights=_weights(cfg), seed=cfg["seed"],
                                        iterate_over_all=False)
    if mode == "inproc":
        return combined
    return StreamingDataLoader(combined, batch_size=BATCH, num_workers=WORKERS)


# ---------------------------------------------------------------- webdataset
def _wds_long(sample: tuple[np.ndarray]) -> torch.Tensor:
    return torch.from_numpy(sample[0].astype(np.int64))


def _webdataset(mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    import webdataset as wds

    parts = []
    for d in DOMAINS:
        urls = sorted(glob.glob(os.path.join(cfg["root"], "wds", f"{d}-*.tar")))
        parts.append(wds.WebDataset(urls, shardshuffle=len(urls), seed=cfg["seed"], empty_check=False)
                     .shuffle(1000).decode().to_tuple("npy").map(_wds_long))
    mix = wds.RandomMix(parts, probs=_weights(cfg), longest=False)
    if mode == "inproc":
        return mix
    return wds.WebLoader(mix, batch_size=BATCH, num_workers=WORKERS)


# ---------------------------------------------------------------- Hugging Face datasets
def _hf_datasets(mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    from datasets import interleave_datasets, load_from_disk

    parts = [load_from_disk(os.path.join(cfg["root"], "hf", d)) for d in DOMAINS]
    mixed = interleave_datasets(parts, probabilities=_weights(cfg), seed=cfg["seed"],
                                stopping_strategy="first_exhausted").with_format("torch")
    if mode == "inproc":
        return (ex["input_ids"].to(torch.int64) for ex in mixed)
    loader = torch.utils.data.DataLoader(mixed, batch_size=BATCH, num_workers=WORKERS)
    return (b["input_ids"].to(torch.int64) for b in loader)


# ---------------------------------------------------------------- MosaicML streaming
def _streaming(mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    from streaming import Stream, StreamingDataLoader, StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    class TokenDataset(StreamingDataset):  # the documented way to decode samples: override __getitem__
        def __getitem__(self, idx: int) -> torch.Tensor:
            return torch.from_numpy(super().__getitem__(idx)["tokens"].astype(np.int64))

    clean_stale_shared_memory()
    streams = [Stream(local=os.path.join(cfg["root"], "mds", d), proportion=cfg["weights"][d]) for d in DOMAINS]
    ds = TokenDataset(streams=streams, shuffle=True, shuffle_seed=cfg["seed"], batch_size=BATCH,
                      epoch_size=cfg["budget_seqs"], num_canonical_nodes=1)
    if mode == "inproc":
        return ds
    return StreamingDataLoader(ds, batch_size=BATCH, num_workers=WORKERS)


_BUILDERS = {"raw": _raw, "ours": _ours, "torchdata": _torchdata, "litdata": _litdata,
             "webdataset": _webdataset, "hf_datasets": _hf_datasets, "streaming": _streaming}


def build(impl: str, mode: str, cfg: dict[str, Any]) -> Iterable[torch.Tensor]:
    """The iterable for ``impl`` in ``mode`` (``"inproc"`` or ``"loader"``)."""
    if impl not in _BUILDERS:
        raise ValueError(f"unknown reader {impl!r}, expected one of {IMPLS}")
    if mode not in ("inproc", "loader"):
        raise ValueError(f"mode must be 'inproc' or 'loader', got {mode!r}")
    return _BUILDERS[impl](mode, cfg)
