"""A causal-LM checkpoint folder (``save_pretrained``'s, or DeepSpeed's) and its tokenizer, read offline."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .ds_checkpoint import (
    MODEL_STATES,
    causal_lm_from_state_dict,
    deepspeed_model_states,
    load_deepspeed_causal_lm,
    model_config_of,
)

__all__ = ["WEIGHT_FILES", "ModelConfig", "check_checkpoint_folder", "load_causal_lm", "load_tokenizer_for"]

ModelConfig = str | os.PathLike[str] | Mapping[str, Any]
"""A model's config: a ``config.json``, a folder holding one, or a mapping of its fields with
``model_type``."""

#: The weight files ``save_pretrained`` writes (one of them, or a sharded index).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def load_tokenizer_for(folder: str | os.PathLike[str],
                       tokenizer: str | os.PathLike[str] | None = None) -> Any:
    """The tokenizer of a checkpoint folder: ``tokenizer`` when given (``bytes``, ``gpt2``, a path), else the
    folder's ``tokenizer.json`` (its EOS from ``tokenizer_config.json``).

    Raises:
        ValueError: the folder holds no ``tokenizer.json`` and none was given.
    """
    from ..store import load_tokenizer

    if tokenizer is not None:
        return load_tokenizer(tokenizer)
    path = Path(folder)
    if not (path / "tokenizer.json").is_file():
        raise ValueError(f"{os.fspath(path)!r} holds no tokenizer.json, so the model's tokenizer is unknown: "
                         "save it beside the model (tokenizer.save_pretrained) or name one "
                         "(tokenizer='gpt2', 'bytes' or a path; on the CLI --tokenizer)")
    return load_tokenizer(path)


def check_checkpoint_folder(folder: str | os.PathLike[str], model_config: ModelConfig | None = None) -> Path:
    """``folder`` as a path, once it is seen to hold a model: ``config.json`` and weights
    (``save_pretrained``), a DeepSpeed checkpoint (ZeRO stage 0-2, :mod:`.ds_checkpoint`), or weights alone
    with ``model_config`` given.

    Raises:
        FileNotFoundError: it does not exist.
        ValueError: it holds no model (or a ZeRO stage 3 checkpoint, which must be consolidated first).
    """
    path = Path(folder)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint folder {os.fspath(path)!r} does not exist")
    if path.is_dir() and deepspeed_model_states(path) is not None:
        return path
    weights = path.is_dir() and any((path / name).is_file() for name in WEIGHT_FILES)
    if weights and model_config is None and not (path / "config.json").is_file():
        model_config_of(path, None)  # weights alone (zero_to_fp32's output): it says how to give the config
    if not path.is_dir() or not ((path / "config.json").is_file() or (weights and model_config is not None)):
        raise ValueError(f"{os.fspath(path)!r} is not a checkpoint folder: expected a Hugging Face folder "
                         "with config.json and the weights (save_pretrained), a DeepSpeed checkpoint folder "
                         f"(engine.save_checkpoint: <tag>/{MODEL_STATES}, ZeRO stage 0-2), or a run folder "
                         "of a runner output (OUT/runs/<id>)")
    if not weights:
        raise ValueError(f"{os.fspath(path)!r} has a config.json but no weights: expected one of "
                         f"{list(WEIGHT_FILES)}")
    return path


def _saved_weights(folder: Path) -> dict[str, Any]:
    """The state dict in ``folder``'s weight files (:data:`WEIGHT_FILES`; a sharded index reads every
    shard)."""
    import torch

    def read(name: str) -> dict[str, Any]:
        if name.endswith(".safetensors"):
            from safetensors.torch import load_file

            return load_file(folder / name)
        return torch.load(folder / name, map_location="cpu", weights_only=True)

    name = next(n for n in WEIGHT_FILES if (folder / n).is_file())
    if not name.endswith(".index.json"):
        return read(name)
    shards = sorted(set(json.loads((folder / name).read_text())["weight_map"].values()))
    return {k: v for shard in shards for k, v in read(shard).items()}


def load_causal_lm(folder: str | os.PathLike[str], *, device: str | None = None,
                   model_config: ModelConfig | None = None) -> Any:
    """The causal LM saved in ``folder`` (see :func:`check_checkpoint_folder`), from local files only.

    ``model_config`` (a ``config.json``, a folder holding one, or a mapping of config fields with
    ``model_type``) gives the model's config where the folder holds none, or replaces it.

    Raises:
        FileNotFoundError: ``folder`` does not exist.
        ValueError: it holds no model, no config is known, or its model is not a causal LM (a masked LM such
            as BERT).
    """
    path = check_checkpoint_folder(folder, model_config)
    states = deepspeed_model_states(path)
    if states is not None:
        model = load_deepspeed_causal_lm(states, path, model_config)
    elif model_config is not None:  # weights alone (zero_to_fp32's output), or another config
        weights = _saved_weights(path)
        model = causal_lm_from_state_dict(weights, model_config_of(path, model_config, weights),
                                          where=os.fspath(path))
    else:
        from transformers import AutoConfig, AutoModelForCausalLM

        config = AutoConfig.from_pretrained(os.fspath(path), local_files_only=True)
        try:
            model = AutoModelForCausalLM.from_pretrained(os.fspath(path), config=config,
                                                         local_files_only=True)
        except ValueError as e:
            raise ValueError(f"{os.fspath(path)!r} holds a {config.model_type!r} model, which is not a "
                             "causal LM: zero-shot ranked classification needs one (GPT-2 and the like) "
                             f"({e})") from None
    if device is not None:
        model.to(device)
    return model.eval()
