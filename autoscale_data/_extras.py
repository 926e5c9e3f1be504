"""Optional parts of the package and the error that names the extra to install.

``pip install autoscale-data`` gives the core (store, mixing, solver, dataset). The runner, the plots
and the file formats need more packages, installed by extras (``pip install
'autoscale-data[runner]'``). Which packages an extra holds is read from the installed package's own
metadata (``pyproject.toml`` is the one list), so a part that needs an extra checks it with
:func:`require` and fails at import with a :class:`MissingExtraError` that says what to install.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Sequence

__all__ = ["DISTRIBUTION", "MissingExtraError", "extra_packages", "missing_packages", "require"]

#: The distribution name on PyPI.
DISTRIBUTION = "autoscale-data"

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


class MissingExtraError(ImportError):
    """A part of the package was used whose extra is not installed.

    Attributes:
        part: what was used (``"autoscale_data.runner"``).
        extra: the extra that installs it (``"runner"``).
        missing: the distributions of that extra that are not installed.
    """

    def __init__(self, part: str, extra: str, missing: Sequence[str]) -> None:
        self.part, self.extra, self.missing = part, extra, tuple(missing)
        super().__init__(f"{part} needs the optional packages of the '{extra}' extra "
                         f"({', '.join(self.missing)} not installed): pip install '{DISTRIBUTION}[{extra}]'")


def extra_packages(extra: str, requirements: Sequence[str] | None = None) -> list[str]:
    """The distributions an extra installs, in the order declared, nested extras (``autoscale-data[plots]``)
    expanded; ``requirements``: ``Requires-Dist`` lines (default: the installed package's metadata; none
    found, as in a source tree never installed: empty)."""
    if requirements is None:
        try:
            requirements = importlib.metadata.requires(DISTRIBUTION) or []
        except importlib.metadata.PackageNotFoundError:
            return []
    out: list[str] = []
    for line in requirements:
        spec, _, marker = line.partition(";")
        found = _EXTRA_MARKER.search(marker)
        match = _NAME.match(spec)
        if found is None or found.group(1) != extra or match is None:
            continue
        name, nested = match.group(1), match.group(2)
        if name.lower().replace("_", "-") == DISTRIBUTION and nested:
            for inner in nested.split(","):
                out += [d for d in extra_packages(inner.strip(), requirements) if d not in out]
        elif name not in out:
            out.append(name)
    return out


def missing_packages(extra: str) -> list[str]:
    """The distributions of ``extra`` that are not installed."""
    missing = []
    for name in extra_packages(extra):
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def require(extra: str, part: str) -> None:
    """Raise :class:`MissingExtraError` naming ``part`` (``"autoscale_data.runner"``) unless every package of
    ``extra`` (``"runner"``) is installed."""
    missing = missing_packages(extra)
    if missing:
        raise MissingExtraError(part, extra, missing)
