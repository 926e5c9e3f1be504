"""The fast training step: one per-token cross-entropy (loss, meter, hooks), padded vocabulary, step settings."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscale_data.dataset import DomainLossMeter
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.models import build_model, model_config_dict, padded_vocab, token_cross_entropy
from autoscale_data.runner.training.step import choose_micro_batch, measure_micro_batch

VOCAB = 100  # not a multiple of 64: padding adds 28 rows


def _model(preset: str = "gpt2-tiny", *, rows: int | None = None, seed: int = 0) -> torch.nn.Module:
    fields = model_config_dict(preset, {}, vocab_size=VOCAB, seq_len=16, dropout=0.0)
    torch.manual_seed(seed)
    return build_model(preset, fields, eos_id=0, vocab_rows=rows)


def _old_meter_losses(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The per-domain meter's losses as the trainer computed them before (a second cross-entropy)."""
    lg = logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1),
                                             reduction="none").view(ids[:, 1:].shape)


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(("recompute", "chunk_bytes"), [(False, 1 << 28), (True, 1 << 28), (True, 4 * VOCAB * 5)])
def test_new_step_matches_hf_loss_and_gradients_in_fp32(recompute: bool, chunk_bytes: int) -> None:
    ids = torch.randint(0, VOCAB, (3, 16), generator=torch.Generator().manual_seed(1))
    old, new = _model(), _model()
    out = old(input_ids=ids, labels=ids)  # the old path: HF's own loss
    out.loss.backward()
    logits = new(input_ids=ids).logits  # the new path: no labels, our loss
    losses, mask = token_cross_entropy(logits, ids, "gpt2", chunk_bytes=chunk_bytes, recompute=recompute)
    mean = losses.sum() / mask.sum()
    mean.backward()
    assert float(mean.detach()) == pytest.approx(float(out.loss.detach()), rel=1e-6)
    assert torch.equal(losses.detach(), _old_meter_losses(out.logits.detach(), ids))  # the meter's values unchanged
    g_old, g_new = _grads(old), _grads(new)
    assert g_old.keys() == g_new.keys()
    for name in g_old:
        torch.testing.assert_close(g_new[name], g_old[name], rtol=1e-5, atol=1e-7, msg=name)


def test_new_step_matches_hf_loss_under_bf16_autocast() -> None:
    ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(2))
    old, new = _model(), _model()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = old(input_ids=ids, labels=ids).loss
        logits = new(input_ids=ids).logits
        losses, mask = token_cross_entropy(logits, ids, "gpt2")
    assert losses.dtype == torch.float32
    assert float((losses.sum() / mask.sum()).detach()) == pytest.approx(float(ref.detach()), rel=1e-2)
    (losses.sum() / mask.sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in new.parameters() if p.grad is not None)


def test_padded_vocabulary_gives_the_same_model_loss_and_gradients() -> None:
    rows = padded_vocab(VOCAB, 64)
    assert rows == 128 and padded_vocab(128, 64) == 128 and padded_vocab(VOCAB, 1) == VOCAB
    plain, padded = _model(), _model(rows=rows)
    assert padded.get_input_embeddings().weight.shape[0] == rows
    assert padded.lm_head.weight is padded.transformer.wte.weight  # still tied
    assert torch.equal(padded.transformer.wte.weight[:VOCAB], plain.transformer.wte.weight)
    assert not padded.transformer.wte.weight[VOCAB:].any()
    ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(3))
    means = []
    for model in (plain, padded):
        losses, mask = token_cross_entropy(model(input_ids=ids).logits, ids, "gpt2", vocab_size=VOCAB,
                                           recompute=model is padded)  # both paths leave the extra logits out
        mean = losses.sum() / mask.sum()
        mean.backward()
        means.append(float(mean))
    assert means[1] == pytest.approx(means[0], rel=1e-6)
    g = padded.transformer.wte.weight.grad
    assert not g[VOCAB:].any()  # the extra rows learn nothing
    torch.testing.assert_close(g[:VOCAB], plain.transformer.wte.weight.grad, rtol=1e-5, atol=1e-7)


def test_padded_bert_keeps_its_loss() -> None:
    fields = model_config_dict("bert-tiny", {}, vocab_size=VOCAB, seq_len=16, dropout=0.0)
    torch.manual_seed(0)
    plain = build_model("bert-tiny", fields)
    torch.manual_seed(0)
    padded = build_model("bert-tiny", fields, vocab_rows=padded_vocab(VOCAB + 1, 64))
    ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(4))
    labels = torch.where(torch.arange(16) % 3 == 0, ids, torch.full_like(ids, -100))
    ref = plain(input_ids=ids, labels=labels).loss
    losses, mask = token_cross_entropy(padded(input_ids=ids).logits, labels, "bert", vocab_size=VOCAB + 1)
    assert int(mask.sum()) == int((labels != -100).sum())
    assert float(losses.sum() / mask.sum()) == pytest.approx(float(ref), rel=1e-6)


def test_per_domain_meter_equals_a_reference_mean() -> None:
    ids = torch.randint(0, VOCAB, (4, 16), generator=torch.Generator().manual_seed(5))
    domain = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        losses, mask = token_cross_entropy(_model()(input_ids=ids).logits, ids, "gpt2")
    meter = DomainLossMeter(["a", "b"])
    meter.update(losses, domain, mask=mask)
    got = meter.compute()
    for d, name in enumerate(["a", "b"]):
        rows = losses[domain == d]
        assert got[name] == pytest.approx(float(rows.double().mean()), rel=1e-6)


