"""Models built from config (never downloaded): GPT-2 causal LMs and BERT masked LMs.

Presets carry the architecture only; the vocabulary comes from the token stores and the context
length from the runner config. ``gpt2-large`` is the paper's model (1280 wide, 36 layers, 20 heads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..dataset import mask_tokens  # the runner's BERT masking, public in autoscale_data.dataset

__all__ = ["PRESETS", "build_model", "mask_tokens", "model_config_dict", "parameter_count"]

#: Architecture presets: family ("gpt2" or "bert") plus the transformers config fields.
PRESETS: dict[str, dict[str, Any]] = {
    "gpt2-tiny": {"n_layer": 2, "n_embd": 128, "n_head": 4},
    "gpt2-small": {"n_layer": 12, "n_embd": 768, "n_head": 12},
    "gpt2-medium": {"n_layer": 24, "n_embd": 1024, "n_head": 16},
    "gpt2-large": {"n_layer": 36, "n_embd": 1280, "n_head": 20},
    "bert-tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
                  "intermediate_size": 512},
    "bert-base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12,
                  "intermediate_size": 3072},
}


def model_config_dict(preset: str, overrides: Mapping[str, Any], *, vocab_size: int, seq_len: int,
                      dropout: float | None = None) -> dict[str, Any]:
    """The full transformers config fields for a preset (what a run id hashes).

    Args:
        preset: a key of :data:`PRESETS`.
        overrides: fields that replace the preset's (any transformers config field).
        vocab_size: the token stores' vocabulary size (BERT gets one more id, ``vocab_size``, as [MASK]).
        seq_len: training context length (sets ``n_positions`` / ``max_position_embeddings``).
        dropout: if given, every dropout probability of the model.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r}: expected one of {sorted(PRESETS)}")
    fields = dict(PRESETS[preset])
    if preset.startswith("gpt2"):
        fields.update(vocab_size=vocab_size, n_positions=seq_len)
        if dropout is not None:
            fields.update(resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    else:
        # one extra id (= the stores' vocab_size) is the [MASK] token; no padding index (no padding)
        fields.update(vocab_size=vocab_size + 1, max_position_embeddings=seq_len, pad_token_id=None)
        if dropout is not None:
            fields.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    fields.update(overrides)
    return fields


def build_model(preset: str, fields: Mapping[str, Any], *, eos_id: int | None = None) -> torch.nn.Module:
    """Instantiate a randomly initialised model (call ``torch.manual_seed`` first for a seeded init).

    Args:
        preset: the preset name (its prefix picks the family).
        fields: the config fields from :func:`model_config_dict`.
        eos_id: the tokenizer's end-of-sequence id (used as BOS/EOS/pad of GPT-2).
    """
    if preset.startswith("gpt2"):
        from transformers import GPT2Config, GPT2LMHeadModel

        extra = {"bos_token_id": eos_id, "eos_token_id": eos_id}
        config = GPT2Config(**{**extra, **dict(fields)})
        model = GPT2LMHeadModel(config)
        # transformers picks a loss from the class name; "GPT2LMHeadModel" names none, so it warns "`loss_type=None`
        # was set in the config but it is unrecognized" on the first loss and falls back to this one: name it.
        model.loss_type = "ForCausalLM"
        return model
    if preset.startswith("bert"):
        from transformers import BertConfig, BertForMaskedLM

        return BertForMaskedLM(BertConfig(**dict(fields)))
    raise ValueError(f"unknown model family for preset {preset!r}: expected gpt2-* or bert-*")


def parameter_count(model: torch.nn.Module) -> int:
    """Number of parameters (shared tensors counted once)."""
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[id(p)] = p.numel()
    return sum(seen.values())
