"""Example (b): a DeepSpeed training script whose checkpoints carry the dataset's position.

Launch with the DeepSpeed launcher (GPUs, or CPU processes with the gloo backend)::

    deepspeed --num_gpus 2 examples/deepspeed_train.py --domains stores/ \\
        --weights '{"web": 0.7, "code": 0.3}' --budget-tokens 2e7 --ckpt-dir ckpt/ [--resume]

The pattern is three lines around an ordinary DeepSpeed loop:

* the dataset finds its rank and world size from ``torch.distributed`` (each rank reads its own
  strided slice of one global stream);
* ``engine.save_checkpoint(dir, client_state={"dataset": ds.state_dict(step=step, samples_per_step=b)})``
  with the global step (resumes included; the state records it) and this rank's samples per step;
* after ``engine.load_checkpoint(dir)``, ``ds.load_state_dict(client_state["dataset"])``: the next
  batch is the one that would have followed (even with a different number of ranks).

A bit-for-bit resume needs one more thing: the model's dropout draws from torch's RNG, so every
rank's RNG state goes into ``client_state`` too and is restored after ``engine.load_checkpoint``
(and the ``DataLoader`` gets its own ``generator``, so creating its iterator draws nothing from it).

``--tiny`` (``deepspeed --num_gpus 2 examples/deepspeed_train.py --tiny``): trains 6 steps saving
at step 3, then builds a fresh model, engine and dataset, resumes from the checkpoint and trains
steps 4-6 again; it checks on every rank that the resumed run reads exactly the same samples,
restored the same weights and computes the same losses as the uninterrupted run, bit for bit
(dropout included), and rank 0 prints a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "autoscale-data" / "torch_extensions"))

import deepspeed  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from _tiny import add_data_args  # examples/_tiny.py: the options every example shares
from torch.utils.data import DataLoader  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from autoscale_data.dataset import ScaleAwareMixtureDataset  # noqa: E402
from autoscale_data.runner.training.dist import clear_stale_build_locks  # noqa: E402

MICRO_BATCH = 4


def param_checksum(model: torch.nn.Module) -> float:
    """A cheap fingerprint of the weights (to check that a resume restored them)."""
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def rng_state() -> dict[str, torch.Tensor]:
    """This rank's random generators (dropout draws from them)."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, torch.Tensor]) -> None:
    """Restore what :func:`rng_state` saved (as CPU byte tensors, wherever the checkpoint put them)."""
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"].cpu())


def run(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *, steps: int,
        ckpt_dir: str, save_at: int | None, resume: bool, vocab_size: int = 257) -> dict[str, Any]:
    """Train up to ``steps`` optimizer steps; returns the ``(domain, seq_index)`` read at each step."""
    torch.manual_seed(0)
    ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens=budget_tokens, seq_len=seq_len, seed=0)
    # its own generator: creating the loader's iterator must not draw from the RNG that dropout uses
    loader = DataLoader(ds, batch_size=MICRO_BATCH, num_workers=0, generator=torch.Generator())
    config = GPT2Config(vocab_size=vocab_size, n_positions=seq_len, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=vocab_size - 1, eos_token_id=vocab_size - 1)
    model = GPT2LMHeadModel(config)
    ds_config = {"train_micro_batch_size_per_gpu": MICRO_BATCH, "gradient_accumulation_steps": 1,
                 "zero_optimization": {"stage": 1}, "gradient_clipping": 1.0}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # a client optimizer: no FusedAdam build
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    step, restored = 0, None
    if resume:
        _, client = engine.load_checkpoint(ckpt_dir)
        if client is None:
            raise FileNotFoundError(f"no DeepSpeed checkpoint in {ckpt_dir!r}")
        ds.load_state_dict(client["dataset"])
        step = int(client["step"])
        set_rng_state(client["rng"][dist.get_rank()])  # dropout continues as in the uninterrupted run
        restored = {"saved": client["param_checksum"], "loaded": param_checksum(engine.module)}
    ids: dict[int, list[list[int]]] = {}
    losses: dict[int, float] = {}
    for batch in loader:
        if step >= steps:
            break
        out = engine(input_ids=batch["input_ids"], labels=batch["labels"])
        engine.backward(out.loss)
        engine.step()
        ids[step] = [[int(d), int(s)] for d, s in zip(batch["domain"], batch["seq_index"], strict=True)]
        losses[step] = out.loss.item()
        step += 1
        if step == save_at:
            rng: list[Any] = [None] * dist.get_world_size()  # every rank's RNG (rank 0 writes the client state)
            dist.all_gather_object(rng, rng_state())
            engine.save_checkpoint(ckpt_dir, client_state={
                "dataset": ds.state_dict(step=step, samples_per_step=MICRO_BATCH), "step": step,
                "param_checksum": param_checksum(engine.module), "rng": rng})
    return {"ids": ids, "losses": losses, "restored": restored, "steps": step}


