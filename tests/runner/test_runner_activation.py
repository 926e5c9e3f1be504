"""GPT-2's activation: new folders train ``gelu_pytorch_tanh`` (the tanh GELU in one kernel); a folder whose
config predates ``model.activation`` keeps ``gelu_new``, so its run ids, and the models its runs resume, stay
as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict, config_to_dict
from autoscale_data.runner.experiment import ConfigChangedError, load_folder_config
from autoscale_data.runner.models import build_model
from autoscale_data.runner.pipeline import MixtureRunner


@pytest.fixture
def raw(tmp_path: Path) -> dict:
    return tiny_config(tiny_stores(tmp_path / "stores"))


def _ids_and_fields(runner: MixtureRunner) -> tuple[list[str], list[dict]]:
    specs = [s for specs in runner.proxy_specs().values() for s in specs]
    return [s.run_id for s in specs], [s.settings.model.fields for s in specs]


def _old_folder(out: Path, raw: dict) -> Path:
    """``out`` holding the config as a version before ``model.activation`` wrote it."""
    old = config_to_dict(config_from_dict(raw))
    del old["model"]["activation"]
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(old))
    return out


def test_a_new_folder_trains_the_fused_gelu(raw: dict, tmp_path: Path) -> None:
    runner = MixtureRunner(config_from_dict(raw), tmp_path / "new")
    assert runner.config.model.activation == "gelu_pytorch_tanh"
    _, fields = _ids_and_fields(runner)
    assert {f["activation_function"] for f in fields} == {"gelu_pytorch_tanh"}
    assert build_model("gpt2-tiny", fields[0]).config.activation_function == "gelu_pytorch_tanh"


def test_an_old_folder_keeps_gelu_new_its_run_ids_and_its_models(raw: dict, tmp_path: Path) -> None:
    before = MixtureRunner(config_from_dict({**raw, "model": {**raw["model"], "activation": "gelu_new"}}),
                           tmp_path / "elsewhere")
    old_ids, old_fields = _ids_and_fields(before)
    assert all("activation_function" not in f for f in old_fields)  # the fields, so the ids, of before the setting
    out = _old_folder(tmp_path / "old", raw)
    runner = MixtureRunner(config_from_dict(raw), out)  # the same config file, run again after the upgrade
    ids, fields = _ids_and_fields(runner)
    assert (ids, fields) == (old_ids, old_fields)
    assert ids != _ids_and_fields(MixtureRunner(config_from_dict(raw), tmp_path / "new"))[0]
    assert build_model("gpt2-tiny", fields[0]).config.activation_function == "gelu_new"  # what a resume builds
    assert runner._check_config() == []  # not a change of config: the folder's runs trained gelu_new
    assert json.loads((out / "config.json").read_text())["model"]["activation"] == "gelu_new"
    assert load_folder_config(out).model.activation == "gelu_new"
    assert _ids_and_fields(MixtureRunner(config_from_dict(raw), out))[0] == old_ids  # and so on, each time


def test_asking_an_old_folder_for_the_fused_gelu_is_a_change_of_config(raw: dict, tmp_path: Path) -> None:
    out = _old_folder(tmp_path / "old", raw)
    fused = config_from_dict({**raw, "model": {**raw["model"], "activation": "gelu_pytorch_tanh"}})
    with pytest.raises(ConfigChangedError, match=r'model.activation: "gelu_new" -> "gelu_pytorch_tanh"'):
        MixtureRunner(fused, out)._check_config()


@pytest.mark.parametrize(("model", "match"), [
    ({"activation": "relu"}, r"model.activation = 'relu' is invalid: expected one of \('gelu_pytorch_tanh', 'gelu_new'\)"),
    ({"preset": "bert-tiny", "activation": "gelu_new"}, r"model.activation = 'gelu_new' is invalid: expected null for a BERT"),
])
def test_a_bad_activation_is_named(raw: dict, model: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        config_from_dict({**raw, "model": model})


def test_the_proxies_own_model_follows_the_folders_activation(raw: dict, tmp_path: Path) -> None:
    small = {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 16, "n_head": 2}}
    raw = {**raw, "ddo": {**raw["ddo"], "proxy_model": small}}
    old = _ids_and_fields(MixtureRunner(config_from_dict(raw), _old_folder(tmp_path / "old", raw)))[1]
    new = _ids_and_fields(MixtureRunner(config_from_dict(raw), tmp_path / "new"))[1]
    assert all(f["n_embd"] == 16 and "activation_function" not in f for f in old)
    assert all(f["n_embd"] == 16 and f["activation_function"] == "gelu_pytorch_tanh" for f in new)
