"""`evaluate` on checkpoints that are not ``save_pretrained`` folders: DeepSpeed's layout (written here with
``torch.save``, as ``engine.save_checkpoint`` lays it out under ZeRO stage 0-2), ZeRO stage 3, weights without a
config, a runner proxy run (which keeps no model), and DeepSpeed's log kept off stdout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from runner_helpers import fake_domains, fake_run

from autoscale_data.cli import main
from autoscale_data.evaluation import evaluate_checkpoint, load_causal_lm
from autoscale_data.runner.models import PRESETS

pytestmark = pytest.mark.timeout(120)

ARGS = ["--tasks", "piqa", "--limit", "3", "--tokenizer", "bytes"]


def _model() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)  # a runner preset's shape (gpt2-tiny), the byte vocabulary, 48 positions
    return GPT2LMHeadModel(GPT2Config(vocab_size=257, n_positions=48, **PRESETS["gpt2-tiny"])).eval()


def _deepspeed_layout(root: Path, model: torch.nn.Module, tag: str = "global_step3") -> Path:
    """``root`` as ``engine.save_checkpoint(root)`` leaves it: ``latest`` names the tag, whose model states hold
    the whole model as ``module`` beside DeepSpeed's own entries."""
    (root / tag).mkdir(parents=True)
    (root / "latest").write_text(tag)
    torch.save({"module": model.state_dict(), "ds_config": {"train_micro_batch_size_per_gpu": 4}, "ds_version": "0.19.8",
                "global_steps": 3, "dp_world_size": 1}, root / tag / "mp_rank_00_model_states.pt")
    return root


