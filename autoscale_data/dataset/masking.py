"""Masked-LM training from the mixture: the runner's BERT masking, public and seeded per sample.

The mixture's samples carry ``labels`` = ``input_ids`` (a causal LM shifts them itself). Handing them
unchanged to a masked LM (``BertForMaskedLM``) trains a copy task: mask them first.
:class:`MaskedLMCollator` does, as a ``collate_fn`` of a ``DataLoader``, a Hugging Face
``data_collator``, or a transform of a batch a :class:`~autoscale_data.integrations.MixtureLoader`
yields (docs/dataset.md shows it in a loop).

Each sample's mask is drawn from a generator seeded by ``(seed, domain, seq_index)``: it depends on the
sample alone, not on the batch, the worker or the step, so a run resumed from a saved dataset state
masks every later sample exactly as the uninterrupted run did. (A sequence read again in a later
epoch gets the same mask: static masking, as in the original BERT; change ``seed`` per epoch to vary it.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .._checks import check_int

__all__ = ["MaskedLMCollator", "mask_tokens"]


def mask_tokens(input_ids: torch.Tensor, *, vocab_size: int, mask_id: int, probability: float,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT-style masking: pick ``probability`` of positions; of those 80% -> mask, 10% -> random, 10% kept.

    The runner masks its BERT batches with it.

    Args:
        input_ids: ``[batch, seq]`` token ids.
        vocab_size: random replacements are drawn from ``[0, vocab_size)``.
        mask_id: the id used as ``[MASK]``.
        probability: fraction of positions to predict (0.15 in BERT).
        generator: random source (on the tensors' device) for reproducible masks.

    Returns:
        ``(masked_inputs, labels)`` where labels are ``-100`` at positions not predicted.
    """
    device = input_ids.device
    shape = input_ids.shape
    chosen = torch.rand(shape, generator=generator, device=device) < probability
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    roll = torch.rand(shape, generator=generator, device=device)
    to_mask = chosen & (roll < 0.8)
    to_random = chosen & (roll >= 0.8) & (roll < 0.9)
    random_ids = torch.randint(0, vocab_size, shape, generator=generator, device=device,
                               dtype=input_ids.dtype)
    masked = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    masked = torch.where(to_random, random_ids, masked)
    return masked, labels


class MaskedLMCollator:
    """Collate mixture samples into a masked-LM batch whose masks are a function of each sample.

    Args:
        vocab_size: the stores' tokenizer vocabulary (random replacements come from ``[0, vocab_size)``).
        mask_id: the ``[MASK]`` id; default ``vocab_size`` (one past the tokenizer's ids, as the runner
            does: give the model ``vocab_size + 1`` embeddings), or a tokenizer's own ``[MASK]`` id.
        probability: share of positions predicted (0.15).
        seed: the masks' seed; the same seed gives the same mask to the same sample in any run.
        model_inputs_only: return only ``input_ids`` and ``labels`` (for a model whose ``forward``
            takes no ``domain``/``seq_index``, e.g. under HF ``Trainer`` with
            ``remove_unused_columns=False``).

    Called with a list of samples (``{"input_ids", "domain", "seq_index", ...}``, what a ``DataLoader``
    hands its ``collate_fn``) or with a batch dict already collated; returns a dict with ``input_ids``
    (int64, masked) and ``labels`` (int64, ``-100`` where not predicted), and the other keys as given.

    Raises:
        ValueError: a bad setting, or a batch without ``domain`` and ``seq_index`` (the mask's key).
    """

    def __init__(self, vocab_size: int, *, mask_id: int | None = None, probability: float = 0.15,
                 seed: int = 0,
                 model_inputs_only: bool = False) -> None:
        check_int("vocab_size", vocab_size)
        check_int("seed", seed, minimum=0)
        if mask_id is not None:
            check_int("mask_id", mask_id, minimum=0)
        if not isinstance(probability, (int, float)) or not 0.0 < float(probability) < 1.0:
            raise ValueError(f"probability = {probability!r} is invalid: expected a number in (0, 1)")
        self.vocab_size, self.seed, self.probability = vocab_size, seed, float(probability)
        self.mask_id = vocab_size if mask_id is None else mask_id
        self.model_inputs_only = model_inputs_only

    def row_seed(self, domain: int, seq_index: int) -> int:
        """The generator seed of one sample's mask."""
        return int(np.random.SeedSequence([self.seed, int(domain),
                                           int(seq_index)]).generate_state(2, np.uint64)[0]
                   >> np.uint64(1))

    def __call__(self, batch: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(batch, Mapping):
            batch = torch.utils.data.default_collate(list(batch))
        missing = [k for k in ("input_ids", "domain", "seq_index") if k not in batch]
        if missing:
            raise ValueError(f"a masked-LM batch needs input_ids, domain and seq_index (the mask's key); "
                             f"missing {missing}: pass the mixture's samples unchanged")
        ids = torch.as_tensor(batch["input_ids"]).long()
        domain, seq_index = torch.as_tensor(batch["domain"]).tolist(), torch.as_tensor(batch["seq_index"]).tolist()
        inputs, labels = torch.empty_like(ids), torch.empty_like(ids)
        for i, (d, s) in enumerate(zip(domain, seq_index, strict=True)):
            gen = torch.Generator().manual_seed(self.row_seed(d, s))
            masked, predicted = mask_tokens(ids[i:i + 1], vocab_size=self.vocab_size, mask_id=self.mask_id,
                                            probability=self.probability, generator=gen)
            inputs[i], labels[i] = masked[0], predicted[0]
        if self.model_inputs_only:
            return {"input_ids": inputs, "labels": labels}
        return {**batch, "input_ids": inputs, "labels": labels}
