"""The stream a :class:`~autoscale_data.dataset.ScaleAwareMixtureDataset` draws from, whatever decides it.

One kind a module: a fixed mix (``_fixed``) and phases or the anytime path (``_phased``), both in closed form,
and online mixing (``_online_stream``, provided by :class:`~autoscale_data.dataset.OnlineMixture` through
``use_stream``). The dataset owns its stream and a stream never touches the dataset. As in torchdata.nodes,
the dataset's state holds the stream's own entries (:meth:`MixtureSource.get_state`) and
:meth:`MixtureSource.reset` takes them back; the defaults here are a closed-form stream's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

__all__ = ["CONTINUED_KEY", "MixtureSource", "ONLINE_CONFIG_KEY", "SEQUENCES_KEY", "STREAM_CONFIG_KEYS"]

# The dataset config's entries that a stream writes (MixtureSource.config_entries), each spelt here only.
SEQUENCES_KEY = "sequences"  # domain name -> sequences of the whole closed-form stream
CONTINUED_KEY = "continued_from"  # the cursor, counts and fingerprint a continued run started from
ONLINE_CONFIG_KEY = "online"  # an online mixture's configuration (every, lookahead, controller, initial mix)
STREAM_CONFIG_KEYS = (SEQUENCES_KEY, CONTINUED_KEY, ONLINE_CONFIG_KEY)


class MixtureSource(Protocol):
    """Positions to ``(domain, sequence)`` and prefix counts, with the stream's config entries and state.

    Attributes:
        chunk: stream positions (per worker) the dataset looks up at once.
        origin: where a pass starts by default (0, or the cursor a continued run starts from).
        origin_step: the training step at ``origin`` (0, or ``None`` when unknown: a continued run).
        continuable: whether a run of another configuration can be continued on this stream.
        nbytes: bytes of the stream's tables.
    """

    chunk: int
    origin: int
    origin_step: int | None = 0
    continuable: bool = True
    nbytes: int

    def lookup(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def domain_counts(self, cursor: int) -> np.ndarray: ...

    def phase_at(self, cursor: int) -> int: ...

    def config_entries(self) -> dict[str, Any]:
        """This stream's entries of the dataset's config (:data:`STREAM_CONFIG_KEYS`; in its fingerprint)."""
        ...

    def continued(self, record: Mapping[str, Any]) -> MixtureSource:
        """This configuration's stream continued at ``record``'s cursor and per-domain counts.

        Raises:
            ValueError: this stream cannot continue there (or at all).
        """
        ...

    def same_stream(self, saved: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
        """Whether a state saved under ``saved`` (another fingerprint than ``config``'s) is of this stream."""
        return False

    def get_state(self) -> dict[str, Any]:
        """This stream's own entries of the dataset's state."""
        return {}

    def reset(self, state: Mapping[str, Any], continue_run: bool) -> None:
        """Take this stream's entries back from a dataset state of its config, before the dataset resumes.

        Raises:
            ValueError: the entries are missing or do not fit this stream.
        """
