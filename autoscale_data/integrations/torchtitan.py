"""torchtitan: a ``BaseDataLoader`` (and its ``Config``) that a torchtitan training config can name.

torchtitan's ``Trainer`` builds its loader with ``config.dataloader.build(...)``, checkpoints it as
``"dataloader"`` and pulls exactly the batches of each step, so the state after the batches handed
out is the state after the last step (docs/ecosystem.md)::

    from autoscale_data.integrations.torchtitan import MixtureTitanDataLoader

    config = Trainer.Config(
        ...,
        dataloader=MixtureTitanDataLoader.Config(
            dataset_path="stores/", weights={"web": 0.7, "code": 0.3}, budget_tokens=10**10),
    )

``input`` and ``labels`` are the sequence and the sequence shifted by one, ``training.seq_len``
tokens each (the dataset is built with ``seq_len + 1``). The loader runs pass after pass
(``infinite=True``, as torchtitan's text loaders do) or stops after one. The domains of the batch
just yielded are in :attr:`MixtureTitanDataLoader.last_domains` (for
:class:`~autoscale_data.dataset.DomainLossMeter`; ``input_dict`` holds only the tokens, because
the trainer passes its other entries to the model). The state is the global stream position, one
JSON string (checkpoint formats store it as one object): it resumes under any data-parallel size.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ._loader import require_library

require_library("torchtitan", "autoscale_data.integrations.torchtitan", "torchtitan", "torchtitan")

from torchtitan.components.dataloader import BaseDataLoader  # noqa: E402

from ..dataset import ScaleAwareMixtureDataset  # noqa: E402
from ._loader import MixtureLoader  # noqa: E402

__all__ = ["MixtureTitanDataLoader"]

_STATE_KEY = "autoscale_data.mixture"


class MixtureTitanDataLoader(BaseDataLoader):
    """The mixture stream as a torchtitan data loader (built by ``Config.build(...)`` in the trainer).

    Args:
        config: the :class:`MixtureTitanDataLoader.Config`.
        dp_world_size, dp_rank: the data-parallel layout (the trainer's batch degree and rank).
        seq_len: tokens per training sequence (``training.seq_len``).
        local_batch_size: sequences per batch on this rank.
        tokenizer, snapshot_every_n_steps: passed by the trainer; not needed (the stores are
            tokenized, and the state is exact at every step).
    """

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        """``dataset_path``: a prepare output directory (one store per domain); ``weights``: name ->
        weight."""

        weights: dict[str, float] = field(default_factory=dict)
        """Domain name -> weight (summing to 1)."""

        budget_tokens: int = 0
        """Training tokens in one pass of the stream."""

        seed: int = 0
        """Seeds the per-domain orders."""

        num_workers: int = 0
        """DataLoader worker processes."""

        infinite: bool = True
        """Start a new pass when one ends (else the loader ends after one)."""

        max_epochs: float | None = None
        """Allow domains to repeat up to this many epochs within a pass."""

    def __init__(self, config: Config, *, dp_world_size: int, dp_rank: int, seq_len: int,
                 local_batch_size: int,
                 tokenizer: Any = None, snapshot_every_n_steps: int | None = None, **kwargs: Any) -> None:
        if not config.dataset_path or not config.weights or config.budget_tokens <= 0:
            raise ValueError("MixtureTitanDataLoader.Config needs dataset_path (a directory of stores), "
                             f"weights and a positive budget_tokens; got "
                             f"dataset_path={config.dataset_path!r}, weights={config.weights!r}, "
                             f"budget_tokens={config.budget_tokens!r}")
        self.config = config
        dataset = ScaleAwareMixtureDataset(config.dataset_path, dict(config.weights), config.budget_tokens,
                                           seq_len + 1, config.seed, batch_size=local_batch_size,
                                           rank=dp_rank,
                                           world_size=dp_world_size, max_epochs=config.max_epochs)
        self.loader = MixtureLoader(dataset, num_workers=config.num_workers)
        self.dp_rank, self.dp_world_size = dp_rank, dp_world_size
        self.last_domains: torch.Tensor | None = None

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        while True:
            yielded = False
            for batch in self.loader:
                yielded = True
                ids = batch["input_ids"].long()
                self.last_domains = batch["domain"]
                yield {"input": ids[:, :-1]}, ids[:, 1:]
            if not (self.config.infinite and yielded):
                return

    def state_dict(self) -> dict[str, Any]:
        """``{"autoscale_data.mixture": JSON}``: the stream position after the batches yielded so far."""
        return {_STATE_KEY: json.dumps(self.loader.state_dict())}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s value (any data-parallel size); an empty state is a fresh start.

        Raises:
            ValueError: a state of another loader or another mixture.
        """
        if not state_dict:
            return
        if _STATE_KEY not in state_dict:
            raise ValueError(f"not a MixtureTitanDataLoader state: keys {sorted(state_dict)}, expected "
                             f"{_STATE_KEY!r}")
        self.loader.load_state_dict(json.loads(state_dict[_STATE_KEY]))
