"""The report: ``report.json`` and its typed records, ``report.md``, plots and the console summary.

``report`` builds and writes it from an output folder, ``report_types`` declares its shape,
``comparison`` the table of mixing methods, ``downstream`` the zero-shot tasks, ``metrics`` the numbers from
curves, ``reference`` the held-out reference losses, ``plots`` the PNGs, ``wording`` the shared sentences,
``summary`` the console table.
"""

from __future__ import annotations

__all__ = ["comparison", "downstream", "metrics", "plots", "reference", "report", "report_types", "summary",
           "wording"]
