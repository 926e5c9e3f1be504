"""The one training entry point for proxy and target runs (plain torch or DeepSpeed).

In process: ``train_run(config, spec, domains, run_dir)``. As a program (one process per rank, as
the ``deepspeed`` launcher or ``torchrun`` starts it)::

    deepspeed --num_gpus 2 --module autoscale_data.runner.training.train --job OUT/runs/<id>/job.json

Training data are read through :class:`~autoscale_data.ScaleAwareMixtureDataset` with the spec's planned
sequences per domain (:meth:`~autoscale_data.ScaleAwareMixtureDataset.from_counts`; an anytime run: its
:class:`~autoscale_data.solver.MixturePlan`; an extension: its new sequences' mix after the parent's end),
every rank its strided slice. The run evaluates per-domain validation loss at ``spec.eval_points`` evenly
spaced steps (the last at the end; each point records the training tokens seen per domain), checkpoints every
``config.checkpoint_every`` steps (model, optimiser, LR scheduler, RNG, dataset state), resumes from the
newest complete checkpoint, and writes ``result.json`` atomically at the end. A NaN/inf training loss stops it
with :class:`Diverged`.

A finished target run keeps its final checkpoint when ``target.keep_checkpoints`` is set (``ckpt/`` with
``final_state.json`` renamed to ``final_ckpt/`` before ``result.json`` is written; a run killed in between
only writes its result on its next start); other runs delete theirs. An extension run (:mod:`.extension`)
starts from its parent's ``final_ckpt/`` and counts its steps and tokens from the parent's.

The step calls the model without labels and computes one per-token cross-entropy
(:func:`~autoscale_data.runner.models.token_cross_entropy`): its mean is the loss, the same values feed
the per-domain meter and the run's step hook (``spec.hook``; protocol in :mod:`.hooks`). A DoReMi
reference run keeps its final checkpoint whatever ``target.keep_checkpoints`` says.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ..._io import atomic_write_json
from ...dataset import CURSOR_KEY, DOMAIN_COUNTS_KEY, DomainLossMeter
from ...solver.vocabulary import AUTO, MEAN_LOSS, MEAN_PPL
from .. import layout
from ..config import RunnerConfig, config_from_dict, config_to_dict
from ..config.sections import OptimizerConfig
from ..models import mask_tokens, parameter_count, token_cross_entropy
from ..planning.data import DomainInfo
from ..planning.specs import RunSpec, proxy_dataset_options
from ..planning.wsd import wsd_lr_lambda
from ..records import EvalPoint, FinalState, JobFile, RunExtension, RunFailure, RunResult
from .checkpoint import CheckpointState, TrainTimes, load_checkpoint, save_checkpoint
from .dist import DistInfo, all_gather_objects, all_reduce_sum, exit_process, setup_distributed, teardown
from .extension import extension_lr_lambda, parent_state
from .step import measure_micro_batch, prepare_device
from .validation_loss import mean_objective, validation_losses

__all__ = [
    "DIVERGED_EXIT", "Diverged", "LOCKED_EXIT", "RunLocked", "eval_steps", "load_job", "lr_lambda", "main",
    "run_job", "train_run", "write_job",
]

DIVERGED_EXIT = 3
LOCKED_EXIT = 4
_ORPHAN_EXIT = 17


class Diverged(RuntimeError):
    """The training loss became NaN or infinite."""


class RunLocked(RuntimeError):
    """Another process is training this run (it holds ``runs/<id>/.train.lock``)."""


def eval_steps(total_steps: int, points: int) -> list[int]:
    """The (1-based) steps after which to evaluate: ``points`` evenly spaced, the last one at the end."""
    return sorted({max(1, round(k * total_steps / points)) for k in range(1, points + 1)})


def lr_lambda(total_steps: int, warmup_fraction: float, min_ratio: float = 0.0) -> Any:
    """Multiplier of the peak learning rate: linear warm-up, then linear decay to ``min_ratio``."""
    warmup = round(warmup_fraction * total_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        rest = max(1, total_steps - warmup)
        return max(min_ratio, 1.0 - (1.0 - min_ratio) * (step - warmup) / rest)

    return factor


def _parent_alive() -> bool:
    pid = os.environ.get("AUTOSCALE_PARENT_PID")
    if not pid:
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def _datasets(config: RunnerConfig, spec: RunSpec, domains: DomainInfo, info: DistInfo,
              continue_from: dict[str, Any] | None = None, micro: int | None = None) -> tuple[Any, Any]:
    """The run's training stream (an extension's: continued from its parent's end) and validation set."""
    from ...dataset import MixtureValidationDataset, ScaleAwareMixtureDataset

    options = {**proxy_dataset_options(spec, config.max_epochs), "rank": info.rank,
               "world_size": info.world_size,
               "output": "compact", "batch_size": micro or config.micro_batch_size, "verify": "size"}
    if spec.schedule == "fixed" and spec.extension is None:  # the planned counts as they are
        ds = ScaleAwareMixtureDataset.from_counts(domains.paths, spec.sequences, spec.seq_len, spec.seed,
                                                  **options)
    else:  # the plan's path, or an extension's mix of its new sequences after the parent's end: planned again
        weights = spec.plan if spec.schedule == "anytime" else spec.extension.weights if spec.extension else None
        ds = ScaleAwareMixtureDataset(domains.paths, weights, spec.total_tokens, spec.seq_len, spec.seed,
                                      schedule=spec.schedule, continue_from=continue_from, **options)
        if ds.sequences_per_domain != spec.sequences:
            raise ValueError(f"run {spec.run_id}: the dataset planned {ds.sequences_per_domain} sequences "
                             f"per domain, the run asked for {spec.sequences}")
    per_domain = max(1, config.eval.heldout_tokens_per_domain // spec.seq_len)
    val = MixtureValidationDataset(domains.paths, spec.seq_len, max_sequences_per_domain=per_domain,
                                   rank=info.rank, world_size=info.world_size, output="compact",
                                   verify="size")
    return ds, val


def _optimizer(model: torch.nn.Module, o: OptimizerConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW (decay on matrices only); fused on CUDA (one kernel for all parameters), PyTorch's default
    implementation elsewhere."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=o.lr, betas=o.betas, eps=o.eps, **fused)


def _deepspeed_config(config: RunnerConfig, micro: int) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": config.global_batch_size // (micro * config.procs),
        "train_batch_size": config.global_batch_size,
        "zero_optimization": {"stage": config.deepspeed.zero_stage},
        "gradient_clipping": config.optimizer.grad_clip,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if config.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    cfg.update(config.deepspeed.extra)
    return cfg


def train_run(config: RunnerConfig, spec: RunSpec, domains: DomainInfo, run_dir: str | os.PathLike[str], *,
              progress: bool | None = None) -> RunResult:
    """Train one run to the end (resuming from its checkpoint if one exists) and return its result.

    ``run_dir`` (``OUT/runs/<run_id>``) holds ``ckpt/`` while it runs and ``result.json`` at the end;
    ``progress``: show a progress bar (``None``: only on a terminal).

    Raises:
        Diverged: the training loss became NaN/inf (``failure.json`` written).
        RunLocked: another process is training this run.
    """
    from ..ledger import hold_run_lock

    if config.cpu_threads is not None:
        torch.set_num_threads(config.cpu_threads)
    info = setup_distributed(config.backend, config.device)
    lock = hold_run_lock(run_dir) if info.is_main else None
    try:
        if info.is_main and lock is None:
            raise RunLocked(f"run {spec.run_id}: another process is training it (its .train.lock is held)")
        return _Trainer(config, spec, domains, Path(run_dir), info).run(progress)
    finally:
        if lock is not None:
            os.close(lock)
        teardown(info)


@dataclass
class _Standing:
    """Where a run stands: what its checkpoints save and its result reports."""

    start: int
    """The step this attempt started at."""
    curve: list[EvalPoint]
    """The evaluations so far."""
    counts: torch.Tensor
    """This process's sequences of each domain trained so far (an extension's parent's excluded)."""
    times: TrainTimes
    """Time spent so far, earlier attempts included."""
    resumed: list[int]
    """The steps the attempts resumed at."""
    last_loss: float
    """The training loss of the last step."""


class _Trainer:
    def __init__(self, config: RunnerConfig, spec: RunSpec, domains: DomainInfo, run_dir: Path,
                 info: DistInfo) -> None:
        self.config, self.spec, self.domains, self.dir, self.info = config, spec, domains, run_dir, info
        self.family = config.model.family
        self.micro = config.micro_batch_size  # train.micro_batch: auto may change it in _build
        self.gas = config.grad_accum
        own = spec.total_sequences - spec.parent_sequences  # an extension trains only what follows its parent
        self.offset = spec.parent_sequences // config.global_batch_size  # the parent's steps
        self.steps = own // config.global_batch_size
        if own % config.global_batch_size or spec.parent_sequences % config.global_batch_size:
            raise ValueError(f"run {spec.run_id}: {own} sequences is not a whole number of "
                             f"global batches of {config.global_batch_size}")
        self.keep = spec.keeps_model or (spec.kind in ("target", "extension")
                                         and config.target.keep_checkpoints)
        self.hook: Any = None
        self.parent_dir = run_dir.parent / spec.extension.parent if spec.extension is not None else None
        self.settings = spec.training
        self.vocab = self.settings.model.vocab_size  # the loss's (a padded model has more rows)
        self.mask = None
        if self.family == "bert":
            self.mask = {"vocab_size": domains.vocab_size, "mask_id": domains.vocab_size,
                         "probability": config.model.mlm_probability}

    def _build(self) -> None:
        """Model, optimizer, LR scheduler and the step's forward: the DeepSpeed engine when there is one
        (``backend: deepspeed`` over several processes, or ``deepspeed.single_process: deepspeed``),
        otherwise the plain torch step (DDP over several processes), compiled if ``train.compile`` says so."""
        config, info = self.config, self.info
        prepare_device(config.train, info.device)
        torch.manual_seed(self.spec.seed)
        model = self.settings.model.build(self.domains.eos_id)
        self.num_params = parameter_count(model)
        model.to(info.device)
        if config.train.micro_batch == AUTO:
            per_process = config.global_batch_size // config.procs
            self.micro = measure_micro_batch(
                model, per_process=per_process, configured=config.micro_batch_size, seq_len=self.spec.seq_len,
                vocab=self.vocab, family=self.family, bf16=config.precision == "bf16",
                fraction=config.train.memory_fraction, device=info.device)
            self.gas = per_process // self.micro
        engine = config.backend == "deepspeed" and (info.world_size > 1
                                                    or config.deepspeed.single_process == "deepspeed")
        # the run's own learning rate: a proxy's may be ddo.proxy_lr (its settings hash what it trains with)
        o = replace(config.optimizer, lr=float(self.settings.optimizer.lr))
        optimizer = _optimizer(model, o, info.device if not engine else torch.device("cpu"))
        if self.spec.wsd is not None:  # a WSD trunk stretch or branch (ddo.schedule: wsd): of the global step
            self.lr_factor = wsd_lr_lambda(self.spec.wsd, self.offset, self.steps, o.min_lr_ratio)
        elif self.spec.extension is not None:  # a function of the global step: the parent's steps come first
            self.lr_factor = extension_lr_lambda(self.offset, self.steps, self.spec.extension.lr,
                                                 o.min_lr_ratio)
        else:
            self.lr_factor = lr_lambda(self.steps, o.warmup_fraction, o.min_lr_ratio)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self.lr_factor)
        self.model, self.optimizer, self.scheduler, self.engine = model, optimizer, scheduler, None
        self.forward: Any = model
        if engine:
            import deepspeed

            engine, optimizer, _, scheduler = deepspeed.initialize(
                model=model, optimizer=optimizer, lr_scheduler=scheduler,
                config=_deepspeed_config(config, self.micro))
            self.engine, self.optimizer, self.scheduler = engine, optimizer, scheduler
            self.forward = engine
            return
        if config.train.compiles(info.device.type):
            self.forward = torch.compile(model, mode=config.train.compile_mode)
        if info.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [info.device.index] if info.device.type == "cuda" else None
            self.forward = DistributedDataParallel(self.forward, device_ids=ids)

    def _micro_step(self, ids: torch.Tensor, domain: torch.Tensor, step: int, micro: int) -> float:
        """Forward (no labels: one loss, ours), backward; returns the micro-batch's mean token loss."""
        info, config = self.info, self.config
        if self.family == "bert":
            gen = torch.Generator(device=info.device)
            gen.manual_seed(((self.spec.seed * 1_000_003 + self.offset + step) * 1_009 + micro) * 64 + info.rank)
            inputs, labels = mask_tokens(ids, generator=gen, **self.mask)  # type: ignore[arg-type]
        else:
            inputs, labels = ids, ids
        if self.engine is not None:
            logits = self.engine(input_ids=inputs).logits
            losses, keep, mean, loss = self._losses(logits, inputs, labels, domain, micro)
            self.engine.backward(loss)
            self.engine.step()
        else:
            sync = nullcontext()
            if info.world_size > 1 and micro < self.gas - 1:
                sync = self.forward.no_sync()
            autocast = torch.autocast(device_type=info.device.type, dtype=torch.bfloat16,
                                      enabled=config.precision == "bf16")
            with sync, autocast:
                logits = self.forward(input_ids=inputs).logits
                losses, keep, mean, loss = self._losses(logits, inputs, labels, domain, micro)
                (loss / self.gas).backward()
        self._count_domains(losses.detach(), keep, domain)
        return float(mean.detach())

    def _losses(self, logits: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor, domain: torch.Tensor,
                micro: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The per-token losses (with their graph), their mask, their mean (the model's loss) and the loss to
        backpropagate: the mean, or what the run's step hook returns instead."""
        losses, keep = token_cross_entropy(logits, labels, self.family, vocab_size=self.vocab)
        mean = losses.sum() / keep.sum().clamp(min=1)
        if self.hook is None:
            return losses, keep, mean, mean
        from .hooks import HookBatch

        loss = self.hook.loss(HookBatch(inputs=inputs, labels=labels, logits=logits, domain=domain,
                                        micro=micro,
                                        last_micro=micro == self.gas - 1, losses=losses, mask=keep))
        return losses, keep, mean, mean if loss is None else loss

    def _count_domains(self, losses: torch.Tensor, keep: torch.Tensor, domain: torch.Tensor) -> None:
        self.meter.update(losses, domain, mask=keep)
        observe = getattr(self.hook, "observe_losses", None)
        if observe is not None:  # e.g. an online controller's loss window (protocol in .hooks)
            observe(losses, domain, keep)

    def _optimizer_step(self) -> None:
        if self.engine is not None:
            return  # the engine stepped at the accumulation boundary
        clip = self.config.optimizer.grad_clip
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _validation_losses(self, loader: Any, names: Sequence[str]) -> dict[str, float]:
        forward = self.engine if self.engine is not None else self.model  # not compiled: eval shapes differ
        forward.eval()
        try:
            return validation_losses(forward, loader, names, self.info, family=self.family, mask=self.mask,
                                     passes=self.config.eval.mlm_passes, vocab_size=self.vocab)
        finally:
            forward.train()

    def _parent(self) -> FinalState | None:
        """An extension's parent ``final_state.json`` (checked against the spec); ``None`` for other runs."""
        if self.parent_dir is None:
            return None
        state = parent_state(self.parent_dir)
        where = os.fspath(self.parent_dir / layout.FINAL_CHECKPOINT_DIR)
        if state is None:
            raise FileNotFoundError(f"run {self.spec.run_id} extends run {self.parent_dir.name}, whose final "
                                    f"checkpoint {where!r} is missing: set target.keep_checkpoints: true and "
                                    "train that run again")
        if int(state.dataset[CURSOR_KEY]) != self.spec.parent_sequences:
            raise ValueError(f"run {self.spec.run_id} extends {self.spec.parent_sequences} sequences of run "
                             f"{self.parent_dir.name}, but {where!r} ends at {state.dataset[CURSOR_KEY]}")
        return state

    def _start_from_parent(self) -> None:
        """Load the parent's final model, optimiser and RNG; set the learning rate of the first new step."""
        assert self.parent_dir is not None
        if load_checkpoint(self.parent_dir / layout.FINAL_CHECKPOINT_DIR, self, self.info) is None:
            raise FileNotFoundError(f"run {self.parent_dir.name} has no complete final checkpoint in "
                                    f"{os.fspath(self.parent_dir / layout.FINAL_CHECKPOINT_DIR)!r}")
        # the schedule goes on at the parent's last step with this run's factor: one step from the one before
        # sets every group's learning rate to base x factor(offset), as the schedule's own steps do
        self.scheduler.last_epoch = self.offset - 1
        self.scheduler.step()

    def _restore(self, ckpt_dir: Path, extends: bool) -> tuple[CheckpointState | None, bool]:
        """Load the newest checkpoint (or start an extension from its parent); returns its state (``None``: a
        fresh start) and whether it is the kept final one (the run was killed before writing its result)."""
        state = load_checkpoint(ckpt_dir, self, self.info)
        if state is None and self.keep:
            state = load_checkpoint(self.dir / layout.FINAL_CHECKPOINT_DIR, self, self.info)
            if state is not None:
                return state, True
        if state is None and extends:
            self._start_from_parent()
        return state, False

    def _resume(self, state: CheckpointState | None, names: Sequence[str], ds: Any) -> _Standing:
        """Where the run stands: from the checkpoint's state (its hook, dataset and meter restored) or at
        0."""
        if state is None:
            return _Standing(start=0, curve=[], counts=torch.zeros(len(names), dtype=torch.int64),
                             times=TrainTimes(),
                             resumed=[], last_loss=math.nan)
        if self.hook is not None:
            self.hook.load_state_dict(state.step_hook or {})
        ds.load_state_dict(state.dataset)
        if state.train_meter:
            self.meter.load_state_dict(state.train_meter[self.info.rank])
        return _Standing(start=state.step, curve=list(state.curve),
                         counts=torch.tensor(state.counts[self.info.rank], dtype=torch.int64),
                         times=replace(state.elapsed), resumed=[*state.resumed_at, state.step],
                         last_loss=state.last_loss)

    def _state(self, now: _Standing, ds: Any, done: int) -> CheckpointState:
        """What a checkpoint after ``done`` steps records besides model, optimiser and RNG."""
        info = self.info
        return CheckpointState(
            step=done, curve=list(now.curve), elapsed=replace(now.times), resumed_at=list(now.resumed),
            dataset=ds.state_dict(samples_taken=(done - now.start) * self.gas * self.micro),
            counts=all_gather_objects(now.counts.tolist(), info), last_loss=now.last_loss,
            train_meter=all_gather_objects(self.meter.state_dict(), info),
            step_hook=None if self.hook is None else self.hook.state_dict())

    def _keep_final(self, ckpt_dir: Path, state: CheckpointState) -> None:
        """Save the final checkpoint and move it to ``final_ckpt/`` (all ranks call this)."""
        save_checkpoint(ckpt_dir, self, self.info, state)
        if self.info.is_main:
            atomic_write_json(ckpt_dir / layout.FINAL_STATE, FinalState(
                run_id=self.spec.run_id, steps=self.offset + self.steps, sequences=self.spec.total_sequences,
                dataset=state.dataset).to_json())
            final = self.dir / layout.FINAL_CHECKPOINT_DIR
            shutil.rmtree(final, ignore_errors=True)
            os.replace(ckpt_dir, final)

    def run(self, progress: bool | None) -> RunResult:
        from torch.utils.data import DataLoader

        config, spec, info = self.config, self.spec, self.info
        parent = self._parent()
        self._build()  # first: train.micro_batch: auto sets the micro-batch the stream is cut into
        ds, val = _datasets(config, spec, self.domains, info, None if parent is None else parent.dataset,
                            self.micro)
        names = list(ds.domain_names)
        base = torch.tensor([int(parent.dataset[DOMAIN_COUNTS_KEY][d]) for d in names] if parent else
                            [0] * len(names), dtype=torch.int64)  # the parent's sequences per domain
        self.meter = DomainLossMeter(names)  # per-domain training loss between evaluations
        # own generators: creating a DataLoader iterator must not draw from the global RNG (dropout's)
        val_loader = DataLoader(val, batch_size=config.eval.batch_size, generator=torch.Generator())
        # before the checkpoint: an online run's dataset state loads only in online mode
        self._bind_hook(names, ds)
        ckpt_dir = self.dir / layout.CHECKPOINT_DIR
        state, from_final = self._restore(ckpt_dir, parent is not None)
        now = self._resume(state, names, ds)
        loader = DataLoader(ds, batch_size=None, num_workers=config.num_workers,
                            pin_memory=info.device.type == "cuda", generator=torch.Generator())
        self._loop(now, iter(loader), val_loader, base, ds, progress)
        if self.keep and not from_final:
            self._keep_final(ckpt_dir, self._state(now, ds, self.steps))
        new = all_reduce_sum(now.counts.clone(), info)
        result = self._result(names, new + base, new, now)
        if info.is_main:
            atomic_write_json(self.dir / layout.RESULT, result.to_json())
            if not self.keep:
                shutil.rmtree(ckpt_dir, ignore_errors=True)
        return result

    def _loop(self, now: _Standing, it: Iterator[Any], val_loader: Any, base: torch.Tensor, ds: Any,
              progress: bool | None) -> None:
        """Train from ``now.start`` to the last step: evaluate at the spec's points, checkpoint every
        ``checkpoint_every`` steps (the last step excepted)."""
        from tqdm.auto import tqdm

        config, info = self.config, self.info
        names, ckpt_dir = list(ds.domain_names), self.dir / layout.CHECKPOINT_DIR
        at = set(eval_steps(self.steps, self.spec.eval_points))
        show = info.is_main and (sys.stderr.isatty() if progress is None else progress)
        bar = tqdm(total=self.steps, initial=now.start, desc=self.spec.name, unit="step", disable=not show,
                   leave=False)
        self.forward.train()
        for step in range(now.start, self.steps):
            if not _parent_alive():
                os._exit(_ORPHAN_EXIT)  # the runner was killed: stop at once, keep the last checkpoint
            now.last_loss = self._train_step(step, it, now, len(names))
            if not math.isfinite(now.last_loss):
                self._fail(f"diverged: training loss {now.last_loss} at step {step + 1}/{self.steps}")
            bar.update(1)
            bar.set_postfix(loss=f"{now.last_loss:.3f}")
            done = step + 1
            if done in at:
                now.curve.append(self._eval_point(done, val_loader, names, base, now))
            if done % config.checkpoint_every == 0 and done < self.steps:
                save_checkpoint(ckpt_dir, self, info, self._state(now, ds, done))
        bar.close()

    def _train_step(self, step: int, it: Iterator[Any], now: _Standing, domains: int) -> float:
        """One optimiser step over ``gas`` micro-batches; returns its mean training loss over the
        processes."""
        info = self.info
        t0 = time.perf_counter()
        loss_sum = 0.0
        for micro in range(self.gas):
            tw = time.perf_counter()
            batch = next(it)
            ids = batch["input_ids"].to(info.device, non_blocking=True).long()
            now.counts += torch.bincount(batch["domain"], minlength=domains)
            now.times.data_wait_s += time.perf_counter() - tw
            loss_sum += self._micro_step(ids, batch["domain"], step, micro)
        self._optimizer_step()
        if self.hook is not None:
            self.hook.after_step(step + 1)
        mean = all_reduce_sum(torch.tensor([loss_sum / self.gas], dtype=torch.float64), info)
        now.times.train_s += time.perf_counter() - t0
        return float(mean[0]) / info.world_size

    def _eval_point(self, done: int, val_loader: Any, names: list[str], base: torch.Tensor,
                    now: _Standing) -> EvalPoint:
        """Evaluate after ``done`` steps: validation and training losses per domain, tokens seen so far."""
        te = time.perf_counter()
        losses = self._validation_losses(val_loader, names)
        now.times.eval_s += time.perf_counter() - te
        seen = [sum(c) + int(b)
                for *c, b in zip(*all_gather_objects(now.counts.tolist(), self.info), base.tolist(),
                                                 strict=True)]
        train = self.meter.compute(all_reduce=self.info.world_size > 1)
        self.meter.reset()
        at_step = self.offset + done
        seq_len = self.spec.seq_len
        return EvalPoint(
            step=at_step, tokens=at_step * self.config.global_batch_size * seq_len,
            domain_tokens={d: int(n) * seq_len for d, n in zip(names, seen, strict=True)},
            train_loss=now.last_loss, losses=losses,
            train_losses={d: v if math.isfinite(v) else None for d, v in train.items()},
            mean_loss=mean_objective(losses, MEAN_LOSS), mean_ppl=mean_objective(losses, MEAN_PPL))

    def _bind_hook(self, names: Sequence[str], dataset: Any) -> None:
        """Build and bind the spec's step hook (none: ``self.hook`` stays ``None``)."""
        from .hooks import HookContext, make_step_hook

        self.hook = make_step_hook(self.spec.hook)
        if self.hook is not None:
            self.hook.bind(HookContext(spec=self.spec, config=self.config, domains=self.domains,
                                       names=tuple(names),
                                       info=self.info, run_dir=self.dir, model=self.model, dataset=dataset))

    def _fail(self, reason: str) -> None:
        if self.info.is_main:
            atomic_write_json(self.dir / layout.FAILURE,
                              RunFailure(run_id=self.spec.run_id, reason=reason).to_json())
        raise Diverged(reason)

    def _result(self, names: list[str], total: torch.Tensor, new: torch.Tensor, now: _Standing) -> RunResult:
        spec, config, info = self.spec, self.config, self.info
        curve, times = now.curve, now.times
        tokens = {d: int(total[i]) * spec.seq_len for i, d in enumerate(names)}
        new_tokens = int(new.sum()) * spec.seq_len  # trained by this run (an extension's parent's excluded)
        final = curve[-1].losses if curve else {}
        train_s = times.train_s
        extension = None if spec.extension is None else RunExtension(
            parent=spec.extension.parent, parent_tokens=spec.parent_sequences * spec.seq_len,
            new_tokens=new_tokens, new_steps=self.steps, mix=spec.extension.mix, lr=spec.extension.lr)
        return RunResult(
            run_id=spec.run_id, name=spec.name, kind=spec.kind, scale=spec.scale, label=spec.label,
            seed=spec.seed,
            status="done", schedule=spec.schedule, tokens=tokens, total_tokens=sum(tokens.values()),
            planned_tokens=spec.tokens, weights=spec.weights, losses=final, curve=curve,
            mean_loss=mean_objective(final, MEAN_LOSS) if final else math.nan,
            mean_ppl=mean_objective(final, MEAN_PPL) if final else math.nan,
            final_train_loss=now.last_loss, steps=self.offset + self.steps, parameters=self.num_params,
            wall_time_s=train_s + times.eval_s, train_time_s=train_s, eval_time_s=times.eval_s,
            data_wait_s=times.data_wait_s,
            data_wait_fraction=times.data_wait_s / train_s if train_s > 0 else 0.0,
            tokens_per_s=new_tokens / train_s if train_s > 0 else 0.0,
            device=str(info.device) if info.device.type != "cuda"
            else torch.cuda.get_device_name(info.device),
            world_size=info.world_size, backend=config.backend, precision=config.precision,
            resumed_at=now.resumed, finished_at=time.time(), extension=extension,
            step_hook=None if self.hook is None else self.hook.summary())


def write_job(path: str | os.PathLike[str], config: RunnerConfig, spec: RunSpec, domains: DomainInfo) -> None:
    """Write what ``python -m autoscale_data.runner.training.train --job PATH`` needs to train ``spec``."""
    raw = config_to_dict(config)
    base_dir = raw.pop("base_dir")
    atomic_write_json(path, JobFile(config=raw, base_dir=base_dir, spec=spec,
                                    domains=config_to_dict(domains)).to_json())


def load_job(path: str | os.PathLike[str]) -> tuple[RunnerConfig, RunSpec, DomainInfo]:
    """Read a ``job.json`` written by :func:`write_job`."""
    job: JobFile | None = layout.read(Path(path).parent, Path(path).name, kind=layout.JOB)
    if job is None:
        raise FileNotFoundError(f"job file {os.fspath(path)!r} is missing or is not JSON")
    config = config_from_dict(job.config, job.base_dir)
    domains = DomainInfo(**{k: (tuple(v) if k == "names" else v) for k, v in job.domains.items()})
    return config, job.spec, domains


def run_job(path: str | os.PathLike[str], *, progress: bool | None = None) -> int:
    """Train the run of ``job.json`` in this process: exit code 0 done, 3 diverged, 4 locked."""
    config, spec, domains = load_job(path)
    try:
        train_run(config, spec, domains, Path(path).parent, progress=progress)
    except Diverged as exc:
        print(f"run {spec.run_id} {exc}", file=sys.stderr)
        return DIVERGED_EXIT
    except RunLocked as exc:
        print(exc, file=sys.stderr)
        return LOCKED_EXIT
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Program entry: train the run described by ``--job`` (exit 0 done, 3 diverged, 4 locked)."""
    parser = argparse.ArgumentParser(prog="python -m autoscale_data.runner.training.train")
    parser.add_argument("--job", required=True, help="job.json written by the runner")
    parser.add_argument("--progress", action="store_true", help="show a progress bar")
    parser.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return run_job(args.job, progress=args.progress or None)


if __name__ == "__main__":
    exit_process(main())
