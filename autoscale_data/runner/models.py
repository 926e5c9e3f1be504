"""Models built from config (never downloaded): GPT-2 causal LMs and BERT masked LMs, and their loss.

Presets carry the architecture only; the vocabulary comes from the token stores and the context
length from the runner config. ``gpt2-large`` is the paper's model (1280 wide, 36 layers, 20 heads).
Models use PyTorch's scaled-dot-product attention and may carry a padded vocabulary (:func:`build_model`).
:func:`token_cross_entropy` is the one per-token loss of training, of the per-domain meters, of the step
hooks and of evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .._runner_names import BERT, GPT2, MODEL_FAMILIES
from ..dataset import mask_tokens  # the runner's BERT masking, public in autoscale_data.dataset

__all__ = [
    "FORMER_GPT2_ACTIVATION", "GPT2_ACTIVATION", "GPT2_ACTIVATIONS", "PRESETS", "build_model", "mask_tokens",
    "model_config_dict", "padded_vocab", "parameter_count", "token_cross_entropy",
]

#: GPT-2's activation in new configs (``model.activation``): the tanh GELU in one PyTorch kernel.
GPT2_ACTIVATION = "gelu_pytorch_tanh"
#: transformers' GPT-2 default, HF's Python formula of the same function: what every GPT-2 run planned before
# : ``model.activation`` existed trained (2026-11-28). Its run ids leave the field out, so they stay as they
# were.
FORMER_GPT2_ACTIVATION = "gelu_new"
#: The values of ``model.activation`` (any other: ``model.overrides: {activation_function: ...}``).
GPT2_ACTIVATIONS = (GPT2_ACTIVATION, FORMER_GPT2_ACTIVATION)

#: Architecture presets: a family of ``MODEL_FAMILIES`` (the name's start), the transformers config fields.
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
                      dropout: float | None = None, activation: str | None = None) -> dict[str, Any]:
    """The full transformers config fields for a preset with ``overrides`` (what a run id hashes): the stores'
    ``vocab_size`` (BERT gets one more id, ``vocab_size``, as [MASK]), ``seq_len`` positions, if given,
    ``dropout`` as every dropout probability and, for GPT-2, ``activation`` (``None``:
    :data:`GPT2_ACTIVATION`) as ``activation_function``, left out at :data:`FORMER_GPT2_ACTIVATION`
    (transformers' default: the fields, and run ids, of the runs planned before the setting existed)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r}: expected one of {sorted(PRESETS)}")
    fields = dict(PRESETS[preset])
    if preset.startswith(GPT2):
        fields.update(vocab_size=vocab_size, n_positions=seq_len)
        if (activation or GPT2_ACTIVATION) != FORMER_GPT2_ACTIVATION:
            fields["activation_function"] = activation or GPT2_ACTIVATION
        if dropout is not None:
            fields.update(resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    else:
        # one extra id (= the stores' vocab_size) is the [MASK] token; no padding index (no padding)
        fields.update(vocab_size=vocab_size + 1, max_position_embeddings=seq_len, pad_token_id=None)
        if dropout is not None:
            fields.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    fields.update(overrides)
    return fields


def padded_vocab(vocab_size: int, multiple: int) -> int:
    """``vocab_size`` rounded up to a multiple of ``multiple`` (``multiple`` <= 1: unchanged)."""
    if multiple <= 1:
        return vocab_size
    return -(-vocab_size // multiple) * multiple


def build_model(preset: str, fields: Mapping[str, Any], *, eos_id: int | None = None,
                vocab_rows: int | None = None) -> torch.nn.Module:
    """A randomly initialised model of :func:`model_config_dict`'s ``fields`` (call ``torch.manual_seed``
    first for a seeded init); ``eos_id`` is GPT-2's BOS/EOS.

    ``vocab_rows`` (``None``: no padding; see :func:`padded_vocab`) pads the embedding and output rows: the
    model is initialised at its own vocabulary first, so the same seed gives the same weights padded or not;
    the extra rows are zero and no token id reaches them.
    """
    if preset.startswith(GPT2):
        from transformers import GPT2Config, GPT2LMHeadModel

        extra = {"bos_token_id": eos_id, "eos_token_id": eos_id}
        # no key/value cache: training and evaluation read whole sequences (a cache only costs copies)
        model: Any = GPT2LMHeadModel(GPT2Config(**{**extra, "use_cache": False, **dict(fields)},
                                                attn_implementation="sdpa"))
        # transformers picks a loss from the class name; "GPT2LMHeadModel" names none, so it warns
        # "`loss_type=None`
        # was set in the config but it is unrecognized" if a loss is ever asked of it: name it.
        model.loss_type = "ForCausalLM"
    elif preset.startswith(BERT):
        from transformers import BertConfig, BertForMaskedLM

        model = BertForMaskedLM(BertConfig(**dict(fields), attn_implementation="sdpa"))
    else:
        raise ValueError(f"unknown model family for preset {preset!r}: expected gpt2-* or bert-*")
    vocab = int(fields["vocab_size"])
    padded = vocab if vocab_rows is None else int(vocab_rows)
    if padded < vocab:
        raise ValueError(f"vocab_rows {vocab_rows} is invalid: expected at least the vocabulary, {vocab}")
    if padded != vocab:
        with torch.random.fork_rng(devices=[]):  # the new rows' init must not move the global RNG
            model.resize_token_embeddings(padded, mean_resizing=False)
        with torch.no_grad():
            model.get_input_embeddings().weight[vocab:].zero_()
            bias = getattr(model.get_output_embeddings(), "bias", None)
            if bias is not None:
                bias[vocab:].zero_()
    return model


#: The most float32 logits :func:`token_cross_entropy` makes at once (256 MiB).
LOSS_CHUNK_BYTES = 1 << 28


class _TokenCrossEntropy(torch.autograd.Function):
    """Per-token cross-entropy over the first ``vocab`` logits of each row, in row chunks of float32 (the
    chunked path of :func:`token_cross_entropy`: the same ATen kernels as ``F.cross_entropy`` per chunk)."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor, vocab: int,  # type: ignore[override]
                rows: int) -> torch.Tensor:
        out = torch.empty(targets.shape, dtype=torch.float32, device=logits.device)
        for i in range(0, logits.shape[0], rows):
            chunk = logits[i:i + rows, :vocab].float()
            out[i:i + rows] = torch.nn.functional.cross_entropy(chunk, targets[i:i + rows], reduction="none",
                                                                ignore_index=-100)
        ctx.save_for_backward(logits, targets)
        ctx.vocab, ctx.rows = vocab, rows
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:  # type: ignore[override]
        logits, targets = ctx.saved_tensors
        vocab, rows = ctx.vocab, ctx.rows
        out = torch.zeros_like(logits) if vocab < logits.shape[1] else torch.empty_like(logits)
        for i in range(0, logits.shape[0], rows):
            with torch.enable_grad():
                chunk = logits[i:i + rows, :vocab].detach().float().requires_grad_()
                loss = torch.nn.functional.cross_entropy(chunk, targets[i:i + rows], reduction="none",
                                                         ignore_index=-100)
                (g,) = torch.autograd.grad(loss, chunk, grad[i:i + rows])
            out[i:i + rows, :vocab] = g
        return out, None, None, None


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, family: str, *,
                        vocab_size: int | None = None,
                        chunk_bytes: int = LOSS_CHUNK_BYTES,
                        recompute: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token cross-entropy (float32, with the logits' graph when they have one) and its token mask.

    GPT-2 scores the next token (``[B, T-1]``), BERT the masked positions (``[B, T]``, labels != -100).
    The mean of the masked values is the model's loss (what HF computes with ``labels=``); one call
    gives the training loss, the per-domain meter and a step hook's weighted loss.

    Float32 logits that need a gradient go through one ``F.cross_entropy`` (no copy of the logits; its
    backward keeps the log-probabilities, as any cross-entropy's does, and it is the fastest on a CPU).
    Other logits (bf16 / fp16, or without a gradient) go in chunks: at most ``chunk_bytes`` of float32
    logits exist at once (whole tokens, at least one), nothing float32 is kept for the backward pass,
    which recomputes each chunk's softmax from the saved logits. Both give the same values and gradients
    as ``F.cross_entropy`` on the float32 logits.

    Args:
        logits: ``[B, T, V']`` as the model made them (any float dtype).
        labels: ``[B, T]`` token ids (GPT-2: the inputs; BERT: -100 where not masked).
        vocab_size: the real vocabulary when the model's is padded: logits from this column on are left out.
        recompute: force the chunked path (``True``) or the single call (``False``); ``None``: as above.
    """
    if family not in MODEL_FAMILIES:
        raise ValueError(f"model family {family!r} is unknown: expected one of {MODEL_FAMILIES}")
    b, t, width = logits.shape
    vocab = width if vocab_size is None else int(vocab_size)
    if not 0 < vocab <= width:
        raise ValueError(f"vocab_size {vocab_size} is invalid: expected 1..{width} (the logits' width)")
    if family == GPT2:  # next token: the last position predicts nothing (as HF pads the shifted labels)
        targets = torch.nn.functional.pad(labels[:, 1:], (0, 1), value=-100)
    else:
        targets = labels
    if recompute is None:
        recompute = not (logits.dtype == torch.float32 and logits.requires_grad and torch.is_grad_enabled())
    flat_logits = logits.reshape(b * t, width)
    if recompute:
        rows = max(1, chunk_bytes // (4 * vocab))  # whole tokens of float32 logits
        flat = _TokenCrossEntropy.apply(flat_logits, targets.reshape(-1), vocab, rows)
    else:
        flat = torch.nn.functional.cross_entropy(flat_logits[:, :vocab], targets.reshape(-1),
                                                 reduction="none",
                                                 ignore_index=-100)
    flat = flat.view(b, t)
    if family == GPT2:
        return flat[:, :-1].contiguous(), labels[:, 1:] != -100
    return flat, labels != -100


def parameter_count(model: torch.nn.Module) -> int:
    """Number of parameters (shared tensors counted once)."""
    return sum({id(p): p.numel() for p in model.parameters()}.values())
