"""A kept, copied or moved output folder trains nothing again, its anytime runs included.

The folder holds its tokenizer and its stores, as the demo writes them: the stores record the tokenizer by its
absolute path, so the path changes with the folder (a re-prepare there records the new one). Run ids hash the
tokenizer's fingerprint (the mixture plan names it so), never that path; an anytime run planned before, whose
id hashed the path, is found under its old id.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner import pipeline
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.pipeline import MixtureRunner

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore:DDO design")]


def _locate_tokenizer(folder: Path) -> None:
    """Each store names the tokenizer as ``prepare`` does a tokenizer file: its absolute path, in ``folder``."""
    for manifest in (folder / "data").glob("*/manifest.json"):
        m = json.loads(manifest.read_text())
        m["tokenizer"]["spec"] = os.fspath((folder / "tokenizer" / "tokenizer.json").resolve())
        manifest.write_text(json.dumps(m))


def _folder(folder: Path) -> Path:
    tiny_stores(folder / "data")
    _locate_tokenizer(folder)
    return folder


def _run(folder: Path, **model: str) -> tuple[list[str], dict[str, str]]:
    """Run the plan in ``folder`` (paths relative to it; ``model``: settings of the config's model section); its
    log lines and the target runs' label -> run id."""
    raw = tiny_config("data", target={"baselines": ["autoscale_anytime"]})
    raw["model"] = {**raw["model"], **model}
    lines: list[str] = []
    MixtureRunner(config_from_dict(raw, folder), folder, log=lines.append, progress=False).run()
    targets = json.loads((folder / "plan.json").read_text())["targets"]
    return lines, {t["label"]: t["run_id"] for t in targets}


def _trained(lines: list[str]) -> list[str]:
    return [line for line in lines if " done " in line]


def _move(folder: Path, to: Path) -> Path:
    shutil.move(folder, to)
    _locate_tokenizer(to)  # as re-preparing the stores there records the tokenizer
    return to


def test_a_moved_folder_trains_nothing_again(tmp_path: Path) -> None:
    first = _folder(tmp_path / "first")
    lines, ids = _run(first)
    assert _trained(lines) and set(ids) == {"autoscale", "autoscale_anytime"}
    anytime = json.loads((first / "runs" / ids["autoscale_anytime"] / "spec.json").read_text())
    fingerprint = json.loads((first / "data" / "a" / "manifest.json").read_text())["tokenizer"]["fingerprint"]
    assert anytime["plan"]["tokenizer"] == fingerprint  # not where the tokenizer lay
    moved = _move(first, tmp_path / "elsewhere" / "second")
    lines, again = _run(moved)
    assert _trained(lines) == [] and again == ids


def test_a_folder_written_before_keeps_every_run_id_in_place_and_moved(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Written before 2026-11-28: its plan named the tokenizer as the stores do, its GPT-2 ran gelu_new, and its
    config.json has no model.activation."""
    first = _folder(tmp_path / "first")
    real = pipeline.inspect_domains
    with monkeypatch.context() as m:
        m.setattr(pipeline, "inspect_domains", lambda c: replace(real(c), tokenizer_fingerprint=real(c).tokenizer))
        lines, old = _run(first, activation="gelu_new")
    config = json.loads((first / "config.json").read_text())
    del config["model"]["activation"]
    (first / "config.json").write_text(json.dumps(config))
    path = json.loads((first / "runs" / old["autoscale_anytime"] / "spec.json").read_text())["plan"]["tokenizer"]
    assert _trained(lines) and path == os.fspath((first / "tokenizer" / "tokenizer.json").resolve())
    lines, kept = _run(first)
    assert _trained(lines) == [] and kept == old
    lines, moved = _run(_move(first, tmp_path / "elsewhere" / "second"))
    assert _trained(lines) == [] and moved == old
