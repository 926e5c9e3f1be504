"""Synthetic sources of known entropy whose learning curves differ by construction (the ``shift`` case).

Three domains, each over its own alphabet of single ASCII characters (so that with the byte-level
tokenizer one symbol is one token and every entropy below is per token):

``motifs`` (learned fast, then saturates)
    Documents are runs of whole *motifs* separated by spaces: ``num_motifs`` fixed random strings
    over lowercase letters, each ``motif_len`` long, drawn uniformly. The support is tiny (only
    ``num_motifs`` distinct words ever occur), so a small model memorises it in a few hundred steps;
    after that only the choice of the next motif is left, ``ln(num_motifs) / (motif_len + 1)`` nats per
    token, and more data buys nothing.
``markov8`` (the middle)
    An order-2 Markov chain over 8 symbols: each of the 64 contexts of two symbols moves to one of
    ``branching`` successors fixed at random, uniformly. Entropy rate ``ln(branching)``; the previous
    symbol alone says little, so the loss stays near the unigram entropy until the model has seen
    the contexts often enough, then drops.
``markov12`` (keeps paying)
    The same over 12 symbols: 144 contexts, each with its own successors, so the drop comes later
    and needs more of the domain's tokens: its loss keeps falling long after ``motifs`` has flattened.

The ``zipf`` preset's domains (:data:`ZIPF_SOURCES`) are :class:`ZipfSource` vocabularies: ``num_words``
fixed random words drawn with Zipf frequencies ``P(k) ∝ k^-(1 + alpha)``. A model learns a word once it has
seen it some number of times, so the words still unknown after ``n`` tokens carry a share of the loss that
falls as a power law, ``n^(-alpha / (1 + alpha))`` (Hutter 2021, "Learning curve theory"), until the
rarest word is learned: the smaller ``alpha``, the slower and the longer the domain keeps paying. Two such
domains have per-domain power laws with different exponents, the case in which the best mix moves smoothly
with the budget.

Each source's structure (the motifs, the successor tables, the words) is a function of the seed alone; the
documents come from a separate generator. The motif and Markov sources use only integer draws and string
building; the Zipf source draws from an integer cumulative table built once from its frequencies, so the
same seed gives byte-identical text wherever ``numpy`` rounds ``k ** -(1 + alpha)`` alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["MarkovSource", "MotifSource", "SHIFT_SOURCES", "ZIPF_SOURCES", "ZipfSource"]


@dataclass(frozen=True)
class MotifSource:
    """Documents of whole motifs drawn uniformly from a small fixed set.

    Attributes:
        num_motifs: how many distinct motifs exist (the support).
        motif_len: characters per motif (each followed by a space).
        motifs_per_doc: motifs per document.
        alphabet: the characters motifs are spelt with.
    """

    num_motifs: int = 16
    motif_len: int = 12
    motifs_per_doc: int = 64
    alphabet: str = "abcdefghijklmnopqrstuvwxyz"

    def __post_init__(self) -> None:
        for name in ("num_motifs", "motif_len", "motifs_per_doc"):
            if getattr(self, name) < 1:
                raise ValueError(f"motif source {name} must be positive, got {getattr(self, name)}")
        if len(self.alphabet) ** self.motif_len < 4 * self.num_motifs or " " in self.alphabet:
            raise ValueError(f"motif alphabet {self.alphabet!r} is too small for {self.num_motifs} distinct "
                             f"motifs of {self.motif_len} characters (or holds the separator ' ')")

    @property
    def entropy_rate(self) -> float:
        """Nats per token once the motifs are known: one uniform choice per motif and its space."""
        return math.log(self.num_motifs) / (self.motif_len + 1)

    def structure(self, seed: int) -> list[str]:
        """The source's distinct motifs for ``seed``."""
        rng = np.random.default_rng([seed, 0x0517, 1])
        out: list[str] = []
        while len(out) < self.num_motifs:
            word = "".join(self.alphabet[int(j)]
                           for j in rng.integers(len(self.alphabet), size=self.motif_len))
            if word not in out:
                out.append(word)
        return out

    def document(self, structure: list[str], rng: np.random.Generator) -> str:
        """One document: ``motifs_per_doc`` motifs drawn uniformly, each followed by a space."""
        picks = rng.integers(len(structure), size=self.motifs_per_doc)
        return " ".join(structure[int(j)] for j in picks) + " \n"


@dataclass(frozen=True)
class MarkovSource:
    """An order-``order`` Markov chain whose every context moves uniformly to ``branching`` fixed successors.

    Attributes:
        alphabet: the symbols (one character each).
        order: how many previous symbols the next one depends on.
        branching: successors per context (drawn without replacement from the alphabet).
        doc_len: symbols per document (the first ``order`` uniform).
    """

    alphabet: str
    order: int
    branching: int = 2
    doc_len: int = 1024

    def __post_init__(self) -> None:
        if self.order < 1:
            raise ValueError(f"Markov source order must be positive, got {self.order}")
        if not 1 <= self.branching <= len(self.alphabet):
            raise ValueError(f"Markov source branching {self.branching} must lie in [1, "
                             f"{len(self.alphabet)}] (the alphabet {self.alphabet!r})")
        if len(set(self.alphabet)) != len(self.alphabet) or self.doc_len <= self.order:
            raise ValueError(f"Markov source alphabet {self.alphabet!r} must hold distinct symbols and "
                             f"doc_len {self.doc_len} must exceed the order {self.order}")

    @property
    def num_contexts(self) -> int:
        return len(self.alphabet) ** self.order

    @property
    def entropy_rate(self) -> float:
        """Nats per token after the first ``order`` symbols: every context's next symbol is uniform over
        ``branching``."""
        return math.log(self.branching)

    def structure(self, seed: int) -> np.ndarray:
        """``[num_contexts, branching]`` symbol indices: context ``c`` (base-``len(alphabet)`` digits, oldest
        first) moves to one of row ``c``."""
        rng = np.random.default_rng([seed, 0x0517, 2, self.order, len(self.alphabet)])
        a = len(self.alphabet)
        return np.stack([rng.choice(a, size=self.branching, replace=False) for _ in range(self.num_contexts)])

    def document(self, structure: np.ndarray, rng: np.random.Generator) -> str:
        """One document of ``doc_len`` symbols."""
        a = len(self.alphabet)
        head = rng.integers(a, size=self.order)
        picks = rng.integers(self.branching, size=self.doc_len - self.order).tolist()
        table = structure.tolist()
        ctx = 0
        for s in head.tolist():
            ctx = ctx * a + s
        wrap = a ** (self.order - 1)
        out = head.tolist()
        for p in picks:
            s = table[ctx][p]
            out.append(s)
            ctx = (ctx % wrap) * a + s
        return "".join(self.alphabet[s] for s in out) + "\n"


