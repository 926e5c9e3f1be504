"""Tokenized data read in place: Megatron indexed datasets and ``datasets`` saved to disk.

Fixtures are written by the libraries' own writers (megatron-core's ``IndexedDatasetBuilder``,
``datasets``' ``save_to_disk``) and read back by their own readers for the token-for-token checks.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pickle
import pkgutil
import re
import shutil
import stat
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers_store import write_synthetic_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import REPO

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.store import (
    InPlaceDomain,
    TokenStore,
    find_domain_stores,
    megatron_source,
    read_megatron_index,
    register_domains,
    register_in_place,
    store_fingerprint,
)
from autoscale_data.store.tokenizers import Tokenizer

pytestmark = pytest.mark.timeout(120)

EOS = 256

with warnings.catch_warnings():  # megatron-core warns that Transformer Engine / Apex are absent (CPU)
    warnings.simplefilter("ignore")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
datasets = pytest.importorskip("datasets")
torch = pytest.importorskip("torch")


def documents(seed: int, n: int, *, eos: bool = True, high: int = 256) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, high, int(rng.integers(1, 120))) for _ in range(n)]
    return [np.append(d, EOS) for d in docs] if eos else docs


def write_megatron(prefix: Path, docs: list[np.ndarray], dtype: type = np.uint16, *,
                   sentences: bool = False) -> Path:
    """A Megatron dataset written by megatron-core's builder (one sequence per document, or sentence pieces)."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    builder = indexed.IndexedDatasetBuilder(f"{prefix}.bin", dtype=dtype)
    for doc in docs:
        if sentences:  # preprocess_data.py --split-sentences: one sequence per sentence, then end_document
            for piece in np.array_split(doc, min(3, doc.size)):
                builder.add_item(torch.from_numpy(piece.astype(np.int64)))
            builder.end_document()
        else:
            builder.add_document(doc, [doc.size])
    builder.finalize(f"{prefix}.idx")
    return prefix


def megatron_tokens(prefix: Path) -> np.ndarray:
    """Every token as megatron-core's IndexedDataset reads it, in order."""
    ds = indexed.IndexedDataset(str(prefix))
    return np.concatenate([ds[i] for i in range(len(ds))])


def store_tokens(store: TokenStore, split: str) -> np.ndarray:
    data = store.train if split == "train" else store.val
    return np.array(data.tokens(0, data.num_tokens))


def hf_tokens(path: Path, split: str | None = None) -> np.ndarray:
    loaded = datasets.load_from_disk(str(path))
    rows = (loaded[split] if split else loaded)["input_ids"]
    return np.concatenate([np.asarray(r) for r in rows])


