"""Ranked classification with a causal LM: the log-likelihood of every answer, and the task's scores.

Each (context, answer) pair is scored as the sum of the model's log-probabilities of the answer's tokens
after the context's (both encoded apart, without special tokens; an empty context is the EOS token, as
lm-eval does). A sequence longer than the model's context keeps its last tokens. Pairs are sorted by
length and scored in batches of left-padded sequences, whose output layer runs on the answers' positions
only; where every answer of a context is a single token (BoolQ's `` yes`` / `` no`` under a BPE), one
forward pass of the context scores them all.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .._checks import check_int
from .records import TaskScore
from .tasks import Example

__all__ = ["answer_loglikelihoods", "score_task", "task_score"]


def _ids(tokenizer: Any, texts: Sequence[str]) -> dict[str, list[int]]:
    unique = sorted(set(texts))
    return {t: [int(i) for i in ids] for t, ids in zip(unique, tokenizer.encode_batch(unique), strict=True)}


def _max_length(model: Any) -> int | None:
    cfg = getattr(model, "config", None)
    for name in ("n_positions", "max_position_embeddings"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _last_logits(model: Any, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                 keep: int) -> torch.Tensor:
    """The logits of the last ``keep`` columns only (transformers' ``logits_to_keep``: the output layer, over
    a large vocabulary the costliest part, runs on those alone); models without it get sliced."""
    try:
        logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                       logits_to_keep=keep).logits
    except TypeError:  # a model whose forward takes no logits_to_keep
        logits = model(input_ids=input_ids, attention_mask=mask, position_ids=positions).logits
    return logits[:, -keep:].float()


@torch.no_grad()
def answer_loglikelihoods(model: Any, tokenizer: Any, examples: Sequence[Example], *, batch_size: int = 32,
                          device: str | torch.device | None = None) -> list[list[float]]:
    """The log-likelihood (nats) of each answer of each example, in the examples' order.

    Args:
        model: a causal LM called as ``model(input_ids=..., attention_mask=...)`` that returns ``.logits``
            (a transformers model); put in eval mode here.
        tokenizer: :class:`~autoscale_data.store.Tokenizer` (``encode_batch``, ``eos_id``).
        examples: the questions (:func:`~.tasks.load_examples`).
        batch_size: sequences per forward pass.
        device: where to run (default: the model's).

    Raises:
        ValueError: an answer that encodes to no token, or a bad ``batch_size``.
    """
    check_int("batch_size", batch_size)
    model.eval()
    dev = torch.device(device) if device is not None else next(model.parameters()).device
    limit = _max_length(model)
    ids = _ids(tokenizer, [t for e in examples for t in (*e.contexts, *e.continuations)])
    vocab = getattr(tokenizer, "vocab_size", None)
    out: list[list[float]] = [[math.nan] * len(e.contexts) for e in examples]
    rows = _requests(examples, ids, tokenizer)
    for start in range(0, len(rows), batch_size):
        _score_batch(model, rows[start:start + batch_size], limit, vocab, dev, out)
    return out


# (context, answer, owners (example, choice, token))
_Row = tuple[list[int], list[int], list[tuple[int, int, int]]]


def _requests(examples: Sequence[Example], ids: dict[str, list[int]], tokenizer: Any) -> list[_Row]:
    """One row per (example, choice), or one per context shared by one-token answers (its answer empty, its
    owners every such choice with its token); the longest first."""
    full: list[tuple[int, int, list[int], list[int]]] = []
    shared: dict[tuple[int, ...], list[tuple[int, int, int]]] = {}
    for i, e in enumerate(examples):
        pairs = []
        for context, answer in zip(e.contexts, e.continuations, strict=True):
            ctx, cont = ids[context] or [int(tokenizer.eos_id)], ids[answer]
            if not cont:
                raise ValueError(f"example {e.doc_id}: answer {answer!r} encodes to no token")
            pairs.append((ctx, cont))
        if all(len(c) == 1 for _, c in pairs) and len({tuple(x) for x, _ in pairs}) == 1:
            shared.setdefault(tuple(pairs[0][0]), []).extend((i, k, c[0]) for k, (_, c) in enumerate(pairs))
        else:
            full.extend((i, k, ctx, cont) for k, (ctx, cont) in enumerate(pairs))
    rows: list[_Row] = [(list(ctx), [], owners) for ctx, owners in shared.items()]
    rows += [(ctx, cont, [(i, k, -1)]) for i, k, ctx, cont in full]
    rows.sort(key=lambda r: -(len(r[0]) + len(r[1])))
    return rows


def _score_batch(model: Any, batch: list[_Row], limit: int | None, vocab: int | None, dev: torch.device,
                 out: list[list[float]]) -> None:
    """One forward pass over ``batch``: each answer's log-likelihood into ``out[example][choice]``."""
    seqs = []
    for ctx, cont, _ in batch:
        seq = (ctx + cont)[:-1] if cont else ctx
        seqs.append(seq[-limit:] if limit is not None else seq)
    # left-padded: every row ends at the last column, so the answers' logits are the last `keep` columns
    width = max(len(s) for s in seqs)
    keep = max(min(max(1, len(cont)), len(seq)) for (_, cont, _), seq in zip(batch, seqs, strict=True))
    input_ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for b, s in enumerate(seqs):
        input_ids[b, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[b, width - len(s):] = 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    logits = _last_logits(model, input_ids.to(dev), mask.to(dev), positions.to(dev), keep)
    if vocab is not None:  # rows past the tokenizer's vocabulary (a padded output layer) are no tokens
        logits = logits[..., :vocab]
    # log p(token) = logit(token) - logsumexp(logits), for the whole batch at once (answers right-aligned)
    targets = torch.zeros((len(seqs), keep), dtype=torch.long)
    scored = torch.zeros((len(seqs), keep), dtype=torch.float64)
    for b, (_, cont, _) in enumerate(batch):
        m = min(len(cont), len(seqs[b]))  # a truncated answer keeps its last m tokens
        if m:
            targets[b, keep - m:] = torch.tensor(cont[len(cont) - m:], dtype=torch.long)
            scored[b, keep - m:] = 1.0
    norm = torch.logsumexp(logits, dim=-1)
    logp = (logits.gather(2, targets.to(logits.device)[:, :, None])[:, :, 0] - norm).double().cpu()
    sums = (logp * scored).sum(dim=1)
    last = logits[:, -1] - norm[:, -1:]  # the next-token log-probabilities after each row
    for b, (_, cont, owners) in enumerate(batch):
        if cont:
            i, k, _ = owners[0]
            out[i][k] = float(sums[b])
            continue
        for i, k, token in owners:  # shared context: every one-token answer from one distribution
            out[i][k] = float(last[b, token])


def task_score(task: str, examples: Sequence[Example], loglikelihoods: Sequence[Sequence[float]],
               seconds: float = 0.0) -> TaskScore:
    """Accuracy, length-normalised accuracy and the gold answer's bits per byte from the answers'
    log-likelihoods.

    Ties go to the first answer (``argmax``). ``acc_norm`` divides each answer's log-likelihood by its
    length in characters; bits per byte are ``-ll(gold) / ln 2 / utf8_bytes(gold)``, averaged over questions.
    """
    if not examples:
        raise ValueError(f"task {task!r}: no example to score")
    acc, norm, bpb, chance = [], [], [], []
    for e, ll in zip(examples, loglikelihoods, strict=True):
        values = np.asarray(ll, dtype=float)
        chars = np.asarray([max(1, len(c)) for c in e.continuations], dtype=float)
        acc.append(float(int(np.argmax(values)) == e.gold))
        norm.append(float(int(np.argmax(values / chars)) == e.gold))
        gold = e.continuations[e.gold]
        bpb.append(-values[e.gold] / math.log(2) / max(1, len(gold.encode("utf-8"))))
        chance.append(1.0 / len(values))
    return TaskScore(task=task, examples=len(examples), acc=float(np.mean(acc)),
                     acc_norm=float(np.mean(norm)),
                     bpb=float(np.mean(bpb)), chance=float(np.mean(chance)), seconds=seconds)


def score_task(model: Any, tokenizer: Any, task: str, examples: Sequence[Example], *, batch_size: int = 32,
               device: str | torch.device | None = None) -> TaskScore:
    """:func:`answer_loglikelihoods` then :func:`task_score`, timed."""
    start = time.perf_counter()
    ll = answer_loglikelihoods(model, tokenizer, examples, batch_size=batch_size, device=device)
    return task_score(task, examples, ll, time.perf_counter() - start)
