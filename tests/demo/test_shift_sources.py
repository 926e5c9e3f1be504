"""The shift case's sources: deterministic, of the entropy they are built with, and one saturating by its support."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from autoscale_data.demo.corpus import DOMAIN_DESCRIPTIONS, SHIFT_DOMAINS, generate_corpus, generate_documents
from autoscale_data.demo.sources import SHIFT_SOURCES, MarkovSource, MotifSource


def _text(domain: str, n: int = 150_000, seed: int = 0) -> str:
    return "".join(generate_documents(domain, n, seed=seed))


def _conditional_entropy(lines: list[str], order: int) -> float:
    """The plug-in entropy of a symbol given the ``order`` before it, in nats (within lines only)."""
    grams, contexts = Counter(), Counter()
    for line in lines:
        for i in range(order, len(line)):
            grams[line[i - order:i + 1]] += 1
            contexts[line[i - order:i]] += 1
    total = sum(grams.values())
    return -sum(n * math.log(n / contexts[g[:-1]]) for g, n in grams.items()) / total


def test_shift_domains_are_described_and_deterministic() -> None:
    assert SHIFT_DOMAINS == ("motifs", "markov8", "markov12")
    for d in SHIFT_DOMAINS:
        assert "synthetic" in DOMAIN_DESCRIPTIONS[d]
        a = _text(d, 20_000)
        assert a == _text(d, 20_000) and a != _text(d, 20_000, seed=1)
        alphabet = SHIFT_SOURCES[d].alphabet
        assert set(a) <= set(alphabet) | {" ", "\n"}  # each domain speaks its own alphabet
    alphabets = [set(SHIFT_SOURCES[d].alphabet) for d in SHIFT_DOMAINS]
    assert all(not (x & y) for i, x in enumerate(alphabets) for y in alphabets[i + 1:])


def test_motifs_saturate_by_construction() -> None:
    src = SHIFT_SOURCES["motifs"]
    assert isinstance(src, MotifSource)
    words = re.findall(r"[a-z]+", _text("motifs"))
    counts = Counter(words)
    # the support is the fixed motif set: bounded whatever the size, and every motif appears about equally
    assert set(counts) == set(src.structure(0)) and len(counts) == src.num_motifs == 16
    assert all(len(w) == src.motif_len for w in counts)
    assert max(counts.values()) < 1.3 * min(counts.values())
    # once the motifs are known the only entropy is the choice of the next one: ln(16) / 13 nats per token
    assert src.entropy_rate == pytest.approx(math.log(16) / 13)
    lines = _text("motifs").splitlines()
    measured = _conditional_entropy(lines, src.motif_len)
    assert measured == pytest.approx(src.entropy_rate, abs=0.01)
    assert _conditional_entropy(lines, 0) > 10 * src.entropy_rate  # unigrams alone leave far more to learn


@pytest.mark.parametrize(("domain", "contexts"), [("markov8", 64), ("markov12", 144)])
def test_markov_sources_have_their_entropy_rate(domain: str, contexts: int) -> None:
    src = SHIFT_SOURCES[domain]
    assert isinstance(src, MarkovSource) and src.num_contexts == contexts
    assert src.entropy_rate == pytest.approx(math.log(2))
    lines = _text(domain).splitlines()
    unigram = math.log(len(src.alphabet))
    # the order-2 plug-in estimate matches ln 2 (every context has seen its successors many times) ...
    assert _conditional_entropy(lines, 2) == pytest.approx(math.log(2), abs=0.02)
    # ... while one symbol of context says little: the loss stays high until order-2 contexts are learned
    assert _conditional_entropy(lines, 1) > 0.75 * unigram
    assert _conditional_entropy(lines, 0) == pytest.approx(unigram, abs=0.1)
    table = src.structure(0)
    assert table.shape == (contexts, 2) and all(len(set(row)) == 2 for row in table.tolist())


def test_sources_check_their_sizes() -> None:
    with pytest.raises(ValueError, match="branching 9"):
        MarkovSource(alphabet="ABCDEFGH", order=2, branching=9)
    with pytest.raises(ValueError, match="order must be positive, got 0"):
        MarkovSource(alphabet="AB", order=0)
    with pytest.raises(ValueError, match="too small for 50 distinct"):
        MotifSource(num_motifs=50, motif_len=1, alphabet="ab")


def test_generate_corpus_writes_shift_domains(tmp_path) -> None:
    paths = generate_corpus(tmp_path, bytes_per_domain=5_000, domains=SHIFT_DOMAINS)
    assert set(paths) == set(SHIFT_DOMAINS) and all(p.stat().st_size > 5_000 for p in paths.values())
    with pytest.raises(ValueError, match="'nope'"):
        generate_corpus(tmp_path, domains=("nope",))