# ------------------------------------------------------------------------------------------- Megatron
@pytest.mark.parametrize(("dtype", "sentences"), [(np.uint16, False), (np.int32, True)])
def test_megatron_dataset_is_read_token_for_token_as_megatron_reads_it(tmp_path: Path, dtype: type,
                                                                       sentences: bool) -> None:
    docs = documents(0, 400)
    prefix = write_megatron(tmp_path / "data" / "web_text_document", docs, dtype, sentences=sentences)
    manifest = register_in_place(prefix, tmp_path / "stores" / "web", "bytes", shard_tokens=2000,
                                 format="megatron").manifest
    store = TokenStore(tmp_path / "stores" / "web")
    assert store.dtype == np.dtype(dtype).newbyteorder("<") and manifest.dtype == np.dtype(dtype).name
    both = np.concatenate([store_tokens(store, "train"), store_tokens(store, "val")])
    assert np.array_equal(both, megatron_tokens(prefix))
    # holdout: the last 400 // 100 = 4 documents, at a document boundary
    assert store_tokens(store, "val").size == sum(d.size for d in docs[-4:])
    assert manifest.splits["val"].num_documents == 4 and manifest.splits["train"].num_documents == 396
    assert len(manifest.splits["train"].shards) == -(-store.num_tokens // 2000)  # cut into 2000-token ranges
    assert manifest.source["documents_ending_with_eos"] == 400 and manifest.source["format"] == "megatron"
    # nothing was copied: the store directory holds the manifest only, the shards are ranges of the .bin
    assert sorted(p.name for p in (tmp_path / "stores" / "web").iterdir()) == ["manifest.json"]
    assert {s.file for s in manifest.splits["train"].shards} == {"web_text_document.bin"}
    store.verify()


def test_mixture_dataset_reads_megatron_sequences_with_the_store_semantics(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "data" / "web", documents(1, 300))
    register_domains(tmp_path / "stores", "bytes", {"web": InPlaceDomain(prefix, "megatron")}, shard_tokens=1500)
    write_synthetic_store(tmp_path / "stores", "code", num_tokens=20_000)  # a store written by us beside it
    flat = megatron_tokens(prefix)
    seq_len = 64
    stores = {"web": tmp_path / "stores" / "web", "code": tmp_path / "stores" / "code"}
    ds = ScaleAwareMixtureDataset(stores, {"web": 0.5, "code": 0.5}, 100 * seq_len, seq_len, seed=3)
    web = ds.domain_names.index("web")
    seen = 0
    for sample in ds:
        if sample["domain"] == web:  # sequence k is tokens [k*L, (k+1)*L) of the documents concatenated
            k = sample["seq_index"]
            assert np.array_equal(sample["input_ids"].numpy(), flat[k * seq_len : (k + 1) * seq_len])
            seen += 1
    assert seen > 20
    # the same stream through DataLoader workers (stores pickled without data, maps made again)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1)
    assert [(s["domain"], s["seq_index"]) for s in loader] == [(s["domain"], s["seq_index"]) for s in ds]
    assert len(pickle.dumps(TokenStore(tmp_path / "stores" / "web"))) < 20_000


def test_read_only_data_with_the_manifest_kept_apart_and_moved_together(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "tree" / "data" / "web", documents(2, 200))
    expected = megatron_tokens(prefix)
    data_dir = prefix.parent

    def snapshot() -> list[tuple[str, int, int]]:
        return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in data_dir.iterdir())

    before = snapshot()
    os.chmod(data_dir, stat.S_IRUSR | stat.S_IXUSR)  # (root may write anyway: the snapshot checks it)
    try:
        manifest = register_in_place(prefix, tmp_path / "tree" / "stores" / "web", "bytes", format="megatron").manifest
        assert manifest.splits["train"].data_dir == "../../data"  # relative: the tree can move
        TokenStore(tmp_path / "tree" / "stores" / "web").verify()
    finally:
        os.chmod(data_dir, stat.S_IRWXU)
    assert snapshot() == before  # nothing written beside the data
    shutil.move(tmp_path / "tree", tmp_path / "moved")
    store = TokenStore(tmp_path / "moved" / "stores" / "web")
    assert np.array_equal(np.concatenate([store_tokens(store, "train"), store_tokens(store, "val")]), expected)


def test_manifest_beside_the_megatron_files(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "web", documents(3, 50))
    manifest = register_in_place(prefix, tmp_path, "bytes", name="web", format="megatron").manifest
    assert manifest.splits["train"].data_dir == "" and (tmp_path / "manifest.json").is_file()
    store = TokenStore(tmp_path)
    assert np.array_equal(np.concatenate([store_tokens(store, "train"), store_tokens(store, "val")]),
                          megatron_tokens(prefix))


def test_megatron_checks_size_checksum_and_vocabulary(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "data" / "web", documents(4, 300))
    register_in_place(prefix, tmp_path / "web", "bytes", shard_tokens=1000, format="megatron")
    bin_path = Path(f"{prefix}.bin")
    data = bytearray(bin_path.read_bytes())
    data[2500 * 2] ^= 0x01  # a flipped bit in token 2500: shard 2 (tokens 2000..3000)
    bin_path.write_bytes(bytes(data))
    store = TokenStore(tmp_path / "web")
    assert store.train.tokens(0, 1000).size == 1000  # other shards still read
    with pytest.raises(ValueError, match=r"web\.bin' \(bytes 4000\.\.6000\) is corrupted"):
        store.train.tokens(2000, 2010)
    with open(bin_path, "ab") as fh:  # appended data: the size no longer matches, refused on open
        fh.write(b"\0\0")
    with pytest.raises(ValueError, match="wrong size"):
        TokenStore(tmp_path / "web")
    # ids outside the tokenizer's vocabulary are refused at registration (data of another tokenizer)
    bad = write_megatron(tmp_path / "data" / "bad", [np.array([1, 2, 300, EOS])] + documents(5, 10))
    with pytest.raises(ValueError, match="token id 300 .* outside the vocabulary \\[0, 257\\)"):
        register_in_place(bad, tmp_path / "bad", "bytes", format="megatron")
    assert not (tmp_path / "bad" / "manifest.json").exists()