def test_token_cross_entropy_rejects_bad_arguments() -> None:
    logits = torch.zeros(1, 4, 8)
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="family"):
        token_cross_entropy(logits, ids, "t5")
    with pytest.raises(ValueError, match="vocab_size 9"):
        token_cross_entropy(logits, ids, "gpt2", vocab_size=9)
    with pytest.raises(ValueError, match="vocab_rows 5"):
        build_model("gpt2-tiny", model_config_dict("gpt2-tiny", {}, vocab_size=8, seq_len=4), vocab_rows=5)


# ------------------------------------------------------------------------------------- micro-batch: auto
def test_choose_micro_batch_takes_the_largest_divisor_that_fits() -> None:
    assert choose_micro_batch(64, 8, fixed_bytes=10, per_sequence_bytes=1, budget_bytes=42) == 32
    assert choose_micro_batch(64, 8, fixed_bytes=10, per_sequence_bytes=1, budget_bytes=1e9) == 64
    assert choose_micro_batch(48, 8, fixed_bytes=0, per_sequence_bytes=1, budget_bytes=20) == 16
    assert choose_micro_batch(64, 8, fixed_bytes=100, per_sequence_bytes=1, budget_bytes=50) == 1  # nothing fits
    with pytest.raises(ValueError, match="micro-batch 5"):
        choose_micro_batch(64, 5, fixed_bytes=0, per_sequence_bytes=1, budget_bytes=1)
    with pytest.raises(ValueError, match=">= 0"):
        choose_micro_batch(64, 8, fixed_bytes=-1, per_sequence_bytes=1, budget_bytes=1)


@settings(max_examples=60, deadline=None)
@given(per=st.integers(1, 512), fixed=st.floats(0, 1e3), seq=st.floats(0, 1e2), budget=st.floats(0, 1e4))
def test_chosen_micro_batch_divides_and_fits(per: int, fixed: float, seq: float, budget: float) -> None:
    m = choose_micro_batch(per, 1, fixed_bytes=fixed, per_sequence_bytes=seq, budget_bytes=budget)
    assert per % m == 0
    if fixed + seq <= budget:  # one sequence fits: the choice fits, and the next divisor up does not
        assert fixed + m * seq <= budget
        bigger = [d for d in range(m + 1, per + 1) if per % d == 0]
        assert not bigger or fixed + bigger[0] * seq > budget


def test_auto_micro_batch_keeps_the_configured_one_on_the_cpu() -> None:
    model = _model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    m = measure_micro_batch(model, per_process=16, configured=4, seq_len=16, vocab=VOCAB, family="gpt2", bf16=False,
                            fraction=0.8, device=torch.device("cpu"))
    assert m == 4 and all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_train_section_is_validated_and_compiles_only_on_cuda_by_default() -> None:
    base = {"domains": {"a": "x", "b": "y"}, "ddo": {"budgets": [4096, 8192]}, "target": {"budget": 16384},
            "seq_len": 32, "micro_batch_size": 4, "global_batch_size": 8}
    cfg = config_from_dict(base)
    assert cfg.dropout == 0.0  # pre-training default, not HF's 0.1
    assert cfg.train.compiles("cuda") and not cfg.train.compiles("cpu")
    assert config_from_dict({**base, "train": {"compile": True}}).train.compiles("cpu")
    assert config_from_dict({**base, "dropout": None}).dropout is None  # HF's own defaults, when asked
    for bad, match in [({"compile": "yes"}, "train.compile"), ({"micro_batch": 8}, "train.micro_batch"),
                       ({"pad_vocab": 0}, "train.pad_vocab"), ({"memory_fraction": 1.5}, "train.memory_fraction"),
                       ({"tf32": "on"}, "train.tf32"), ({"compile_mode": "fast"}, "train.compile_mode")]:
        with pytest.raises(ValueError, match=match):
            config_from_dict({**base, "train": bad})
    with pytest.raises(ValueError, match="deepspeed.single_process"):
        config_from_dict({**base, "deepspeed": {"single_process": "zero"}})


def test_small_proxies_benchmark_skips_cleanly_without_cuda() -> None:
    import subprocess
    import sys

    from paths import BENCHMARKS

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the benchmark would run")
    out = subprocess.run([sys.executable, str(BENCHMARKS / "bench_small_proxies.py")], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("skipped: no CUDA")


def test_one_process_of_backend_deepspeed_trains_the_torch_step(tmp_path) -> None:
    pytest.importorskip("deepspeed")
    from runner_helpers import tiny_config, tiny_stores

    from autoscale_data.runner.planning.data import inspect_domains
    from autoscale_data.runner.planning.specs import target_spec
    from autoscale_data.runner.training import train as train_mod
    from autoscale_data.runner.training.dist import DistInfo

    cfg = config_from_dict(tiny_config(tiny_stores(tmp_path / "stores"), backend="deepspeed"))
    domains = inspect_domains(cfg)
    spec = target_spec(cfg, domains, "mix", {"a": 0.5, "b": 0.5}, seed=0)
    info = DistInfo(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"), initialized_here=False)
    trainer = train_mod._Trainer(cfg, spec, domains, tmp_path / "run", info)
    trainer._build()
    assert trainer.engine is None and isinstance(trainer.optimizer, torch.optim.AdamW)
    assert trainer.forward is trainer.model  # not compiled on the CPU by default
