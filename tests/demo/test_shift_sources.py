"""The shift case's sources: deterministic, of the entropy they are built with, and one saturating by its support;
the Zipf sources: their exponent recovered from samples, one whose support is soon all seen."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from scipy.stats import poisson

from autoscale_data.demo.corpus import (
    DOMAIN_DESCRIPTIONS,
    SHIFT_DOMAINS,
    ZIPF_DOMAINS,
    generate_corpus,
    generate_documents,
)
from autoscale_data.demo.sources import SHIFT_SOURCES, ZIPF_SOURCES, MarkovSource, MotifSource, ZipfSource


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


def _words(domain: str, n: int, seed: int = 0) -> list[str]:
    return _text(domain, n, seed).split()


def test_zipf_domains_are_described_and_deterministic() -> None:
    assert ZIPF_DOMAINS == ("zipf_fast", "zipf_slow") and not set(ZIPF_DOMAINS) & set(SHIFT_DOMAINS)
    for d in ZIPF_DOMAINS:
        assert "synthetic" in DOMAIN_DESCRIPTIONS[d]
        a = _text(d, 20_000)
        assert a == _text(d, 20_000) and a != _text(d, 20_000, seed=1)
        assert set(a) <= set(ZIPF_SOURCES[d].alphabet) | {" ", "\n"}
    assert not set(ZIPF_SOURCES["zipf_fast"].alphabet) & set(ZIPF_SOURCES["zipf_slow"].alphabet)


@pytest.mark.parametrize("domain", ["zipf_fast", "zipf_slow"])
def test_zipf_exponent_is_recovered_from_samples(domain: str) -> None:
    src = ZIPF_SOURCES[domain]
    words = _words(domain, 400_000)
    vocab = src.structure(0)
    assert len(set(vocab)) == src.num_words and all(len(w) == src.word_len for w in vocab)
    assert set(words) <= set(vocab)
    counts = Counter(words)
    rank = {w: k + 1 for k, w in enumerate(vocab)}  # the construction's ranks, not the sample's (no bias)
    top = [w for w in vocab[:64] if counts[w] >= 20]
    x = np.log([rank[w] for w in top])
    y = np.log([counts[w] for w in top])
    slope = np.polyfit(x, y, 1)[0]
    assert slope == pytest.approx(-(1 + src.alpha), abs=0.08)


def test_zipf_entropies_match_the_construction() -> None:
    fast, slow = ZIPF_SOURCES["zipf_fast"], ZIPF_SOURCES["zipf_slow"]
    for src in (fast, slow):
        p = src.probabilities
        assert p.sum() == pytest.approx(1.0) and np.all(np.diff(p) < 0)
        assert src.entropy_rate == pytest.approx(src.word_entropy / (src.word_len + 1))
        assert np.all(np.diff(src.cumulative()) > 0)  # every word keeps a chance
    counts = Counter(_words("zipf_fast", 300_000))
    n = sum(counts.values())
    plug_in = -sum(c / n * math.log(c / n) for c in counts.values())
    assert plug_in == pytest.approx(fast.word_entropy, abs=0.02)  # a small support: the plug-in estimate is close
    # once the words are known only the choice of the next word is left (within a word every letter is fixed)
    lines = _text("zipf_fast", 300_000).splitlines()
    assert _conditional_entropy(lines, fast.word_len) < fast.entropy_rate + 0.02
    assert _conditional_entropy(lines, 0) > 5 * fast.entropy_rate
    assert slow.entropy_rate > 2 * fast.entropy_rate


def _unlearned_slope(domain: str) -> float:
    """Hutter's model: a word is learned once seen ``c`` times (``c = 8`` here). The mass of the words not yet
    learned after ``n`` words, measured on the generated text at three sizes, against its expectation from the
    construction (Poisson counts); returns the log-log slope of the measured mass over ``n``."""
    src = ZIPF_SOURCES[domain]
    p = src.probabilities
    rank = {w: k for k, w in enumerate(src.structure(0))}
    words = _words(domain, 1_000_000)
    sizes = [len(words) // 16, len(words) // 4, len(words)]
    unlearned = []
    for n in sizes:
        counts = np.zeros(len(p))
        for w, c in Counter(words[:n]).items():
            counts[rank[w]] = c
        unlearned.append(float(p[counts < 8].sum()))
        assert unlearned[-1] == pytest.approx(float((p * poisson.cdf(7, n * p)).sum()), rel=0.1)
    return float(np.polyfit(np.log(sizes), np.log(unlearned), 1)[0])


def test_zipf_unlearned_mass_falls_as_power_laws_of_different_exponents() -> None:
    fast, slow = _unlearned_slope("zipf_fast"), _unlearned_slope("zipf_slow")
    # zipf_fast: the theory's n^(-alpha / (1 + alpha)) = n^-0.5 (its 1,024 words lie far beyond those learned)
    assert fast == pytest.approx(-0.5, abs=0.1)
    # zipf_slow: the theory's n^-0.2, a little steeper as the 16,384-word vocabulary ends; far flatter than fast
    assert -0.36 < slow < -0.2 and fast < slow - 0.15


def test_zipf_slow_keeps_more_to_learn_than_zipf_fast() -> None:
    fast, slow = ZIPF_SOURCES["zipf_fast"], ZIPF_SOURCES["zipf_slow"]
    assert fast.alpha / (1 + fast.alpha) > 2 * slow.alpha / (1 + slow.alpha)  # exponents 0.5 against 0.2
    # after the same text, far more of zipf_slow's mass lies in words seen fewer than 8 times
    for_fast, for_slow = (Counter(_words(d, 300_000)) for d in ZIPF_DOMAINS)
    p_fast = dict(zip(fast.structure(0), fast.probabilities, strict=True))
    p_slow = dict(zip(slow.structure(0), slow.probabilities, strict=True))
    left_fast = 1 - sum(q for w, q in p_fast.items() if for_fast[w] >= 8)
    left_slow = 1 - sum(q for w, q in p_slow.items() if for_slow[w] >= 8)
    assert left_slow > 10 * left_fast


def test_zipf_source_checks_its_sizes() -> None:
    with pytest.raises(ValueError, match="alpha must lie in"):
        ZipfSource(num_words=10, alpha=0.0, alphabet="abc")
    with pytest.raises(ValueError, match="too small for 100 distinct"):
        ZipfSource(num_words=100, alpha=1.0, alphabet="ab", word_len=3)
    with pytest.raises(ValueError, match="num_words must be positive, got 0"):
        ZipfSource(num_words=0, alpha=1.0, alphabet="ab")