class _BigVocab(Tokenizer):
    """A tokenizer description with 70,000 ids (no encoding needed to register tokens)."""

    spec, eos_id, vocab_size, fingerprint = "big-70000", 69_999, 70_000, "f" * 64

    def encode_batch(self, texts):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def decode(self, ids):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_dtype_must_hold_the_vocabulary_and_domains_must_share_a_tokenizer(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "data" / "web", documents(6, 30))  # uint16 tokens
    with pytest.raises(ValueError, match="vocab_size 70000 does not fit dtype uint16"):
        register_in_place(prefix, tmp_path / "big", _BigVocab(), format="megatron")
    wide = write_megatron(tmp_path / "data" / "wide", documents(6, 30), np.int32)
    with pytest.warns(UserWarning, match="do not end with the EOS id 69999"):  # these end with 256
        assert register_in_place(wide, tmp_path / "big", _BigVocab(), format="megatron").manifest.dtype == "int32"
    register_in_place(prefix, tmp_path / "web", "bytes", format="megatron")
    with pytest.raises(ValueError, match="tokenized differently"):
        ScaleAwareMixtureDataset({"web": tmp_path / "web", "big": tmp_path / "big"}, {"web": 0.5, "big": 0.5},
                                 1000, 10)


def test_megatron_index_errors_are_clear(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "web", documents(7, 20))
    idx = Path(f"{prefix}.idx")
    index = read_megatron_index(idx)
    assert index.dtype == "uint16" and index.document_indices[-1] == index.sequence_lengths.size == 20
    raw = bytearray(idx.read_bytes())
    pointers_at = 34 + 20 * 4
    struct.pack_into("<q", raw, pointers_at + 8, 999)  # sequence 1 does not follow sequence 0
    idx.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="not stored back to back"):
        megatron_source(prefix)
    idx.write_bytes(bytes(raw[:-3]))
    with pytest.raises(ValueError, match="truncated"):
        megatron_source(prefix)
    idx.write_bytes(b"NOTANIDX" + bytes(raw[8:]))
    with pytest.raises(ValueError, match="MMIDIDX"):
        megatron_source(prefix)
    with pytest.raises(FileNotFoundError, match="nothing.bin"):
        megatron_source(tmp_path / "nothing")


def test_registration_is_skipped_when_nothing_changed(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "data" / "web", documents(8, 100))
    first = register_domains(tmp_path / "out", "bytes", {"web": InPlaceDomain(prefix, "megatron")})["web"]
    again = register_domains(tmp_path / "out", "bytes", {"web": InPlaceDomain(prefix, "megatron")})["web"]
    assert not first.skipped and again.skipped and again.manifest == first.manifest
    write_megatron(tmp_path / "data" / "web", documents(9, 100))  # rewritten data: registered again
    third = register_domains(tmp_path / "out", "bytes", {"web": InPlaceDomain(prefix, "megatron")})["web"]
    assert not third.skipped and third.manifest != first.manifest


