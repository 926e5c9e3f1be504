"""Process plumbing that needs no process group: stale extension-build locks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autoscale_data.runner.training.dist import clear_stale_build_locks


def _build_dir(root: Path, name: str, age_s: float) -> Path:
    build = root / name
    build.mkdir(parents=True)
    for f in ("lock", "shm.o", "build.ninja"):
        (build / f).touch()
        then = time.time() - age_s
        os.utime(build / f, (then, then))
    return build / "lock"


def test_only_locks_of_dead_builds_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    dead = _build_dir(tmp_path, "deepspeed_shm_comm", age_s=3600)
    live = _build_dir(tmp_path, "py311_cpu/other_op", age_s=5)
    with pytest.warns(RuntimeWarning, match="deepspeed_shm_comm"):
        removed = clear_stale_build_locks(max_idle_s=600)
    assert removed == [dead] and not dead.exists() and live.exists()
    assert clear_stale_build_locks(max_idle_s=600) == []  # nothing left to remove, no warning
