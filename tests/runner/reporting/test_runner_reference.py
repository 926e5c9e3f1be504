"""Reference losses of the held-out data (unigram, uniform guess), the report's warning when the targets
do not beat them, and the masked-LM evaluation passes that raise the scored tokens."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers_store import write_synthetic_store
from runner_helpers import fake_config, fake_domains, fake_run

from autoscale_data.runner.reporting.reference import not_beating_unigram, reference_losses, unigram_entropy
from autoscale_data.runner.reporting.report import write_report
from autoscale_data.runner.reporting.report_types import Report
from autoscale_data.runner.reporting.summary import format_summary
from autoscale_data.runner.training.dist import DistInfo
from autoscale_data.runner.training.validation_loss import validation_losses
from autoscale_data.store import TokenStore


def _stores(root: Path) -> dict[str, Path]:
    for i, name in enumerate(("a", "b")):
        write_synthetic_store(root, name, 4_000, seed=i, val_tokens=700)
    return {n: root / n for n in ("a", "b")}


def test_unigram_loss_is_the_entropy_of_the_scored_heldout_tokens(tmp_path: Path) -> None:
    paths = _stores(tmp_path)
    causal = reference_losses(paths, seq_len=32, heldout_tokens_per_domain=320, vocab_size=257, family="gpt2")
    masked = reference_losses(paths, seq_len=32, heldout_tokens_per_domain=320, vocab_size=257, family="bert",
                              mlm_probability=0.15, mlm_passes=4)
    for d, p in paths.items():
        val = np.asarray(TokenStore(p).val.tokens(0, 320))  # the first 10 sequences of 32 tokens
        seqs = val.reshape(10, 32)
        assert masked[d].unigram == pytest.approx(unigram_entropy(np.bincount(seqs.ravel(), minlength=257)))
        assert causal[d].unigram == pytest.approx(unigram_entropy(np.bincount(seqs[:, 1:].ravel(), minlength=257)))
        assert causal[d].tokens == 310 and causal[d].scored_tokens == 310 and causal[d].uniform == math.log(257)
        assert masked[d].tokens == 320 and masked[d].scored_tokens == pytest.approx(320 * 0.15 * 4)
    assert unigram_entropy(np.array([5, 5, 0])) == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="family = 'llama'"):
        reference_losses(paths, seq_len=32, heldout_tokens_per_domain=320, vocab_size=257, family="llama")


def test_the_report_warns_for_targets_that_do_not_beat_the_unigram_loss(tmp_path: Path) -> None:
    for seed in (0, 1):
        fake_run(tmp_path, f"f{seed}", "autoscale", seed, [6.0, 5.5, 5.2 + 0.1 * seed])  # a: 5.25 mean, above 5.0
        fake_run(tmp_path, f"u{seed}", "uniform", seed, [6.0, 5.0, 4.5])  # below both references
    fake_config(tmp_path, ["uniform"])
    fake_domains(tmp_path)
    (tmp_path / "ledger.jsonl").write_text("")
    ref = {"unigram": 5.0, "uniform": 5.55, "tokens": 4000, "scored_tokens": 600.0}
    (tmp_path / "reference_losses.json").write_text(json.dumps({"a": ref, "b": {**ref, "unigram": 5.3}}))
    report = write_report(tmp_path)
    assert report.not_beating_unigram == {"autoscale": ["a"]}  # b: 5.25 < 5.3
    assert report.reference_losses["b"].unigram == 5.3 and Report.load(tmp_path) == report
    md = (tmp_path / "report.md").read_text()
    assert "| unigram (the held-out tokens' own frequencies) | 5.0000 | 5.3000 |" in md
    assert "**Warning:** autoscale does not beat the unigram loss of the held-out tokens (a 5.2500 >= 5.0000)" in md
    assert "scores only the masked share" in md and "a ~600 of 4,000" in md
    console = format_summary(report)
    assert "WARNING: autoscale does not beat" in console and "WARNING: uniform" not in console
    assert not_beating_unigram({"m": {"a": 5.0}}, report.reference_losses) == {"m": ["a"]}  # a tie does not beat it


class _Constant(torch.nn.Module):
    """Logits that ignore the input: every position predicts the same distribution over 11 ids."""

    def forward(self, input_ids: torch.Tensor) -> object:
        return type("Out", (), {"logits": torch.zeros(*input_ids.shape, 11)})()


def test_masked_lm_passes_score_more_positions_under_new_masks() -> None:
    ids = torch.arange(10).repeat(8, 4)  # 8 sequences of 40 tokens
    loader = [{"input_ids": ids, "domain": torch.zeros(8, dtype=torch.long)}]
    info = DistInfo(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"), initialized_here=False)
    mask = {"vocab_size": 10, "mask_id": 10, "probability": 0.15}
    counted = []

    def counting(input_ids: torch.Tensor) -> object:
        counted.append(int((input_ids == 10).sum()))
        return _Constant()(input_ids)

    one = validation_losses(counting, loader, ["d"], info, family="bert", mask=mask)
    assert len(counted) == 1
    three = validation_losses(counting, loader, ["d"], info, family="bert", mask=mask, passes=3)
    assert len(counted) == 4 and counted[2] != counted[3]  # three passes, each under its own masks
    assert one["d"] == pytest.approx(math.log(11)) and three["d"] == pytest.approx(math.log(11))
    validation_losses(counting, loader, ["d"], info, family="gpt2", passes=3)
    assert len(counted) == 5  # a causal model already scores every token: one pass