def test_a_version_1_registration_is_kept_with_the_former_format_name_it_records(tmp_path: Path) -> None:
    """Version 1 manifests recorded 'megatron-indexed' (and 'hf-datasets'), also in their source fingerprint:
    registering the unchanged data again keeps such a manifest as it is (its bytes are its run-id fingerprint)."""
    prefix = write_megatron(tmp_path / "data" / "web", documents(8, 100))
    store = tmp_path / "out" / "web"
    manifest = register_in_place(prefix, store, "bytes").manifest.to_json()
    files = [[os.fspath(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns]
             for p in (Path(f"{prefix}.idx"), Path(f"{prefix}.bin"))]
    source = {k: manifest["source"][k] for k in ("prefix", "sequences", "multimodal")} | {"format": "megatron-indexed"}
    desc = {"files": files, "tokenizer": manifest["tokenizer"]["fingerprint"], "holdout": manifest["holdout"],
            "shard_tokens": 1 << 27, "source": source}
    digest = hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()
    manifest.update(version=1, source=manifest["source"] | {"format": "megatron-indexed", "fingerprint": digest})
    (store / "manifest.json").write_text(json.dumps(manifest))
    before = (store / "manifest.json").read_bytes()
    assert register_in_place(prefix, store, "bytes").skipped and (store / "manifest.json").read_bytes() == before
    assert store_fingerprint(store) == hashlib.sha256(before).hexdigest()[:16]


def test_documents_without_eos_are_counted_and_warned_about(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "web", documents(10, 40, eos=False))
    with pytest.warns(UserWarning, match="40 of 40 documents do not end with the EOS id 256.*--append-eod"):
        manifest = register_in_place(prefix, tmp_path / "store", "bytes", format="megatron").manifest
    assert manifest.source["documents_ending_with_eos"] == 0


# ------------------------------------------------------------------------------------------- datasets
@pytest.mark.parametrize("feature", ["int32", "int64"])
def test_hf_dataset_is_read_token_for_token_as_datasets_reads_it(tmp_path: Path, feature: str) -> None:
    rows = [d.tolist() for d in documents(11, 2500)]
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value(feature)),
                                  "text": datasets.Value("string")})
    ds = datasets.Dataset.from_dict({"input_ids": rows, "text": ["t"] * len(rows)}, features=features)
    ds.save_to_disk(str(tmp_path / "hf"), num_shards=2)  # 2 files, several record batches each
    manifest = register_in_place(tmp_path / "hf", tmp_path / "store", "bytes", name="web", format="hf").manifest
    assert manifest.dtype == feature and manifest.source["format"] == "hf"
    store = TokenStore(tmp_path / "store")
    both = np.concatenate([store_tokens(store, "train"), store_tokens(store, "val")])
    assert np.array_equal(both, hf_tokens(tmp_path / "hf"))
    assert manifest.splits["val"].num_documents == 25 and manifest.splits["train"].num_documents == 2475
    assert len({s.file for s in manifest.splits["train"].shards}) == 2
    assert len(manifest.splits["train"].shards) >= 3  # record batches are not merged (not contiguous)
    store.verify()


def test_hf_dataset_dict_uses_its_validation_split(tmp_path: Path) -> None:
    train = datasets.Dataset.from_dict({"input_ids": [d.tolist() for d in documents(12, 300)]})
    val = datasets.Dataset.from_dict({"input_ids": [d.tolist() for d in documents(13, 20)]})
    datasets.DatasetDict({"train": train, "validation": val}).save_to_disk(str(tmp_path / "hf"))
    results = register_domains(tmp_path / "out", "bytes", {"web": tmp_path / "hf"})
    manifest = results["web"].manifest
    assert manifest.holdout["rule"] == "separate_validation_data"
    store = TokenStore(tmp_path / "out" / "web")
    assert np.array_equal(store_tokens(store, "train"), hf_tokens(tmp_path / "hf", "train"))
    assert np.array_equal(store_tokens(store, "val"), hf_tokens(tmp_path / "hf", "validation"))
    assert find_domain_stores(tmp_path / "out") == {"web": tmp_path / "out" / "web"}


def test_hf_dataset_errors_are_clear(tmp_path: Path) -> None:
    datasets.Dataset.from_dict({"tokens": [[1, 2]]}).save_to_disk(str(tmp_path / "nocol"))
    with pytest.raises(ValueError, match="no column 'input_ids'"):
        register_in_place(tmp_path / "nocol", tmp_path / "s1", "bytes", format="hf")
    datasets.Dataset.from_dict({"input_ids": [[1.5, 2.0]]}).save_to_disk(str(tmp_path / "floats"))
    with pytest.raises(ValueError, match="holds double ids"):
        register_in_place(tmp_path / "floats", tmp_path / "s2", "bytes", format="hf")
    datasets.Dataset.from_dict({"input_ids": [[1, 2], None]}).save_to_disk(str(tmp_path / "nulls"))
    with pytest.raises(ValueError, match="null"):
        register_in_place(tmp_path / "nulls", tmp_path / "s3", "bytes", format="hf")
    with pytest.raises(FileNotFoundError, match="save_to_disk"):
        register_in_place(tmp_path, tmp_path / "s4", "bytes", format="hf")


