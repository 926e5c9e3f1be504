"""A Hugging Face causal-LM checkpoint folder (``save_pretrained``'s) and its tokenizer, read offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["WEIGHT_FILES", "check_checkpoint_folder", "load_causal_lm", "load_tokenizer_for"]

#: The weight files ``save_pretrained`` writes (one of them, or a sharded index).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def load_tokenizer_for(folder: str | os.PathLike[str], tokenizer: str | os.PathLike[str] | None = None) -> Any:
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
        raise ValueError(f"{os.fspath(path)!r} holds no tokenizer.json, so the model's tokenizer is unknown: save it "
                         "beside the model (tokenizer.save_pretrained) or name one (tokenizer='gpt2', 'bytes' or a "
                         "path; on the CLI --tokenizer)")
    return load_tokenizer(path)


def check_checkpoint_folder(folder: str | os.PathLike[str]) -> Path:
    """``folder`` as a path, once it is seen to hold ``config.json`` and weights.

    Raises:
        FileNotFoundError: it does not exist.
        ValueError: it is not a checkpoint folder.
    """
    path = Path(folder)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint folder {os.fspath(path)!r} does not exist")
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ValueError(f"{os.fspath(path)!r} is not a Hugging Face checkpoint folder: expected a folder with "
                         "config.json and the weights (save_pretrained), or a run folder of a runner output "
                         "(OUT/runs/<id>)")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        raise ValueError(f"{os.fspath(path)!r} has a config.json but no weights: expected one of {list(WEIGHT_FILES)}")
    return path


def load_causal_lm(folder: str | os.PathLike[str], *, device: str | None = None) -> Any:
    """The causal LM saved in ``folder`` (``config.json`` and the weights), from local files only.

    Raises:
        FileNotFoundError: ``folder`` does not exist.
        ValueError: it is not a checkpoint folder (no ``config.json`` or no weights), or its model is not a
            causal LM (a masked LM such as BERT).
    """
    path = check_checkpoint_folder(folder)
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(os.fspath(path), local_files_only=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(os.fspath(path), config=config, local_files_only=True)
    except ValueError as e:
        raise ValueError(f"{os.fspath(path)!r} holds a {config.model_type!r} model, which is not a causal LM: zero-shot "
                         f"ranked classification needs one (GPT-2 and the like) ({e})") from None
    if device is not None:
        model.to(device)
    return model.eval()
