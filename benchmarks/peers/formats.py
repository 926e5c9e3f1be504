"""Write the synthetic corpus in each peer's recommended on-disk format (run in the peers' venv).

Usage: ``python formats.py ROOT [--only NAME ...]``. Reads ``ROOT/store/<domain>/train-00000.bin``
(our store, written by the driver) and writes, per domain:

* ``ROOT/litdata/<domain>/``  ``litdata.optimize`` with ``TokensLoader`` (its LLM pre-training recipe),
  chunks of 1024 sequences;
* ``ROOT/wds/<domain>-NNNNNN.tar``  ``webdataset.ShardWriter``, one ``.npy`` sample per sequence,
  256 samples per tar;
* ``ROOT/hf/<domain>/``  a ``datasets.Dataset`` with an ``input_ids`` column (uint16, length 2049),
  ``save_to_disk`` (Arrow);
* ``ROOT/mds/<domain>/``  ``streaming.MDSWriter`` with ``{"tokens": "ndarray:uint16:2049"}``, no compression.

torchdata.nodes and the raw baseline read our store's flat ``.bin`` files directly (a numpy memmap).
A ``.done`` file marks each finished format, so an interrupted run redoes only what is missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import numpy as np
from synth import DOMAINS, SEQ_LEN

FORMATS = ("litdata", "wds", "hf", "mds")
_BLOCK = 1024


def _seqs(root: str, domain: str) -> np.ndarray:
    return np.memmap(os.path.join(root, "store", domain, "train-00000.bin"), dtype=np.uint16,
                     mode="r").reshape(-1, SEQ_LEN)


def _lit_item(item: tuple[str, int, int]):  # noqa: ANN201 - a generator for litdata.optimize
    import torch

    path, a, b = item
    seqs = np.memmap(path, dtype=np.uint16, mode="r").reshape(-1, SEQ_LEN)
    yield torch.from_numpy(np.ascontiguousarray(seqs[a:b]).reshape(-1))  # uint16, as stored


def write_litdata(root: str, domain: str, out: str) -> None:
    from litdata import optimize
    from litdata.streaming.item_loader import TokensLoader

    path = os.path.join(root, "store", domain, "train-00000.bin")
    n = _seqs(root, domain).shape[0]
    inputs = [(path, a, min(n, a + _BLOCK)) for a in range(0, n, _BLOCK)]
    optimize(fn=_lit_item, inputs=inputs, output_dir=out, chunk_size=SEQ_LEN * _BLOCK,
             item_loader=TokensLoader(), num_workers=1, mode="overwrite")


def write_wds(root: str, domain: str, out: str) -> None:
    import webdataset as wds

    os.makedirs(out, exist_ok=True)
    seqs = _seqs(root, domain)
    with wds.ShardWriter(os.path.join(out, f"{domain}-%06d.tar"), maxcount=256, verbose=0) as sink:
        for k in range(seqs.shape[0]):
            sink.write({"__key__": f"{k:09d}", "npy": np.asarray(seqs[k])})


def write_hf(root: str, domain: str, out: str) -> None:
    import pyarrow as pa
    from datasets import Dataset

    seqs = _seqs(root, domain)
    column = pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(seqs).reshape(-1)), SEQ_LEN)
    Dataset(pa.table({"input_ids": column})).save_to_disk(out)


def write_mds(root: str, domain: str, out: str) -> None:
    from streaming import MDSWriter

    seqs = _seqs(root, domain)
    with MDSWriter(out=out, columns={"tokens": f"ndarray:uint16:{SEQ_LEN}"}, compression=None,
                   size_limit=1 << 26) as writer:
        for k in range(seqs.shape[0]):
            writer.write({"tokens": np.asarray(seqs[k])})


_WRITERS = {"litdata": write_litdata, "wds": write_wds, "hf": write_hf, "mds": write_mds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--only", nargs="*", choices=FORMATS, default=list(FORMATS))
    args = parser.parse_args(argv)
    for fmt in args.only:
        done = os.path.join(args.root, f"{fmt}.done")
        if os.path.exists(done):
            continue
        start = time.perf_counter()
        base = os.path.join(args.root, fmt)
        shutil.rmtree(base, ignore_errors=True)
        for domain in DOMAINS:
            out = base if fmt == "wds" else os.path.join(base, domain)
            _WRITERS[fmt](args.root, domain, out)
        open(done, "w").close()
        print(f"wrote {fmt} in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