# ------------------------------------------------------------------------------------------- CLI
def test_cli_prepare_registers_megatron_and_hf_data_beside_a_tokenized_domain(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "data" / "web_text_document", documents(14, 200))
    datasets.Dataset.from_dict({"input_ids": [d.tolist() for d in documents(15, 200)]}).save_to_disk(
        str(tmp_path / "data" / "code_hf"))
    (tmp_path / "books.jsonl").write_text("".join(json.dumps({"text": f"book {i} " * 20}) + "\n" for i in range(50)))
    cmd = [sys.executable, "-m", "autoscale_data.cli", "prepare", "--from-megatron", f"web={prefix}",
           "--from-hf", f"code={tmp_path / 'data' / 'code_hf'}", "--domain", f"books={tmp_path / 'books.jsonl'}",
           "--out", str(tmp_path / "out"), "--tokenizer", "bytes", "--workers", "1", "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert set(find_domain_stores(tmp_path / "out")) == {"web", "code", "books"}
    web = TokenStore(tmp_path / "out" / "web")
    assert np.array_equal(np.concatenate([store_tokens(web, "train"), store_tokens(web, "val")]),
                          megatron_tokens(prefix))
    ds = ScaleAwareMixtureDataset(tmp_path / "out", {"web": 0.4, "code": 0.4, "books": 0.2}, 3000, 30, seed=0)
    assert len(list(ds)) == 100


def test_in_place_stores_are_not_exported_as_webdataset(tmp_path: Path) -> None:
    from autoscale_data.store import export_webdataset

    register_in_place(write_megatron(tmp_path / "web", documents(16, 20)), tmp_path / "store", "bytes",
                      format="megatron")
    with pytest.raises(ValueError, match="in place"):
        export_webdataset(tmp_path / "store", tmp_path / "wds")


@pytest.mark.parametrize("output", ["compact", "torch"])
def test_int64_in_place_domain_mixes_with_a_uint16_store(tmp_path: Path, output: str) -> None:
    rows = [d.tolist() for d in documents(17, 400)]
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int64"))})
    datasets.Dataset.from_dict({"input_ids": rows}, features=features).save_to_disk(str(tmp_path / "hf"))
    register_domains(tmp_path / "out", "bytes", {"web": tmp_path / "hf"})
    write_synthetic_store(tmp_path / "out", "code", num_tokens=20_000)
    flat = hf_tokens(tmp_path / "hf")
    code = TokenStore(tmp_path / "out" / "code")
    seq_len = 32
    stores = {"web": tmp_path / "out" / "web", "code": tmp_path / "out" / "code"}
    ds = ScaleAwareMixtureDataset(stores, {"web": 0.5, "code": 0.5}, 200 * seq_len, seq_len, seed=1,
                                  batch_size=8, output=output)
    web = ds.domain_names.index("web")
    rows_seen = 0
    for batch in ds:
        ids = batch["input_ids"]
        assert ids.dtype == (torch.int64 if output == "torch" else torch.int64)  # int64 is the widest dtype
        for row, d, k in zip(ids.numpy(), batch["domain"].tolist(), batch["seq_index"].tolist(), strict=True):
            source = flat if d == web else np.asarray(code.train.tokens(0, code.num_tokens))
            assert np.array_equal(row, source[k * seq_len : (k + 1) * seq_len])
            rows_seen += 1
    assert rows_seen == 200


def test_registration_does_not_depend_on_the_number_of_threads(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "data" / "web", documents(18, 300))
    one = register_in_place(prefix, tmp_path / "a" / "web", "bytes", format="megatron", shard_tokens=700,
                            workers=1).manifest
    four = register_in_place(prefix, tmp_path / "b" / "web", "bytes", format="megatron", shard_tokens=700,
                             workers=4).manifest
    assert one == four and len(one.splits["train"].shards) > 8


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(1, 60), min_size=1, max_size=60), shard_tokens=st.integers(1, 400),
       holdout_every=st.integers(2, 12))