#: The ``shift`` case's domains: one that saturates, a middle one, one that keeps paying.
SHIFT_SOURCES: dict[str, MotifSource | MarkovSource] = {
    "motifs": MotifSource(),
    "markov8": MarkovSource(alphabet="ABCDEFGH", order=2),
    "markov12": MarkovSource(alphabet="IJKLMNOPQRST", order=2),
}


_ZIPF_SCALE = 1 << 40  # the integer cumulative table's total: frequencies to about 1e-12


@dataclass(frozen=True)
class ZipfSource:
    """Documents of words drawn from a fixed random vocabulary with Zipf frequencies ``P(k) ∝ k^-(1 +
    alpha)``.

    Attributes:
        num_words: the vocabulary's size ``K`` (word ``k`` has rank ``k + 1``).
        alpha: the Zipf tail's exponent: the learning curve's excess falls as ``n^(-alpha / (1 + alpha))``.
        word_len: characters per word (each followed by a space).
        words_per_doc: words per document.
        alphabet: the characters words are spelt with.
    """

    num_words: int
    alpha: float
    alphabet: str
    word_len: int = 5
    words_per_doc: int = 128

    def __post_init__(self) -> None:
        for name in ("num_words", "word_len", "words_per_doc"):
            if getattr(self, name) < 1:
                raise ValueError(f"Zipf source {name} must be positive, got {getattr(self, name)}")
        if not 0 < self.alpha <= 8:
            raise ValueError(f"Zipf source alpha must lie in (0, 8], got {self.alpha}")
        if len(self.alphabet) ** self.word_len < 4 * self.num_words or " " in self.alphabet or len(
                set(self.alphabet)) != len(self.alphabet):
            raise ValueError(f"Zipf alphabet {self.alphabet!r} is too small for {self.num_words} distinct "
                             f"words of {self.word_len} characters (or repeats a symbol or holds the "
                             "separator ' ')")

    @property
    def probabilities(self) -> np.ndarray:
        """``P(k)`` for ranks ``1 .. num_words``, normalised over the vocabulary."""
        p = np.arange(1, self.num_words + 1, dtype=np.float64) ** -(1.0 + self.alpha)
        return p / p.sum()

    @property
    def word_entropy(self) -> float:
        """Nats per word: the entropy of the Zipf choice."""
        p = self.probabilities
        return float(-(p * np.log(p)).sum())

    @property
    def entropy_rate(self) -> float:
        """Nats per token once every word is known: one Zipf choice per word and its space."""
        return self.word_entropy / (self.word_len + 1)

    def structure(self, seed: int) -> list[str]:
        """The source's distinct words for ``seed``, most frequent first."""
        rng = np.random.default_rng([seed, 0x0517, 3, self.num_words, len(self.alphabet)])
        out: list[str] = []
        seen: set[str] = set()
        while len(out) < self.num_words:
            word = "".join(self.alphabet[int(j)]
                           for j in rng.integers(len(self.alphabet), size=self.word_len))
            if word not in seen:
                seen.add(word)
                out.append(word)
        return out

    def cumulative(self) -> np.ndarray:
        """The integer cumulative table the draws search (strictly rising: every word keeps a chance)."""
        return _cumulative(self.num_words, self.alpha).copy()

    def document(self, structure: list[str], rng: np.random.Generator) -> str:
        """One document: ``words_per_doc`` words drawn by their Zipf frequencies, each followed by a space."""
        table = _cumulative(self.num_words, self.alpha)
        draws = rng.integers(int(table[-1]), size=self.words_per_doc, dtype=np.int64)
        picks = np.searchsorted(table, draws, side="right")
        return " ".join(structure[int(j)] for j in picks) + " \n"


@lru_cache(maxsize=16)
def _cumulative(num_words: int, alpha: float) -> np.ndarray:
    p = np.arange(1, num_words + 1, dtype=np.float64) ** -(1.0 + alpha)
    counts = np.maximum(1, np.rint(p / p.sum() * _ZIPF_SCALE).astype(np.int64))
    return np.cumsum(counts)


#: The ``zipf`` preset's domains: ``zipf_fast`` (steep tail, alpha 1: its unknown words' loss falls as
#: ``n^-0.5`` and is nearly gone within the target) against ``zipf_slow`` (flat tail, alpha 0.25 over 16,384
#: words: ``n^-0.2``, still paying at the target), each over its own 13 letters.
ZIPF_SOURCES: dict[str, ZipfSource] = {
    "zipf_fast": ZipfSource(num_words=1_024, alpha=1.0, alphabet="abcdefghijklm"),
    "zipf_slow": ZipfSource(num_words=16_384, alpha=0.25, alphabet="nopqrstuvwxyz"),
}
