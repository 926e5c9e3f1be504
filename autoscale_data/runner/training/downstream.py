"""The zero-shot tasks on every finished target run (config ``eval.tasks``): ``runs/<id>/downstream.json``.

After the target runs train, :func:`evaluate_targets` loads each run's final checkpoint
(``final_ckpt/``, kept by ``target.keep_checkpoints``) into the model the run trained, scores it with
the stores' tokenizer on the tasks of :mod:`autoscale_data.evaluation`, and writes a
:class:`~autoscale_data.evaluation.DownstreamResult`. A run whose file already holds the same tasks,
limit and seed is not scored again. ``autoscale-data evaluate RUN_DIR`` calls :func:`evaluate_run_dir`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ..._io import atomic_write_json
from ..._runner_names import EXTENSION, GPT2, TARGET
from ...evaluation import TASKS, DownstreamResult, evaluate_model
from ...store import load_tokenizer
from .. import layout
from ..config import RunnerConfig
from ..experiment import load_folder_config
from ..models import model_config_dict
from ..planning.data import DomainInfo
from ..planning.specs import RunSpec
from .checkpoint import final_model

__all__ = ["downstream_cost_lines", "evaluate_run_dir", "evaluate_targets", "load_final_model",
           "stores_tokenizer"]

#: FLOP/s the dry run assumes for the evaluation before any was timed in the folder (a busy CPU core).
_ASSUMED_FLOPS = 1e10


def stores_tokenizer(domains: DomainInfo) -> Any:
    """The tokenizer that tokenized the stores (``bytes``, ``gpt2`` or the path their manifest names).

    Raises:
        ValueError: it cannot be loaded here, or it is not the one the stores were tokenized with.
    """
    try:
        tok = load_tokenizer(domains.tokenizer)
    except (ValueError, FileNotFoundError) as e:
        raise ValueError(f"the stores' tokenizer {domains.tokenizer!r} cannot be loaded here ({e}): the "
                         "zero-shot tasks need the model's own tokenizer") from None
    if tok.vocab_size != domains.vocab_size or tok.eos_id != domains.eos_id:
        raise ValueError(f"tokenizer {domains.tokenizer!r} has vocabulary {tok.vocab_size} and EOS "
                         f"{tok.eos_id}, but the stores were tokenized with vocabulary {domains.vocab_size} "
                         f"and EOS {domains.eos_id}")
    return tok


def load_final_model(config: RunnerConfig, spec: RunSpec, run_dir: Path,
                     domains: DomainInfo) -> torch.nn.Module:
    """The model of a finished run, its weights from ``run_dir/final_ckpt`` (the torch or the DeepSpeed
    layout).

    Raises:
        ValueError: the model is a masked LM (no zero-shot ranked classification), or no final checkpoint.
    """
    if config.model.family != GPT2:
        raise ValueError(f"model {config.model.preset!r} is a masked LM: the zero-shot tasks (eval.tasks) "
                         "score a causal LM's answers; see docs/runner.md, 'Zero-shot downstream tasks', "
                         "for BERT")
    model = final_model(spec, run_dir, domains.eos_id)
    if model is None:
        raise ValueError(f"run {spec.run_id} kept no final checkpoint "
                         f"({os.fspath(run_dir / layout.FINAL_CHECKPOINT_DIR)!r} is missing): "
                         f"{_no_model_advice(spec)}")
    return model


def _no_model_advice(spec: RunSpec) -> str:
    """What to do about a run without its final model: ``target.keep_checkpoints`` keeps only target runs'."""
    if spec.kind in (TARGET, EXTENSION):
        return "set target.keep_checkpoints: true and train it again"
    weights = ", ".join(f"{d}: {w:.4g}" for d, w in spec.weights.items())
    return (f"it is a {spec.kind} run, and the runner deletes a {spec.kind} run's checkpoints once its "
            f"{layout.RESULT} is written, whatever target.keep_checkpoints says (that keeps target runs' "
            f"only); its per-domain validation losses are in {layout.RESULT}. To score its mix on the tasks, "
            "train the mix as a target: add reference to target.baselines with target.reference_weights: "
            f"{{{weights}}} and eval.tasks, then evaluate that target run (its budget is target.budget); or "
            "train the mix in your own loop and evaluate that checkpoint")


def _current(path: Path, tasks: Sequence[str], limit: int | None, seed: int) -> DownstreamResult | None:
    found: DownstreamResult | None = layout.read(path.parent, path.name)
    if found is None:
        return None
    same = sorted(found.tasks) == sorted(tasks) and found.limit == limit and found.seed == seed
    return found if same else None


