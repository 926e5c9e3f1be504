"""The embedded synthetic corpus: deterministic, sized, and domains measurably different."""

from __future__ import annotations

import json
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscale_data.demo.corpus import (
    DEMO_DOMAINS,
    DOMAIN_DESCRIPTIONS,
    SyntheticWorld,
    generate_corpus,
    generate_documents,
)

_WORLD = SyntheticWorld(0)


def _text(domain: str, n: int = 200_000, seed: int = 0) -> str:
    world = _WORLD if seed == 0 else SyntheticWorld(seed)
    return "".join(generate_documents(domain, n, seed=seed, world=world))


def test_every_domain_is_described_as_synthetic() -> None:
    assert len(DEMO_DOMAINS) >= 4
    for d in DEMO_DOMAINS:
        assert "synthetic" in DOMAIN_DESCRIPTIONS[d]


@pytest.mark.parametrize("domain", DEMO_DOMAINS)
def test_same_seed_same_text_other_seed_other_text(domain: str) -> None:
    a = _text(domain, 30_000)
    assert a == "".join(generate_documents(domain, 30_000, seed=0))  # world rebuilt from the seed
    assert a != _text(domain, 30_000, seed=1)


@settings(max_examples=25, deadline=None)
@given(domain=st.sampled_from(DEMO_DOMAINS), n=st.integers(1, 20_000))
def test_sized_by_argument(domain: str, n: int) -> None:
    docs = list(generate_documents(domain, n, world=_WORLD))
    total = sum(len(d) for d in docs)
    assert total >= n and total - len(docs[-1]) < n  # stops right after reaching n
    assert all(d.endswith("\n") and d.isascii() for d in docs)
    prefix = list(generate_documents(domain, max(1, n // 2), world=_WORLD))
    assert docs[: len(prefix)] == prefix  # a smaller size is a prefix of a larger one


def test_domains_differ_in_compressibility_and_vocabulary() -> None:
    ratio = {d: len(zlib.compress(_text(d).encode(), 9)) / len(_text(d)) for d in DEMO_DOMAINS}
    # clean templated text compresses far better than noisy web text; the others lie in between
    assert ratio["encyclopedia"] < ratio["qa"] < ratio["code"] < ratio["web"]
    assert ratio["web"] > 3 * ratio["encyclopedia"]
    types = {d: len(set(re.findall(r"[a-z]+", _text(d).lower()))) for d in DEMO_DOMAINS}
    assert types["web"] > 5 * types["encyclopedia"]


def test_domains_share_structure() -> None:
    enc, qa, code, web = (_text(d) for d in ("encyclopedia", "qa", "code", "web"))
    names = set(re.findall(r"== (\w+) ==", enc))
    assert names and all(name in qa for name in names)  # the Q&A asks about the same entities
    facts = re.findall(r"(\w+) is known for its (\w+)\.", enc)
    assert facts and all(f"{good}." in qa for _, good in facts[:20])
    code_words = {w for ident in re.findall(r"def (\w+)\(", code) for w in ident.split("_")}
    web_words = set(re.findall(r"[a-z]+", web))
    assert len(code_words & web_words) > 0.5 * len(code_words)  # identifiers come from the shared lexicon


def test_generate_corpus_writes_jsonl_and_reuses(tmp_path) -> None:
    paths = generate_corpus(tmp_path, bytes_per_domain=20_000, domains=("encyclopedia", "web"))
    assert set(paths) == {"encyclopedia", "web"}
    lines = paths["web"].read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert sum(len(r["text"]) for r in rows) >= 20_000 and rows[0]["source"] == "synthetic:web"
    stamp = {d: p.stat().st_mtime_ns for d, p in paths.items()}
    old_size = paths["web"].stat().st_size
    again = generate_corpus(tmp_path, bytes_per_domain=20_000, domains=("encyclopedia", "web"))
    assert {d: p.stat().st_mtime_ns for d, p in again.items()} == stamp  # reused, not rewritten
    bigger = generate_corpus(tmp_path, bytes_per_domain=30_000, domains=("web",))
    assert bigger["web"].stat().st_size > old_size  # other parameters: regenerated


@pytest.mark.parametrize("kwargs", [{"bytes_per_domain": 0}, {"domains": ("wiki",)}, {"domains": ()}])
def test_generate_corpus_rejects_bad_arguments(tmp_path, kwargs) -> None:
    with pytest.raises(ValueError):
        generate_corpus(tmp_path, **kwargs)


def test_generate_documents_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown demo domain"):
        next(generate_documents("wiki", 10))
    with pytest.raises(ValueError, match="num_bytes"):
        next(generate_documents("web", 0))
    with pytest.raises(ValueError):
        SyntheticWorld(num_words=10)
