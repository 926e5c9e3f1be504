"""webdataset export/import: bit-exact round trips, readable by the webdataset package."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscale_data.store import StoreWriter, TokenizerInfo, TokenStore
from autoscale_data.store.wds import WDS_INDEX, export_webdataset, import_webdataset, iter_wds_samples

pytestmark = pytest.mark.timeout(60)


def make_store(path: Path, sizes: tuple[int, int], vocab: int, shard_tokens: int, seed: int = 0) -> TokenStore:
    tok = TokenizerInfo(spec="test", fingerprint=f"fp-{vocab}", vocab_size=vocab, eos_id=vocab - 1)
    rng = np.random.default_rng(seed)
    with StoreWriter(path, "dom", tok, shard_tokens=shard_tokens) as w:
        for split, n in zip(("train", "val"), sizes, strict=True):
            if n:
                w.add_tokens(split, rng.integers(0, vocab, n), num_documents=2)
    return TokenStore(path)


def digests(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())
            if p.is_file() and not p.name.startswith(".")}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n_train=st.integers(1, 3000), n_val=st.integers(0, 400), vocab=st.sampled_from([300, 70_000]),
    shard_tokens=st.integers(50, 1500), sample_tokens=st.integers(40, 2000), tar_bytes=st.integers(1, 20_000),
)
def test_round_trip_is_bit_exact(tmp_path_factory, n_train, n_val, vocab, shard_tokens, sample_tokens,
                                 tar_bytes) -> None:
    base = tmp_path_factory.mktemp("wds")
    store = make_store(base / "store", (n_train, n_val), vocab, shard_tokens)
    export = export_webdataset(store, base / "tars", sample_tokens=sample_tokens, tar_bytes=tar_bytes)
    expected_samples = sum(-(-s.num_tokens // sample_tokens) for split in store.manifest.splits.values()
                           for s in split.shards)
    assert export.num_samples == expected_samples
    back = import_webdataset(base / "tars", base / "back")
    assert digests(base / "back") == digests(base / "store")  # shards and manifest, byte for byte
    assert back.manifest == store.manifest


def test_tars_are_webdataset_samples_and_deterministic(tmp_path: Path) -> None:
    wds = pytest.importorskip("webdataset")
    store = make_store(tmp_path / "store", (4100, 0), 300, shard_tokens=2049 * 2)
    export = export_webdataset(tmp_path / "store", tmp_path / "a", sample_tokens=2049)
    assert export.tars == {"train": ["train-000000.tar"], "val": []}
    samples = list(wds.WebDataset(export.urls("train"), shardshuffle=False).decode())
    assert [s["__key__"] for s in samples] == ["train-00000_000000", "train-00000_000001", "train-00001_000000"]
    np.testing.assert_array_equal(samples[1]["npy"], store.train.sequence(1, 2049))
    assert samples[1]["json"]["offset"] == 2049 and samples[2]["json"]["num_tokens"] == 2
    assert samples[0]["npy"].dtype == np.dtype("<u2")
    export_webdataset(tmp_path / "store", tmp_path / "b", sample_tokens=2049)
    assert digests(tmp_path / "a") == digests(tmp_path / "b")
    keys = [key for key, _, _ in iter_wds_samples(tmp_path / "a" / "train-000000.tar")]
    assert keys == [s["__key__"] for s in samples]


def test_import_rejects_foreign_or_damaged_tars(tmp_path: Path) -> None:
    make_store(tmp_path / "s1", (3000, 100), 300, shard_tokens=1000, seed=1)
    make_store(tmp_path / "s2", (3000, 100), 300, shard_tokens=1000, seed=2)
    export_webdataset(tmp_path / "s1", tmp_path / "t1", sample_tokens=500)
    export_webdataset(tmp_path / "s2", tmp_path / "t2", sample_tokens=500)
    with pytest.raises(FileNotFoundError, match=WDS_INDEX):
        import_webdataset(tmp_path / "s1", tmp_path / "x")
    # s2's tars under s1's index: same shapes, different bytes -> the shard checksum catches it
    (tmp_path / "t1" / "train-000000.tar").write_bytes((tmp_path / "t2" / "train-000000.tar").read_bytes())
    with pytest.raises(ValueError, match="train-00000.bin.*sha256"):
        import_webdataset(tmp_path / "t1", tmp_path / "back")
    assert not (tmp_path / "back" / "manifest.json").exists()
    assert not list((tmp_path / "back").glob(".*.tmp"))
    # a tar that stops early
    export_webdataset(tmp_path / "s1", tmp_path / "t3", sample_tokens=500)
    tar_path = tmp_path / "t3" / "train-000000.tar"
    with tarfile.open(tar_path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(tar_path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for m, data in members[:-2]:
            tar.addfile(m, io.BytesIO(data))
    with pytest.raises(ValueError, match="end inside shard 'train-00002.bin'"):
        import_webdataset(tmp_path / "t3", tmp_path / "back3")
    index = json.loads((tmp_path / "t3" / WDS_INDEX).read_text())
    assert index["sample_tokens"] == 500 and index["tars"]["val"] == ["val-000000.tar"]
    with pytest.raises(ValueError, match="sample_tokens"):
        export_webdataset(tmp_path / "s1", tmp_path / "t4", sample_tokens=0)
