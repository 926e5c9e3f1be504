"""The embedded demo corpus: a deterministic, synthetic multi-domain text generator.

Nothing here is real text and nothing is downloaded. A seeded :class:`numpy.random.Generator`
builds one small shared "world" — an invented lexicon of pronounceable words and a set of
invented entities with fixed facts — and four domains are sampled from it with very different
amounts of learnable diversity, so that a small language model's validation loss saturates at
visibly different rates on each (the way clean encyclopedic text saturates early while diverse web
text keeps paying off):

``encyclopedia``
    Short articles about a small closed set of invented entities, written from a handful of
    templates over a small vocabulary. Every fact about an entity is fixed, so once the templates
    and facts are learned there is little left to learn: the loss saturates early.
``qa``
    Question–answer pairs about the same entities and facts, in varied phrasings, with a little
    chit-chat drawn from the shared lexicon. Shares the encyclopedia's facts (training on one
    helps the other); saturates at a medium rate.
``code``
    A small Python-like language: functions, nested blocks with indentation, brackets, operators
    and numbers; identifiers are snake_case compounds of common lexicon words. Strong structure,
    medium vocabulary: medium saturation.
``web``
    Noisy text over the whole lexicon (thousands of words, Zipf-distributed, topic mixtures per
    document), with typos, random casing, numbers and URLs. Large vocabulary and high entropy: the
    loss keeps falling with more data long after the other domains have flattened.

The same ``seed`` always gives byte-identical output (on any machine: only integer draws and
plain string building are involved). Generation runs at a few MB per second.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path

import numpy as np

from .._checks import check_int
from .._io import atomic_write_text
from .sources import SHIFT_SOURCES, ZIPF_SOURCES

__all__ = ["DEMO_DOMAINS", "DOMAIN_DESCRIPTIONS", "SHIFT_DOMAINS", "SyntheticWorld", "ZIPF_DOMAINS",
           "generate_corpus",
           "generate_documents"]

DEMO_DOMAINS: tuple[str, ...] = ("encyclopedia", "qa", "code", "web")
#: The ``shift`` case's domains (:mod:`autoscale_data.demo.sources`): their learning curves differ by
#: construction, so the best mix moves with the budget.
SHIFT_DOMAINS: tuple[str, ...] = tuple(SHIFT_SOURCES)
#: The shift case's ``zipf`` preset's domains: Zipf vocabularies whose learning curves are power laws with
#: different exponents (:data:`~autoscale_data.demo.sources.ZIPF_SOURCES`).
ZIPF_DOMAINS: tuple[str, ...] = tuple(ZIPF_SOURCES)
_SOURCES = {**SHIFT_SOURCES, **ZIPF_SOURCES}
_ALL_DOMAINS = DEMO_DOMAINS + SHIFT_DOMAINS + ZIPF_DOMAINS  # appended: a domain's sampler seed is its index

DOMAIN_DESCRIPTIONS: dict[str, str] = {
    "encyclopedia": "synthetic: templated articles about a small closed set of invented entities "
                    "with fixed facts (small vocabulary, low entropy; saturates early)",
    "qa": "synthetic: question-answer pairs about the encyclopedia's entities and facts in varied "
          "phrasings, plus chit-chat from the shared lexicon (shares facts; medium saturation)",
    "code": "synthetic: a small Python-like language with nested indented blocks, brackets and "
            "operators; identifiers are compounds of common lexicon words (medium saturation)",
    "web": "synthetic: noisy Zipf-distributed text over the whole invented lexicon with topic "
           "mixtures, typos, casing noise, numbers and URLs (high entropy; keeps paying off)",
    "motifs": "synthetic: whole motifs from a small fixed set separated by spaces (tiny support, "
              "low entropy; learned fast, then saturates)",
    "markov8": "synthetic: an order-2 Markov chain over 8 symbols, 2 fixed successors per context "
               "(64 contexts; the middle)",
    "markov12": "synthetic: an order-2 Markov chain over 12 symbols, 2 fixed successors per context "
                "(144 contexts; learned late, keeps paying at larger budgets)",
    "zipf_fast": "synthetic: 1,024 fixed 5-letter words with Zipf frequencies k^-2 (steep tail: its "
                 "learning curve falls as n^-0.5 and flattens early)",
    "zipf_slow": "synthetic: 16,384 fixed 5-letter words with Zipf frequencies k^-1.25 (flat tail: its "
                 "learning curve falls as n^-0.2; keeps paying at larger budgets)",
}

_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "ch", "dr", "gl", "kr", "pl", "sh", "st", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou")
_CODAS = ("", "", "", "n", "r", "s", "l", "t", "m", "nd", "st")
_KINDS = ("river", "city", "mountain", "festival", "guild", "language", "bridge", "island")
_ENC_TEMPLATES = (
    "{name} is {a_kind} in {region}.",
    "{name} was first recorded in {year}.",
    "{name} is known for its {good}.",
    "The {kind} was founded by {founder}.",
    "{name} lies near {near}.",
    "About {count} people live around {name}.",
    "Each year {name} trades {good} with {near}.",
)
_QA_TEMPLATES = (
    ("Where is {name}?", "{name} is in {region}."),
    ("In which region can {name} be found?", "It can be found in {region}."),
    ("What kind of place is {name}?", "{name} is {a_kind}."),
    ("When was {name} first recorded?", "It was first recorded in {year}."),
    ("Who founded {name}?", "{name} was founded by {founder}."),
    ("What is {name} known for?", "It is known for its {good}."),
    ("What lies near {name}?", "{near} lies near {name}."),
    ("How many people live around {name}?", "About {count} people."),
)
_CODE_OPS = (" + ", " - ", " * ", " // ", " % ")
_CODE_CMP = (" < ", " > ", " == ", " != ", " <= ")


@dataclass(frozen=True)
class _Entity:
    name: str
    kind: str
    region: str
    year: int
    good: str
    founder: str
    near: str
    count: int

    @property
    def facts(self) -> dict[str, object]:
        """Template fields: every fact plus the kind with its article (``an island``)."""
        article = "an" if self.kind[0] in "aeiou" else "a"
        return {**vars(self), "a_kind": f"{article} {self.kind}"}


class SyntheticWorld:
    """The shared lexicon and entity facts that every domain draws from.

    Args:
        seed: seed of the world (the same seed gives the same words and facts).
        num_words: size of the invented lexicon (``web`` uses all of it).
        num_entities: how many entities the encyclopedia and the Q&A talk about.
    """

    def __init__(self, seed: int = 0, *, num_words: int = 6000, num_entities: int = 24) -> None:
        if num_words < 500:
            raise ValueError(f"num_words must be at least 500, got {num_words}")
        if num_entities < 4:
            raise ValueError(f"num_entities must be at least 4, got {num_entities}")
        rng = np.random.default_rng([seed, 0x5EED])
        self.words: list[str] = _make_words(rng, num_words)
        # Zipf-like unigram distribution over the lexicon (rank order = list order).
        ranks = np.arange(1, num_words + 1, dtype=np.float64)
        zipf = ranks ** -1.05
        self.word_p = zipf / zipf.sum()
        names = [w.capitalize() for w in _make_words(rng, num_entities + 40, exclude=set(self.words))]
        regions, persons, ent_names = names[:16], names[16:40], names[40:]
        goods = self.words[50:80]
        self.entities: list[_Entity] = []
        for i, name in enumerate(ent_names):
            self.entities.append(_Entity(
                name=name,
                kind=_KINDS[int(rng.integers(len(_KINDS)))],
                region=regions[int(rng.integers(len(regions)))],
                year=int(rng.integers(1100, 1900)),
                good=goods[int(rng.integers(len(goods)))],
                founder=persons[int(rng.integers(len(persons)))],
                near=ent_names[(i + 1 + int(rng.integers(len(ent_names) - 1))) % len(ent_names)],
                count=int(rng.integers(2, 90)) * 100,
            ))
        # Topics for web text: each topic prefers its own random subset of the lexicon.
        self.num_topics = 24
        self.topic_words = [rng.choice(num_words, size=300, replace=False, p=self.word_p)
                            for _ in range(self.num_topics)]
        # Code identifiers: compounds of the 400 most frequent words.
        self.identifiers = sorted({
            "_".join(self.words[int(j)] for j in rng.integers(0, 400, size=int(rng.integers(1, 3))))
            for _ in range(500)
        })


@lru_cache(maxsize=4)
def _default_world(seed: int) -> SyntheticWorld:
    """The default-sized world of ``seed``, built once per process: building one takes seconds and every
    caller only reads it (the demo, the scarce case and the runner tests' stores each ask for seed 0)."""
    return SyntheticWorld(seed)


def _make_words(rng: np.random.Generator, n: int, exclude: set[str] | None = None) -> list[str]:
    seen: set[str] = set(exclude or ())
    out: list[str] = []
    while len(out) < n:
        syl = int(rng.choice([1, 2, 2, 3, 3, 4]))
        word = "".join(_ONSETS[int(rng.integers(len(_ONSETS)))] + _VOWELS[int(rng.integers(len(_VOWELS)))]
                       + _CODAS[int(rng.integers(len(_CODAS)))] for _ in range(syl))
        if word not in seen and len(word) <= 12:
            seen.add(word)
            out.append(word)
    return out


def _encyclopedia_doc(world: SyntheticWorld, rng: np.random.Generator) -> str:
    ent = world.entities[int(rng.integers(len(world.entities)))]
    order = rng.permutation(len(_ENC_TEMPLATES))[: int(rng.integers(3, len(_ENC_TEMPLATES) + 1))]
    facts = ent.facts
    return f"== {ent.name} ==\n" + " ".join(_ENC_TEMPLATES[int(k)].format(**facts) for k in order) + "\n"


def _qa_doc(world: SyntheticWorld, rng: np.random.Generator) -> str:
    lines = []
    for _ in range(int(rng.integers(2, 6))):
        if rng.random() < 0.25:  # chit-chat over common words
            words = [world.words[int(j)] for j in rng.choice(300, size=int(rng.integers(3, 8)))]
            lines.append(f"Q: Do you like {' '.join(words[:-1])}?\nA: Yes, {words[-1]}.")
            continue
        ent = world.entities[int(rng.integers(len(world.entities)))]
        q, a = _QA_TEMPLATES[int(rng.integers(len(_QA_TEMPLATES)))]
        lines.append(f"Q: {q.format(**ent.facts)}\nA: {a.format(**ent.facts)}")
    return "\n".join(lines) + "\n"


def _code_expr(world: SyntheticWorld, rng: np.random.Generator, names: Sequence[str]) -> str:
    a = names[int(rng.integers(len(names)))]
    b = names[int(rng.integers(len(names)))] if rng.random() < 0.6 else str(int(rng.integers(0, 100)))
    return a + _CODE_OPS[int(rng.integers(len(_CODE_OPS)))] + b


def _code_block(world: SyntheticWorld, rng: np.random.Generator, names: list[str], depth: int,
                out: list[str]) -> None:
    pad = "    " * depth
    for _ in range(int(rng.integers(1, 4))):
        r = rng.random()
        if r < 0.2 and depth < 3:
            cond = names[int(rng.integers(len(names)))] + _CODE_CMP[int(rng.integers(len(_CODE_CMP)))] + \
                str(int(rng.integers(0, 50)))
            out.append(f"{pad}if {cond}:")
            _code_block(world, rng, names, depth + 1, out)
        elif r < 0.35 and depth < 3:
            var = world.identifiers[int(rng.integers(len(world.identifiers)))]
            out.append(f"{pad}for {var} in range({int(rng.integers(1, 20))}):")
            _code_block(world, rng, names + [var], depth + 1, out)
        elif r < 0.5:
            fn = world.identifiers[int(rng.integers(len(world.identifiers)))]
            args = ", ".join(names[int(rng.integers(len(names)))] for _ in range(int(rng.integers(0, 3))))
            out.append(f"{pad}{fn}({args})")
        else:
            var = world.identifiers[int(rng.integers(len(world.identifiers)))]
            out.append(f"{pad}{var} = {_code_expr(world, rng, names)}")
            names.append(var)
    out.append(f"{pad}return {names[int(rng.integers(len(names)))]}")


def _code_doc(world: SyntheticWorld, rng: np.random.Generator) -> str:
    fn = world.identifiers[int(rng.integers(len(world.identifiers)))]
    params = [world.identifiers[int(j)]
              for j in rng.integers(len(world.identifiers), size=int(rng.integers(1, 4)))]
    out = [f"def {fn}({', '.join(params)}):"]
    _code_block(world, rng, list(params), 1, out)
    return "\n".join(out) + "\n\n"


def _web_doc(world: SyntheticWorld, rng: np.random.Generator) -> str:
    n_words = int(rng.integers(40, 160))
    topics = rng.integers(world.num_topics, size=2)
    glob = rng.choice(len(world.words), size=n_words, p=world.word_p)
    topical = np.concatenate([world.topic_words[int(t)] for t in topics])
    topic_pick = topical[rng.integers(len(topical), size=n_words)]
    idx = np.where(rng.random(n_words) < 0.5, glob, topic_pick)
    noise = rng.random((n_words, 4))
    parts: list[str] = []
    start = True
    for k, j in enumerate(idx):
        w = world.words[int(j)]
        if noise[k, 0] < 0.03:  # typo: replace one letter
            pos = int(noise[k, 1] * len(w))
            w = w[:pos] + chr(97 + int(noise[k, 2] * 26)) + w[pos + 1:]
        if start or noise[k, 3] < 0.02:
            w = w.capitalize() if noise[k, 2] < 0.8 else w.upper()
        start = False
        if noise[k, 1] < 0.02:
            w = f"www.{w}.com"
        elif noise[k, 2] < 0.03:
            w = str(int(noise[k, 3] * 10000))
        if noise[k, 3] > 0.9:
            w += "." if noise[k, 1] < 0.7 else ("!" if noise[k, 1] < 0.85 else "?")
            start = True
        elif noise[k, 3] > 0.85:
            w += ","
        parts.append(w)
    return " ".join(parts) + "\n"


_GENERATORS = {"encyclopedia": _encyclopedia_doc, "qa": _qa_doc, "code": _code_doc, "web": _web_doc}


def generate_documents(domain: str, num_bytes: int, *, seed: int = 0,
                       world: SyntheticWorld | None = None) -> Iterator[str]:
    """Yield documents of one synthetic domain until at least ``num_bytes`` bytes were produced.

    Args:
        domain: one of :data:`DEMO_DOMAINS`, :data:`SHIFT_DOMAINS` or :data:`ZIPF_DOMAINS`.
        num_bytes: stop after the document that reaches this many UTF-8 bytes (all text is ASCII).
        seed: seed of the world and of the domain's sampler.
        world: a prebuilt :class:`SyntheticWorld` for ``seed`` (built when omitted; the shift domains need
            none).

    Yields:
        One document per item (text ending in a newline).
    """
    if domain not in _ALL_DOMAINS:
        raise ValueError(f"unknown demo domain {domain!r}: expected one of {', '.join(_ALL_DOMAINS)}")
    if num_bytes <= 0:
        raise ValueError(f"num_bytes must be positive, got {num_bytes}")
    rng = np.random.default_rng([seed, _ALL_DOMAINS.index(domain) + 1])
    make: Callable[[np.random.Generator], str]
    if domain in _SOURCES:  # a source of known entropy needs no world
        source = _SOURCES[domain]
        make = partial(source.document, source.structure(seed))  # type: ignore[arg-type]
    else:
        make = partial(_GENERATORS[domain], world or _default_world(seed))
    produced = 0
    while produced < num_bytes:
        doc = make(rng)
        produced += len(doc)
        yield doc


def generate_corpus(out_dir: str | os.PathLike[str], *, bytes_per_domain: int = 1_000_000, seed: int = 0,
                    domains: Sequence[str] = DEMO_DOMAINS) -> dict[str, Path]:
    """Write one JSONL file per synthetic domain (``{"text": ..., "source": ...}`` per line).

    Files are written atomically, so an interrupted call leaves no partial file. A file that
    already exists with the same generator parameters (recorded in ``corpus.json``) is reused.

    Args:
        out_dir: directory to write ``<domain>.jsonl`` and ``corpus.json`` into.
        bytes_per_domain: text bytes per domain (documents are whole, so slightly more).
        seed: generator seed; the same seed gives byte-identical files.
        domains: which of :data:`DEMO_DOMAINS`, :data:`SHIFT_DOMAINS` and :data:`ZIPF_DOMAINS` to write.

    Returns:
        Mapping from domain name to its JSONL path.
    """
    check_int("bytes_per_domain", bytes_per_domain)
    unknown = [d for d in domains if d not in _ALL_DOMAINS]
    if unknown or not domains:
        raise ValueError(f"unknown or empty demo domains {list(domains)!r}: expected a subset of "
                         f"{', '.join(_ALL_DOMAINS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    params = {"generator": "autoscale_data.demo.corpus", "version": 1, "seed": seed,
              "bytes_per_domain": bytes_per_domain}
    meta_path = out / "corpus.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (FileNotFoundError, ValueError):
        meta = {}
    done = meta.get("domains", {}) if meta.get("params") == params else {}
    world = _default_world(seed) if set(domains) - set(_SOURCES) else None
    paths: dict[str, Path] = {}
    for name in domains:
        path = out / f"{name}.jsonl"
        paths[name] = path
        if name in done and path.is_file() and path.stat().st_size == done[name]["file_bytes"]:
            continue
        lines = [json.dumps({"text": doc, "source": f"synthetic:{name}"})
                 for doc in generate_documents(name, bytes_per_domain, seed=seed, world=world)]
        atomic_write_text(path, "\n".join(lines) + "\n")
        done[name] = {"file_bytes": path.stat().st_size, "documents": len(lines),
                      "description": DOMAIN_DESCRIPTIONS[name]}
        atomic_write_text(meta_path, json.dumps({"params": params, "domains": done}, indent=2) + "\n")
    return paths