def evaluate_targets(config: RunnerConfig, domains: DomainInfo, out: Path, specs: Sequence[RunSpec], *,
                     log: Callable[[str], None] = print) -> dict[str, DownstreamResult]:
    """Score every finished target run of ``specs`` on ``config.eval.tasks``; returns the results by run
    id."""
    results: dict[str, DownstreamResult] = {}
    tasks, limit, seed = list(config.eval.tasks), config.eval.task_limit, config.eval.task_seed
    tok = None
    threads = torch.get_num_threads()
    if config.cpu_threads is not None:  # as the runs trained: on a busy CPU, more threads are slower
        torch.set_num_threads(config.cpu_threads)
    try:
        for spec in specs:
            run_dir = out / layout.RUNS / spec.run_id
            if spec.kind != TARGET or not (run_dir / layout.RESULT).is_file():
                continue
            path = run_dir / layout.DOWNSTREAM
            found = _current(path, tasks, limit, seed)
            if found is None:
                tok = tok or stores_tokenizer(domains)
                start = time.perf_counter()
                model = load_final_model(config, spec, run_dir, domains)
                found = evaluate_model(model, tok, tasks, limit=limit, seed=seed,
                                       batch_size=config.eval.batch_size,
                                       name=spec.run_id)
                atomic_write_json(path, found.to_json())
                log(f"downstream {spec.name}: mean accuracy {found.mean_acc:.3f}, mean bits per byte "
                    f"{found.mean_bpb:.3f} ({len(tasks)} tasks, {time.perf_counter() - start:.1f} s)")
            results[spec.run_id] = found
    finally:
        torch.set_num_threads(threads)
    return results


def evaluate_run_dir(run_dir: str | os.PathLike[str], tasks: Sequence[str], *, limit: int | None = None,
                     seed: int = 0, batch_size: int = 32) -> DownstreamResult:
    """Score one run folder of a runner output (``OUT/runs/<id>``, with its ``final_ckpt/``); nothing written.

    Raises:
        ValueError: the folder is not a run of a runner output, or it kept no final checkpoint.
    """
    path = Path(run_dir)
    spec: RunSpec | None = layout.read(path, layout.SPEC)
    if spec is None:
        raise ValueError(f"{os.fspath(path)!r} is not a run folder of a runner output (no {layout.SPEC})")
    out = path.parent.parent
    config = load_folder_config(out)
    domains: DomainInfo | None = layout.read(out, layout.DOMAINS)
    if domains is None:
        raise ValueError(f"{os.fspath(out)!r} has no {layout.DOMAINS}: not a runner output folder")
    model = load_final_model(config, spec, path, domains)
    return evaluate_model(model, stores_tokenizer(domains), tasks, limit=limit, seed=seed,
                          batch_size=batch_size,
                          name=spec.run_id)


def _measured_rate(out: Path) -> float | None:
    """Forward tokens per second of the evaluations already in the folder (median; ``None`` before any)."""
    rates = []
    for path in sorted((out / layout.RUNS).glob(f"*/{layout.DOWNSTREAM}")):
        try:
            found = layout.read(path.parent, layout.DOWNSTREAM)
        except (ValueError, OSError):
            continue
        if found is None:
            continue
        seconds = sum(t.seconds for t in found.tasks.values())
        if found.tasks and seconds > 0:
            rates.append(_tokens(list(found.tasks), found.limit) / seconds)
    return sorted(rates)[len(rates) // 2] if rates else None


def _tokens(tasks: Sequence[str], limit: int | None) -> float:
    """Forward tokens of one model's evaluation, roughly: questions x answers x 128 tokens."""
    return sum(min(limit or TASKS[t].size, TASKS[t].size) * TASKS[t].choices * 128.0 for t in tasks)


def downstream_cost_lines(config: RunnerConfig, domains: DomainInfo, out: Path,
                          target_runs: int) -> list[str]:
    """The dry run's line on the zero-shot evaluation: tasks, questions, and its estimated time (none without
    ``eval.tasks``)."""
    tasks = list(config.eval.tasks)
    if not tasks:
        return []
    limit = config.eval.task_limit
    tokens = _tokens(tasks, limit) * target_runs
    rate = _measured_rate(out)
    how = "rate measured in this folder"
    if rate is None:  # 2 x parameters FLOPs per token; a GPT-2 block holds 12 d^2 weights, the embedding V d
        f = model_config_dict(config.model.preset, config.model.overrides, vocab_size=domains.vocab_size,
                              seq_len=config.seq_len)
        params = 12 * f["n_layer"] * f["n_embd"] ** 2 + f["vocab_size"] * f["n_embd"]
        rate, how = _ASSUMED_FLOPS / (2.0 * params), f"assumed {_ASSUMED_FLOPS:.0e} FLOP/s"
    questions = ", ".join(f"{t} {min(limit or TASKS[t].size, TASKS[t].size)}" for t in tasks)
    return [f"downstream: {len(tasks)} zero-shot tasks on each of {target_runs} target runs' final models "
            f"(questions: {questions}); about {tokens / rate / 60:.1f} min ({how})"]
