"""A causal LM from a DeepSpeed checkpoint folder, or from weights without a ``config.json``, read offline.

``engine.save_checkpoint(DIR)`` under ZeRO stage 0-2 writes the whole model's state dict as ``module`` of
``DIR/<tag>/mp_rank_00_model_states.pt`` and the newest tag into ``DIR/latest``; both ``DIR`` and
``DIR/<tag>`` are read. Under ZeRO stage 3 every rank holds a slice of the weights
(``zero_pp_rank_<r>_mp_rank_00_model_states.pt``): they must be consolidated first with DeepSpeed's own
``zero_to_fp32`` (:data:`ZERO3_HOWTO`). A DeepSpeed checkpoint holds no model config: it comes from a
``config.json`` in the folder, or from ``model_config`` (a ``config.json`` path, or a mapping of config
fields with ``model_type``, in which GPT-2's ``vocab_size`` and ``n_positions`` may be left to the
checkpoint's shapes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MODEL_STATES", "ZERO3_HOWTO", "causal_lm_from_state_dict", "deepspeed_model_states",
           "load_deepspeed_causal_lm", "model_config_of"]

#: The file of a ZeRO stage 0-2 checkpoint tag that holds the whole model (``"module"``).
MODEL_STATES = "mp_rank_00_model_states.pt"
_ZERO3_STATES = "zero_pp_rank_*_mp_rank_00_model_states.pt"

#: How to consolidate a ZeRO stage 3 checkpoint ``{ckpt}`` into ``{out}`` with DeepSpeed's own script.
ZERO3_HOWTO = ("consolidate it first with DeepSpeed's own zero_to_fp32, which save_checkpoint copied into "
               "the folder: `python {ckpt}/zero_to_fp32.py {ckpt} {out}` (or in Python: `from "
               "deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_fp32_state_dict; "
               "convert_zero_checkpoint_to_fp32_state_dict('{ckpt}', '{out}')`; add `-t TAG` / tag='TAG' for "
               "a tag other than the one in {ckpt}/latest); it writes {out}/pytorch_model.bin. Then copy the "
               "model's config.json into {out} (or pass its config: on the CLI --model-config) and evaluate "
               "{out}")


def deepspeed_model_states(folder: str | os.PathLike[str]) -> Path | None:
    """The ``mp_rank_00_model_states.pt`` of a DeepSpeed checkpoint ``folder`` (itself a tag folder, or the
    tag its ``latest`` file names, or its only tag); ``None`` when ``folder`` is no DeepSpeed checkpoint.

    Raises:
        ValueError: a ZeRO stage 3 checkpoint (its weights are partitioned: :data:`ZERO3_HOWTO`), a ``latest``
            that names a missing tag, or several tags and no ``latest``.
    """
    path = Path(folder)
    tags = [path]
    latest = path / "latest"
    if latest.is_file():
        tag = latest.read_text().strip()
        if not (path / tag).is_dir():
            raise ValueError(f"{os.fspath(latest)!r} names tag {tag!r}, but {os.fspath(path / tag)!r} is "
                             "missing")
        tags = [path / tag]
    elif path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_dir() and _is_tag(p))
        if len(found) > 1:
            raise ValueError(f"{os.fspath(path)!r} holds the DeepSpeed checkpoints {[p.name for p in found]} "
                             "and no latest file naming one: give the folder of the one to read")
        tags += found
    for tag_dir in tags:
        if (tag_dir / MODEL_STATES).is_file():
            return tag_dir / MODEL_STATES
        if any(tag_dir.glob(_ZERO3_STATES)):
            ckpt = os.fspath(path)
            raise ValueError(f"{os.fspath(tag_dir)!r} is a ZeRO stage 3 checkpoint: every rank holds a slice "
                             "of the weights (zero_pp_rank_*_model_states.pt), so there is no whole model "
                             "to read; "
                             + ZERO3_HOWTO.format(ckpt=ckpt, out=ckpt.rstrip("/") + "-fp32"))
    return None


def _is_tag(folder: Path) -> bool:
    """Whether ``folder`` is one tag of a DeepSpeed checkpoint (any ZeRO stage)."""
    return (folder / MODEL_STATES).is_file() or any(folder.glob(_ZERO3_STATES))


def model_config_of(folder: str | os.PathLike[str],
                    model_config: str | os.PathLike[str] | Mapping[str, Any] | None,
                    state_dict: Mapping[str, Any] | None = None) -> Any:
    """The transformers config of the model saved in ``folder``: ``model_config`` when given (a
    ``config.json``, a folder holding one, or a mapping of fields with ``model_type``), else ``folder``'s
    ``config.json``.

    GPT-2's ``vocab_size`` and ``n_positions`` missing from a mapping are read from ``state_dict``'s shapes.

    Raises:
        FileNotFoundError: ``model_config`` names no file.
        ValueError: no config anywhere, or one without ``model_type``.
    """
    if model_config is None:
        if not (Path(folder) / "config.json").is_file():
            raise ValueError(f"{os.fspath(folder)!r} holds the weights but no config.json, so the model's "
                             "shape is unknown: give it (model_config=: a config.json, e.g. "
                             "model.config.save_pretrained(DIR); on the CLI --model-config PATH/config.json "
                             "or a runner model preset such as gpt2-tiny), or save config.json beside the "
                             "checkpoint")
        model_config = Path(folder) / "config.json"
    if isinstance(model_config, Mapping):
        fields, where = dict(model_config), "model_config"
    else:
        where = os.fspath(model_config)
        path = Path(model_config) / "config.json" if Path(model_config).is_dir() else Path(model_config)
        if not path.is_file():
            raise FileNotFoundError(f"model config {where!r} does not exist: expected a config.json (or a "
                                    "folder holding one)")
        fields = json.loads(path.read_text())
    model_type = fields.pop("model_type", None)
    if not model_type:
        raise ValueError(f"model config {where!r} has no model_type: expected a transformers config (such as "
                         "model.config.save_pretrained writes)")
    if model_type == "gpt2" and isinstance(model_config, Mapping):
        shapes = {"vocab_size": "transformer.wte.weight", "n_positions": "transformer.wpe.weight"}
        for name, key in shapes.items():
            if name not in fields and state_dict is not None and key in state_dict:
                fields[name] = int(state_dict[key].shape[0])
        fields.setdefault("bos_token_id", None)  # GPT-2's defaults (50256) lie outside a smaller vocabulary
        fields.setdefault("eos_token_id", None)
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **fields)


def _module_state(states: Path) -> dict[str, Any]:
    import torch

    # DeepSpeed pickles its own objects beside the weights (its config, the client state): a full unpickle,
    # as engine.load_checkpoint does (read only checkpoints you trust)
    blob = torch.load(states, map_location="cpu", weights_only=False)
    module = blob.get("module") if isinstance(blob, dict) else None
    if not module:
        raise ValueError(f"{os.fspath(states)!r} holds no model weights (no 'module' state dict): expected "
                         "what engine.save_checkpoint writes under ZeRO stage 0-2")
    prefix = "module."  # a model that was wrapped (DDP) before DeepSpeed saw it
    if all(k.startswith(prefix) for k in module):
        module = {k[len(prefix):]: v for k, v in module.items()}
    return dict(module)


def causal_lm_from_state_dict(state_dict: Mapping[str, Any], config: Any, *, where: str) -> Any:
    """A causal LM of ``config`` holding the weights of ``state_dict`` (float32, on the CPU, in eval mode).

    Raises:
        ValueError: ``config`` is not a causal LM's, or ``state_dict`` does not fit it (missing, unexpected or
            misshapen weights; ``where`` names the checkpoint in the message).
    """
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_config(config)
    except ValueError as e:
        raise ValueError(f"{where!r}: a {config.model_type!r} model is not a causal LM: zero-shot ranked "
                         f"classification needs one (GPT-2 and the like) ({e})") from None
    weights = {k: v.float() if torch.is_floating_point(v) else v for k, v in state_dict.items()}
    try:
        found = model.load_state_dict(weights, strict=False)
    except RuntimeError as e:
        lines = str(e).splitlines()
        raise ValueError(f"{where!r} does not fit the model config ({config.model_type}): "
                         f"{' '.join(line.strip() for line in lines[:3])}{' ...' if len(lines) > 3 else ''}") from None
    out = model.get_output_embeddings()
    tied = out is not None and out.weight is model.get_input_embeddings().weight
    missing = [k for k in found.missing_keys if not (tied and k.endswith("lm_head.weight"))]
    if missing or found.unexpected_keys:
        raise ValueError(f"{where!r} does not fit the model config ({config.model_type}): missing weights "
                         f"{missing[:5]}, unexpected weights {found.unexpected_keys[:5]}")
    return model.eval()


def load_deepspeed_causal_lm(states: Path, folder: str | os.PathLike[str],
                             model_config: str | os.PathLike[str] | Mapping[str, Any] | None) -> Any:
    """The causal LM in the DeepSpeed model states ``states`` of checkpoint ``folder``
    (:func:`model_config_of` gives its config; the tag folder's ``config.json`` counts too)."""
    module = _module_state(states)
    if model_config is None and (states.parent / "config.json").is_file():
        model_config = states.parent / "config.json"
    return causal_lm_from_state_dict(module, model_config_of(folder, model_config, module),
                                     where=os.fspath(folder))