def test_any_cut_keeps_every_token_and_document_in_order(tmp_path: Path, lengths: list[int], shard_tokens: int,
                                                         holdout_every: int) -> None:
    rng = np.random.default_rng(len(lengths))
    docs = [np.append(rng.integers(0, 256, n - 1), EOS) for n in lengths]
    case = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
    prefix = write_megatron(case / "data", docs)
    manifest = register_in_place(prefix, case / "store", "bytes", shard_tokens=shard_tokens,
                                 holdout_every=holdout_every, workers=2, format="megatron").manifest
    store = TokenStore(case / "store")
    n_val = len(docs) // holdout_every or (1 if len(docs) >= 2 else 0)
    assert np.array_equal(store_tokens(store, "train"), np.concatenate(docs[: len(docs) - n_val]))
    assert np.array_equal(store_tokens(store, "val"), np.concatenate(docs[len(docs) - n_val :] or [np.zeros(0)]))
    assert manifest.splits["train"].num_documents == len(docs) - n_val
    assert manifest.splits["val"].num_documents == n_val
    assert all(0 < s.num_tokens <= shard_tokens for split in manifest.splits.values() for s in split.shards)
    assert manifest.source["documents_ending_with_eos"] == len(docs)


def test_megatron_mistakes_point_to_the_fix(tmp_path: Path) -> None:
    prefix = write_megatron(tmp_path / "data" / "web_text_document", documents(16, 40))
    # an .idx whose dtype code says int32 for a .bin of uint16 tokens
    idx = Path(f"{prefix}.idx")
    raw = bytearray(idx.read_bytes())
    good = bytes(raw)
    raw[17] = 4  # megatron-core's DType code of int32 (uint16 is 8)
    idx.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"the \.idx's dtype disagrees with the \.bin: the \.idx says int32 tokens "
                                         r"\(4 bytes each\), but .* holds 2-byte tokens"):
        megatron_source(prefix)
    idx.write_bytes(good)
    # a directory instead of the prefix
    with pytest.raises(FileNotFoundError, match=r"is a directory: give the path prefix .*web_text_document"):
        megatron_source(tmp_path / "data")
    # the runner's or the dataset's domains pointing at the unregistered prefix, or at its folder
    from autoscale_data.runner.config import config_from_dict
    from autoscale_data.runner.planning.data import inspect_domains

    for where in (prefix, tmp_path / "data"):
        with pytest.raises(FileNotFoundError, match=r"prepare --from-megatron web=.*web_text_document"):
            TokenStore(where)
        with pytest.raises(FileNotFoundError, match=r"config 'domains' = .* is not a prepared-store directory: .*"
                                                    r"prepare --from-megatron web="):
            inspect_domains(config_from_dict({"domains": str(where)}, tmp_path))
    # bytes appended after registration: register again
    register_in_place(prefix, tmp_path / "web", "bytes", format="megatron")
    with open(f"{prefix}.bin", "ab") as fh:
        fh.write(b"\0\0")
    with pytest.raises(ValueError, match=r"grew: it has the wrong size.*register it again"):
        TokenStore(tmp_path / "web")


def test_cli_prepare_takes_a_separate_megatron_validation_set(tmp_path: Path) -> None:
    from autoscale_data.cli import main

    train = write_megatron(tmp_path / "data" / "web_train", documents(17, 60))
    val = write_megatron(tmp_path / "data" / "web_valid", documents(18, 12))
    assert main(["prepare", "--from-megatron", f"web={train}", "--megatron-val", f"web={val}", "--out",
                 str(tmp_path / "out"), "--tokenizer", "bytes", "--workers", "1", "--quiet"]) == 0
    store = TokenStore(tmp_path / "out" / "web")
    assert np.array_equal(store_tokens(store, "train"), megatron_tokens(train))
    assert np.array_equal(store_tokens(store, "val"), megatron_tokens(val))
    assert main(["prepare", "--from-megatron", f"web={train}", "--val-prefix", f"code={val}", "--out",
                 str(tmp_path / "out2"), "--tokenizer", "bytes", "--quiet"]) == 2