def _scores(argv: list[str], capsys: pytest.CaptureFixture) -> dict:
    """``evaluate ARGV --json``'s piqa scores but the time taken."""
    capsys.readouterr()
    assert main(["evaluate", *argv, "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)["tasks"]["piqa"]
    scores.pop("seconds")
    return scores


def test_a_deepspeed_checkpoint_scores_as_its_save_pretrained_folder(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    model = _model()
    model.save_pretrained(tmp_path / "hf")
    ckpt = _deepspeed_layout(tmp_path / "ckpt", model)
    want = _scores([str(tmp_path / "hf"), *ARGS], capsys)
    assert want["examples"] == 3
    # a runner preset: its shape, with the vocabulary and the context length read from the weights
    assert _scores([str(ckpt), *ARGS, "--model-config", "gpt2-tiny"], capsys) == want
    # the HF config.json, given or beside the checkpoint; the tag folder itself
    assert _scores([str(ckpt), *ARGS, "--model-config", str(tmp_path / "hf" / "config.json")], capsys) == want
    shutil.copy(tmp_path / "hf" / "config.json", ckpt / "config.json")
    assert _scores([str(ckpt / "global_step3"), *ARGS, "--model-config", str(tmp_path / "hf")], capsys) == want
    assert _scores([str(ckpt), *ARGS], capsys) == want
    loaded = load_causal_lm(ckpt)
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())


def test_deepspeed_checkpoint_errors_say_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ckpt = _deepspeed_layout(tmp_path / "ckpt", _model())
    with pytest.raises(ValueError, match=r"holds the weights but no config.json, so the model's shape is unknown: "
                                         r"give it .*--model-config PATH/config.json or a runner model preset"):
        evaluate_checkpoint(ckpt, ["piqa"], limit=1, tokenizer="bytes")
    assert main(["evaluate", str(ckpt), *ARGS, "--model-config", "bert-tiny"]) == 2
    assert "'bert-tiny' is a masked LM" in capsys.readouterr().err
    assert main(["evaluate", str(ckpt), *ARGS, "--model-config", "gpt2-huge"]) == 2
    assert "neither a runner model preset" in capsys.readouterr().err
    small = {"model_type": "gpt2", "n_layer": 1, "n_embd": 128, "n_head": 4}
    with pytest.raises(ValueError, match=r"does not fit the model config \(gpt2\): missing weights \[\], unexpected "
                                         r"weights \['transformer.h.1"):
        evaluate_checkpoint(ckpt, ["piqa"], limit=1, tokenizer="bytes", model_config=small)
    (ckpt / "latest").write_text("global_step9")
    with pytest.raises(ValueError, match=r"names tag 'global_step9', but .*global_step9' is missing"):
        evaluate_checkpoint(ckpt, ["piqa"], limit=1, tokenizer="bytes", model_config=small)
    (ckpt / "latest").unlink()  # one tag and no latest: that tag; two: which one is asked
    assert load_causal_lm(ckpt, model_config={"model_type": "gpt2", **PRESETS["gpt2-tiny"]}).config.n_positions == 48
    shutil.copytree(ckpt / "global_step3", ckpt / "global_step10")
    with pytest.raises(ValueError, match=r"holds the DeepSpeed checkpoints \['global_step10', 'global_step3'\] and "
                                         r"no latest file naming one"):
        evaluate_checkpoint(ckpt, ["piqa"], limit=1, tokenizer="bytes", model_config=small)


def test_zero3_is_refused_with_deepspeeds_consolidation_and_its_output_then_scores(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = _model()
    ckpt = tmp_path / "ckpt"
    (ckpt / "global_step3").mkdir(parents=True)
    (ckpt / "latest").write_text("global_step3")
    for rank in (0, 1):  # ZeRO stage 3: each rank's slice, no whole model
        torch.save({"module": {}}, ckpt / "global_step3" / f"zero_pp_rank_{rank}_mp_rank_00_model_states.pt")
    assert main(["evaluate", str(ckpt), *ARGS, "--model-config", "gpt2-tiny"]) == 2
    err = capsys.readouterr().err
    assert "is a ZeRO stage 3 checkpoint" in err
    assert f"`python {ckpt}/zero_to_fp32.py {ckpt} {ckpt}-fp32`" in err and "convert_zero_checkpoint_to_fp32_state_dict" in err
    # what zero_to_fp32 writes: pytorch_model.bin, no config.json; scored with --model-config
    out = tmp_path / "ckpt-fp32"
    out.mkdir()
    torch.save(model.state_dict(), out / "pytorch_model.bin")
    model.save_pretrained(tmp_path / "hf")
    want = _scores([str(tmp_path / "hf"), *ARGS], capsys)
    assert main(["evaluate", str(out), *ARGS]) == 2
    assert "holds the weights but no config.json" in capsys.readouterr().err
    assert _scores([str(out), *ARGS, "--model-config", str(tmp_path / "hf" / "config.json")], capsys) == want


def test_a_proxy_run_folder_says_the_runner_keeps_no_proxy_model(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    fake_run(out, "p1", "a x3", 0, [5.0], kind="proxy")
    fake_run(out, "t1", "uniform", 0, [5.0])
    fake_domains(out)
    (out / "config.json").write_text(json.dumps({"name": "v", "domains": "/stores", "target": {"budget": 4 * 10**6}}))
    assert main(["evaluate", str(out / "runs" / "p1"), "--tasks", "piqa"]) == 2
    err = capsys.readouterr().err
    assert "it is a proxy run, and the runner deletes a proxy run's checkpoints once its result.json is written, "            "whatever target.keep_checkpoints says" in err
    assert "target.reference_weights: {a: 0.25, b: 0.75}" in err and "set target.keep_checkpoints" not in err
    assert main(["evaluate", str(out / "runs" / "t1"), "--tasks", "piqa"]) == 2
    assert "set target.keep_checkpoints: true and train it again" in capsys.readouterr().err


_IMPORTS_DEEPSPEED = """
import sys
import autoscale_data.commands.evaluate as verb
from autoscale_data.cli import main

real = verb.run


def run(args):
    import deepspeed  # as a verb may (a DeepSpeed checkpoint's objects): DeepSpeed logs its accelerator on import
    return real(args)


verb.run = run
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_deepspeeds_log_goes_to_stderr_with_ds_accelerator_unset(tmp_path: Path) -> None:
    pytest.importorskip("deepspeed")
    ckpt = _deepspeed_layout(tmp_path / "ckpt", _model())
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    argv = [sys.executable, "-c", _IMPORTS_DEEPSPEED, "evaluate", str(ckpt), *ARGS, "--model-config", "gpt2-tiny"]
    table = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert table.returncode == 0, table.stderr[-3000:]
    assert "real_accelerator" in table.stderr and "real_accelerator" not in table.stdout
    assert table.stdout.startswith(f"{ckpt} (tokenizer bytes)\n")
    answer = subprocess.run([*argv, "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert answer.returncode == 0 and "real_accelerator" in answer.stderr
    assert json.loads(answer.stdout)["tasks"]["piqa"]["examples"] == 3


_TRAIN_DEEPSPEED = """
import os, socket, sys
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]))
import deepspeed, torch
from transformers import GPT2Config, GPT2LMHeadModel

for stage in (0, 2, 3):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=257, n_positions=48, n_embd=32, n_layer=1, n_head=2))
    engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters()), config={
        "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": stage}})
    ids = torch.randint(0, 257, (2, 48), generator=torch.Generator().manual_seed(1))
    engine.backward(engine(input_ids=ids, labels=ids).loss)
    engine.step()
    engine.save_checkpoint(f"{sys.argv[1]}/zero{stage}")
    if stage == 0:
        model.save_pretrained(f"{sys.argv[1]}/hf")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_real_deepspeed_checkpoints_of_zero_stages_0_2_and_3(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Checkpoints engine.save_checkpoint wrote (one process, CPU): stages 0 and 2 score as the model's own
    save_pretrained folder; stage 3 is refused with a command that, run as printed, gives a folder that does."""
    pytest.importorskip("deepspeed")
    env = {**os.environ, "DS_ACCELERATOR": "cpu"}
    env.setdefault("TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/autoscale-data/torch_extensions"))
    done = subprocess.run([sys.executable, "-c", _TRAIN_DEEPSPEED, str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    config = ["--model-config", str(tmp_path / "hf" / "config.json")]
    want = _scores([str(tmp_path / "hf"), *ARGS], capsys)
    for stage in (0, 2):
        assert _scores([str(tmp_path / f"zero{stage}"), *ARGS, *config], capsys) == want
    assert main(["evaluate", str(tmp_path / "zero3"), *ARGS, *config]) == 2
    err = capsys.readouterr().err
    command = err[err.index("`python ") + 1:err.index("`", err.index("`python ") + 1)].split()
    assert command[1:] == [str(tmp_path / "zero3" / "zero_to_fp32.py"), str(tmp_path / "zero3"),
                           str(tmp_path / "zero3-fp32")]
    done = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = _scores([str(tmp_path / "zero3-fp32"), *ARGS, *config], capsys)  # its step summed in another order
    assert got == {**want, "bpb": pytest.approx(want["bpb"], rel=1e-6)}