def _tiny(args: argparse.Namespace) -> int:
    rank = dist.get_rank()
    holder = [tempfile.mkdtemp(prefix="autoscale-ds-example-") if rank == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    root = Path(holder[0])
    try:
        if rank == 0:
            from _tiny import make_tiny_stores

            make_tiny_stores(root / "stores")
        dist.barrier()
        from _tiny import TINY_WEIGHTS, result

        common = dict(domains=str(root / "stores"), weights=TINY_WEIGHTS, budget_tokens=200 * 48, seq_len=48,
                      steps=6, ckpt_dir=str(root / "ckpt"))
        full = run(**common, save_at=3, resume=False)
        resumed = run(**common, save_at=None, resume=True)
        same_ids = all(resumed["ids"][s] == full["ids"][s] for s in range(3, 6)) and sorted(resumed["ids"]) == [3, 4, 5]
        same_weights = abs(resumed["restored"]["saved"] - resumed["restored"]["loaded"]) < 1e-6
        same_losses = resumed["losses"] == {s: full["losses"][s] for s in range(3, 6)}  # bit for bit
        ok = torch.tensor([int(same_ids and same_weights and same_losses)])
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        all_ids = [None] * dist.get_world_size()
        dist.all_gather_object(all_ids, {"full": full["ids"], "resumed": resumed["ids"], "same_losses": same_losses,
                                         "losses_full": full["losses"], "losses_resumed": resumed["losses"]})
        if rank == 0:
            result(example="deepspeed_train", ok=bool(ok.item()), world_size=dist.get_world_size(),
                   resumed_first_step=min(resumed["ids"]), ids=all_ids, restored=resumed["restored"])
        dist.barrier()
        return 0 if ok.item() else 1
    finally:
        if rank == 0:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    add_data_args(parser, budget_tokens=2e6, tiny_help="tiny store; train, save, resume, compare")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--save-every", type=int, default=50)
    parser.add_argument("--ckpt-dir", default="ckpt")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--vocab-size", type=int, default=257)
    args = parser.parse_args(argv)
    on_gpu = torch.cuda.is_available()
    clear_stale_build_locks()  # a build killed earlier would make DeepSpeed wait forever for its lock
    deepspeed.init_distributed(dist_backend="nccl" if on_gpu else "gloo")
    if args.tiny:
        return _tiny(args)
    if not args.domains or not args.weights:
        parser.error("give --domains and --weights, or --tiny")
    out = run(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len, steps=args.steps,
              ckpt_dir=args.ckpt_dir, save_at=args.save_every, resume=args.resume, vocab_size=args.vocab_size)
    if dist.get_rank() == 0:
        print(f"trained to step {out['steps']}; last loss {list(out['losses'].values())[-1]:.3f}")
    return 0


if __name__ == "__main__":
    code = main()
    if dist.is_initialized():
        dist.destroy_process_group()
    # Skip interpreter finalisation: destroying DeepSpeed's and gloo's C++ objects there can abort
    # the process on some machines after everything was saved ("terminate called ...", exit -6).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
