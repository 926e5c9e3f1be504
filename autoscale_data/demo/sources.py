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

Each source's structure (the motifs, the successor tables) is a function of the seed alone; the
documents come from a separate generator. Only integer draws and string building are involved, so
the same seed gives byte-identical text on any machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["MarkovSource", "MotifSource", "SHIFT_SOURCES"]


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
            word = "".join(self.alphabet[int(j)] for j in rng.integers(len(self.alphabet), size=self.motif_len))
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
