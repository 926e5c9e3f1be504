"""A run's hashed settings as records: they read every kept spec's JSON and write it back key for key, derive the
padded vocabulary in one place, and refuse values that are not settings, naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoscale_data.runner.planning.settings import ModelSettings, TrainingSettings
from autoscale_data.runner.planning.specs import RunSpec

OLD = Path(__file__).parents[1] / "data" / "out_before_records"


def _old_specs() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(OLD.glob("runs/*/spec.json"))]


def test_the_kept_settings_read_as_records_and_write_back_key_for_key() -> None:
    for raw in _old_specs():
        settings = TrainingSettings.from_json(raw["settings"])
        assert settings.to_json() == raw["settings"]
        assert settings.model.vocab_size == raw["settings"]["model"]["fields"]["vocab_size"] == 257
        assert settings.model.padded_vocab is None and "padded_vocab" not in settings.model.to_json()
        assert settings.optimizer.lr == raw["settings"]["optimizer"]["lr"]


def test_a_spec_written_without_settings_reads_and_trains_nothing() -> None:
    raw = {k: v for k, v in _old_specs()[0].items() if k != "settings"}
    spec = RunSpec.from_json(raw)
    assert spec.settings is None and "settings" not in spec.to_json()
    with pytest.raises(ValueError, match=f"run {spec.run_id}: its spec records no training settings"):
        _ = spec.training


def test_the_padded_vocabulary_is_written_only_where_the_rows_grow() -> None:
    fields = {"n_layer": 1, "n_embd": 8, "n_head": 2, "n_positions": 16, "vocab_size": 257}
    padded = ModelSettings("gpt2-tiny", fields, padded_vocab=320)
    assert padded.to_json() == {"preset": "gpt2-tiny", "fields": fields, "padded_vocab": 320}
    assert ModelSettings.from_json(padded.to_json()) == padded
    model = padded.build(eos_id=256)
    assert model.get_input_embeddings().weight.shape[0] == 320 and padded.vocab_size == 257


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"fields": {"vocab_size": 0}}, r"fields\['vocab_size'\] = 0 is invalid: expected a positive integer"),
    ({"fields": {}}, r"fields\['vocab_size'\] = None is invalid"),
    ({"padded_vocab": 257}, r"padded_vocab = 257 is invalid: expected an integer above the vocabulary, 257"),
    ({"padded_vocab": 300.0}, r"padded_vocab = 300.0 is invalid"),
])
def test_bad_model_settings_are_named(kwargs: dict, needle: str) -> None:
    args = {"preset": "gpt2-tiny", "fields": {"vocab_size": 257}} | kwargs
    with pytest.raises(ValueError, match=needle):
        ModelSettings(**args)


def test_settings_of_another_version_are_refused() -> None:
    raw = _old_specs()[0]["settings"] | {"version": 2}
    with pytest.raises(ValueError, match=r"settings version 2 is invalid: expected 1"):
        TrainingSettings.from_json(raw)
