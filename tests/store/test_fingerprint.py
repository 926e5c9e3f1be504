"""A store's fingerprint (what enters every run id) is its data's, not where its text lay.

An output folder holds its corpus and its stores (as the demo writes them). Copying that folder, or
preparing the same text from another path, must give every store the fingerprint it had, so that no
finished run is trained again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from runner_helpers import tiny_config

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.store import prepare

pytestmark = pytest.mark.timeout(60)


def _folder(root: Path) -> Path:
    """``root/corpus`` (two domains of JSONL text) prepared into ``root/data``; returns ``root/data``."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name, word in (("a", "alpha"), ("b", "beta")):
        lines = (json.dumps({"text": f"{word} {i} " * (i % 7 + 1)}) for i in range(400))
        (corpus / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return _prepare(root)


def _prepare(root: Path) -> Path:
    prepare({n: root / "corpus" / f"{n}.jsonl" for n in "ab"}, root / "data", "bytes", workers=1, progress=False)
    return root / "data"


def _fingerprints(data: Path) -> dict[str, str]:
    return inspect_domains(config_from_dict(tiny_config(data))).fingerprints


def _manifests(data: Path) -> dict[str, bytes]:
    return {n: (data / n / "manifest.json").read_bytes() for n in "ab"}


@pytest.mark.parametrize("touch", [False, True], ids=["mtimes-kept", "mtimes-new"])
def test_a_copied_folder_keeps_its_fingerprints(tmp_path: Path, touch: bool) -> None:
    before = _fingerprints(_folder(tmp_path / "first"))
    shutil.copytree(tmp_path / "first", tmp_path / "copy")
    if touch:  # a copy that does not keep modification times: the text is tokenized again, to the same tokens
        for f in (tmp_path / "copy" / "corpus").iterdir():
            os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    copied = _manifests(tmp_path / "copy" / "data")
    assert _fingerprints(_prepare(tmp_path / "copy")) == before
    if not touch:  # nothing changed: the copied manifests are kept as they are
        assert _manifests(tmp_path / "copy" / "data") == copied


def test_the_same_text_prepared_from_elsewhere_has_the_same_fingerprints(tmp_path: Path) -> None:
    before = _fingerprints(_folder(tmp_path / "first"))
    assert _fingerprints(_folder(tmp_path / "elsewhere" / "second")) == before


def test_re_preparing_an_unchanged_folder_rewrites_no_manifest(tmp_path: Path) -> None:
    data = _folder(tmp_path)
    before = _manifests(data)
    _prepare(tmp_path)
    assert _manifests(data) == before


def test_a_manifest_written_before_version_2_keeps_its_fingerprint_and_is_not_rewritten(tmp_path: Path) -> None:
    """Version 1 (before 2026-11-28): the source recorded absolute paths and the fingerprint was the SHA-256 of
    the manifest's bytes. Such a store, its inputs unchanged, is kept as it is, with the fingerprint it had."""
    data = _folder(tmp_path)
    for n in "ab":  # the manifest as version 1 wrote it
        text = tmp_path / "corpus" / f"{n}.jsonl"
        manifest = json.loads((data / n / "manifest.json").read_text())
        files = [[os.fspath(text.resolve()), text.stat().st_size, text.stat().st_mtime_ns]]
        desc = {"files": files, "tokenizer": manifest["tokenizer"]["fingerprint"], "holdout": manifest["holdout"],
                "text_field": "text", "shard_tokens": 1 << 27}
        digest = hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()
        manifest.update(version=1, source={"path": os.fspath(text.resolve()), "num_files": 1, "text_field": "text",
                                           "fingerprint": digest})
        (data / n / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    before = _manifests(data)
    assert _fingerprints(_prepare(tmp_path)) == {n: hashlib.sha256(before[n]).hexdigest()[:16] for n in "ab"}
    assert _manifests(data) == before


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_copied_experiment_folder_resumes_without_training_a_run(tmp_path: Path) -> None:
    """The demo's layout (text, stores, config and runs in one folder): run, copy the folder, run the copy."""
    from autoscale_data.demo import prepare_synthetic_stores
    from autoscale_data.runner.config import load_config
    from autoscale_data.runner.pipeline import MixtureRunner

    def run(folder: Path) -> list[str]:
        prepare_synthetic_stores(folder / "data", domains=["encyclopedia", "web"], bytes_per_domain=40_000,
                                 holdout_every=10)
        lines: list[str] = []
        MixtureRunner(load_config(folder / "config.json"), folder / "out", log=lines.append, progress=False).run()
        return lines

    (tmp_path / "first").mkdir()
    (tmp_path / "first" / "config.json").write_text(json.dumps(tiny_config("data", target={"baselines": ["uniform"]})))
    assert any(" done " in line for line in run(tmp_path / "first"))
    shutil.copytree(tmp_path / "first", tmp_path / "copy")
    assert not [line for line in run(tmp_path / "copy") if " done " in line]