def test_the_prepare_cli_derives_its_in_place_options_from_the_format_registry() -> None:
    """Each format gives ``--from-NAME`` and one flag per option field; the older spellings still parse."""
    from autoscale_data.cli import build_parser
    from autoscale_data.commands.prepare import _in_place_domains
    from autoscale_data.store import FORMATS, HFOptions, MegatronOptions

    parse = build_parser().parse_args
    base = ["prepare", "--out", "o", "--tokenizer", "bytes"]
    text = build_parser()._subparsers._group_actions[0].choices["prepare"].format_help()  # noqa: SLF001
    for f in FORMATS.values():
        assert f"--from-{f.name} NAME={f.argument}" in text
    args = parse([*base, "--from-megatron", "web=w", "--from-megatron", "math=m", "--megatron-val-prefix", "web=v",
                  "--from-hf", "code=c", "--hf-column", "ids"])
    got = _in_place_domains(args)
    assert got["web"].options == MegatronOptions("v") and got["math"].options == MegatronOptions()
    assert got["code"].format == "hf" and got["code"].options == HFOptions("ids")
    old = parse([*base, "--from-megatron", "web=w", "--from-megatron", "math=m", "--megatron-val", "web=v",
                 "--from-hf", "code=c", "--column", "ids"])
    assert _in_place_domains(old) == got
    with pytest.raises(ValueError, match="names domain 'code', which is not given with --from-megatron"):
        _in_place_domains(parse([*base, "--from-megatron", "web=w", "--val-prefix", "code=v"]))
    with pytest.raises(ValueError, match="given twice"):
        _in_place_domains(parse([*base, "--from-megatron", "web=w", "--from-hf", "web=c"]))


# ------------------------------------------------------------------------------------------- formats
def test_every_format_is_found_by_name_or_from_its_data(tmp_path: Path) -> None:
    from autoscale_data.store import FORMATS, MegatronOptions, formats

    modules = {m.name: importlib.import_module(f"{formats.__name__}.{m.name}") for m in pkgutil.iter_modules(
        formats.__path__) if m.name != "base"}  # each format's module is named after it and holds its entry
    assert {name: m.FORMAT for name, m in modules.items()} == dict(FORMATS)
    prefix = write_megatron(tmp_path / "data" / "web", documents(19, 40))
    val = write_megatron(tmp_path / "data" / "web_val", documents(20, 8))
    datasets.Dataset.from_dict({"input_ids": [d.tolist() for d in documents(21, 30)]}).save_to_disk(
        str(tmp_path / "hf"))
    results = register_domains(tmp_path / "out", "bytes", {  # no format given: found from the data
        "web": prefix, "code": tmp_path / "hf", "books": InPlaceDomain(prefix, options=MegatronOptions(val))})
    assert [r.manifest.source["format"] for r in results.values()] == ["megatron", "hf", "megatron"]
    books = TokenStore(tmp_path / "out" / "books")
    assert np.array_equal(store_tokens(books, "val"), megatron_tokens(val))  # the format's own option
    again = register_in_place(f"{prefix}.idx", tmp_path / "out" / "web", "bytes", name="web")
    assert again.skipped and again.manifest == results["web"].manifest


def test_format_mistakes_name_the_value_and_what_was_expected(tmp_path: Path) -> None:
    from autoscale_data.store import FORMATS, HFOptions, MegatronOptions

    prefix = write_megatron(tmp_path / "web", documents(22, 20))
    with pytest.raises(ValueError, match=re.escape(f"unknown in-place format 'arrow'; expected one of {sorted(FORMATS)}")):
        register_in_place(prefix, tmp_path / "s", "bytes", format="arrow")
    with pytest.raises(FileNotFoundError, match=r"no tokenized data of a known in-place format at .*nothing'.*"
                                                r"'megatron': a Megatron dataset prefix"):
        register_in_place(tmp_path / "nothing", tmp_path / "s", "bytes")
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['column'\]; format 'megatron' takes \['val_prefix'\]"):
        register_in_place(prefix, tmp_path / "s", "bytes", column="ids")
    with pytest.raises(ValueError, match=r"given for format 'megatron', which takes MegatronOptions"):
        InPlaceDomain(prefix, "megatron", HFOptions())
    with pytest.raises(ValueError, match="column must be a non-empty column name, got ''"):
        HFOptions("")
    with pytest.raises(ValueError, match="holdout_every must be an integer >= 2, got 1"):
        register_in_place(prefix, tmp_path / "s", "bytes", holdout_every=1)
    assert not (tmp_path / "s").exists()
    assert InPlaceDomain(prefix, options=MegatronOptions()).format == "megatron"
