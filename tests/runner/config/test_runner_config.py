"""Runner config: loading, defaults, relative paths, clear errors for bad values, example configs."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from paths import EXAMPLES, REPO

from autoscale_data.runner import registry
from autoscale_data.runner.config import RunnerConfig, config_from_dict, config_to_dict, load_config
from autoscale_data.runner.config.docs import (
    METHODS_BEGIN,
    METHODS_END,
    config_table,
    main,
    method_table,
    with_config_table,
    with_method_table,
)
from autoscale_data.runner.models import PRESETS, build_model, model_config_dict


def _base(**kw):
    raw = {"domains": "stores", "ddo": {"budgets": [4096, 8192]}, "target": {"budget": 16384},
           "seq_len": 32, "micro_batch_size": 4, "global_batch_size": 8}
    raw.update(kw)
    return raw


def test_defaults_follow_the_paper() -> None:
    cfg = config_from_dict(_base())
    assert cfg.optimizer.weight_decay == 0.01
    assert cfg.optimizer.warmup_fraction == 0.1
    assert (cfg.ddo.multiplier_up, cfg.ddo.multiplier_down) == ((3.0,), (3.0,))
    assert cfg.ddo.base_weights == "uniform"
    assert cfg.grad_accum == 2


def test_yaml_and_json_load_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    sub = tmp_path / "conf"
    sub.mkdir()
    (sub / "c.yaml").write_text("domains: ../stores\nddo: {budgets: [4096, 8192], multipliers: [3, 5]}\n"
                                "target: {budget: 16384}\nseq_len: 32\nmicro_batch_size: 4\nglobal_batch_size: 8\n"
                                "optimizer: {lr: 1e-3}\n")
    cfg = load_config(sub / "c.yaml")
    assert cfg.resolve(cfg.domains) == (tmp_path / "stores").resolve()
    assert cfg.ddo.multiplier_down == (5.0,)
    assert cfg.optimizer.lr == pytest.approx(1e-3)  # YAML's "1e-3" string is read as a number
    (sub / "c.json").write_text(json.dumps(_base()))
    assert load_config(sub / "c.json").seq_len == 32
    raw = config_to_dict(cfg)
    raw.pop("base_dir")
    assert config_from_dict(raw, sub) == cfg


@pytest.mark.parametrize(("raw", "needle"), [
    (_base(ddo={"budgets": [8192, 4096]}), "N1 < N2"),
    (_base(ddo={"budgets": [4096]}), "two budgets"),
    (_base(ddo={"budgets": [4096, 8192], "multipliers": [1, 3]}), "multiplier_up"),
    (_base(ddo={"budgets": [4096, 8192], "objective": "ppl"}), "objective"),
    (_base(target={"budget": 8192}), "more than ddo.budgets N2"),
    (_base(target={"budget": 16384, "baselines": ["uniform", "llama"]}), "baselines"),
    (_base(target={"budget": 16384, "baselines": ["reference"]}), "reference_weights"),
    (_base(model={"preset": "gpt5"}), "preset"),
    (_base(global_batch_size=6), "multiple of micro_batch_size"),
    (_base(backend="jax"), "backend"),
    (_base(seq_len=0), "seq_len"),
    (_base(seeds=[0, 0]), "distinct seeds"),
    (_base(target={"budget": 16384, "seeds": [0, 0]}), r"config target.seeds = \[0, 0\] is invalid: expected distinct seeds"),
    (_base(ddo={"budgets": [65536, 32768], "extra_budget": "half"}, target={"budget": 131072}),
     r"config ddo.budgets = \[65536, 32768\] is invalid: expected increasing budgets \[N1, N2\] in tokens with "
     r"ddo.extra_budget: 'half'"),
    (_base(ddo={"budgets": [4096, 8192], "extra_budgets": "half"}), r"unknown keys \['extra_budgets'\]; expected "
     r"some of \[.*'extra_budget', .*'multipliers', .*\]"),
    (_base(precision="fp8"), "precision"),
    (_base(deepspeed={"zero_stage": 4}), "zero_stage"),
    (_base(optimizer={"lr": -1}), "optimizer.lr"),
    (_base(learning_rate=1), "unknown keys"),
    ({"seq_len": 32}, "domains"),
    (_base(domains={"only": "x"}), ">= 2 domains"),
    (_base(ddo={"budgets": [64, 8192]}), "at least one global batch"),
    (_base(ddo={"budgets": [2048, 4096, 4096]}), r"budgets = \[2048, 4096, 4096\] is invalid: expected increasing"),
    (_base(ddo={"budgets": [4096, 2048, 8192]}), r"\[4096, 2048, 8192\] is invalid: expected increasing"),
    (_base(ddo={"budgets": [8192]}), r"budgets = \[8192\] is invalid: expected two budgets or more"),
    (_base(ddo={"budgets": 8192}), "budgets = 8192 is invalid: expected two budgets or more"),
    (_base(ddo={"budgets": [2048, 4096.5, 8192]}), "ddo.budgets must be a positive integer, got 4096.5"),
    (_base(ddo={"budgets": [4096, 8192], "extra_budget": "third"}), "extra_budget = 'third' is invalid"),
    (_base(ddo={"budgets": [4096, 8192], "extra_budget": "half"}, global_batch_size=8, seq_len=512),
     "budgets = 2048 is invalid: expected at least one global batch"),
    (_base(ddo={"budgets": [2048, 4096, 8192]}, target={"budget": 8192}), "more than ddo.budgets N2 = 8192"),
])
def test_bad_configs_name_the_bad_value(raw: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        config_from_dict(raw)


_ABC = {"a": "sa", "b": "sb", "c": "sc"}


@pytest.mark.parametrize(("ddo", "needle"), [
    ({"min_weight": 0.5}, r"ddo.min_weight = 0.5 is invalid: expected at most 1/3 = 0.333 .*3 domains"),
    ({"max_weight": 0.3}, r"ddo.max_weight = 0.3 is invalid: expected at least 1/3 = 0.333 .*3 domains"),
    ({"objective_weights": {"a": 1.0, "web": 1.0}}, r"ddo.objective_weights = .* expected .*'a', 'b', 'c'.*'web'"),
    ({"law": "4p"}, r"ddo.law = '4p' is invalid: expected .*4 distinct multipliers .*3 \(0.333, 1, 3\)"),
])
def test_ddo_settings_the_fits_would_refuse_are_refused_by_the_config(ddo: dict, needle: str) -> None:
    """Each fails the DDO fit only after every proxy has trained; the domains are known here."""
    with pytest.raises(ValueError, match=needle):
        config_from_dict(_base(domains=_ABC, ddo={"budgets": [4096, 8192], **ddo}))
    config_from_dict(_base(domains=_ABC, ddo={"budgets": [4096, 8192], "min_weight": 1 / 3, "max_weight": 1 / 3 + 1e-9,
                                              "objective_weights": {"c": 1.0}}))  # the limits themselves pass
    config_from_dict(_base(domains=_ABC, ddo={"budgets": [4096, 8192], "law": "4p",
                                              "multipliers": [[3, 1.7], [3, 1.7]]}))


def test_an_unknown_key_lists_exactly_the_keys_a_file_may_give() -> None:
    with pytest.raises(ValueError, match="unknown keys") as top:
        config_from_dict(_base(learning_rate=1))
    listed = set(ast.literal_eval(str(top.value).split("expected some of ")[1]))
    assert {"seq_len", "ddo", "target", "seeds"} | set(registry.sections()) <= listed
    assert not listed & {"base_dir", "sections"}  # set on reading, refused in a file
    with pytest.raises(ValueError, match="unknown keys") as ddo:
        config_from_dict(_base(ddo={"budgets": [4096, 8192], "extra_budgets": "half"}))
    listed = set(ast.literal_eval(str(ddo.value).split("expected some of ")[1]))
    assert {"budgets", "multipliers", "extra_budget", "multiplier_up", "min_weight"} <= listed


def test_two_or_more_budgets_and_the_extra_budget_shorthand(tmp_path: Path) -> None:
    assert config_from_dict(_base()).ddo.budgets == (4096, 8192)
    three = config_from_dict(_base(ddo={"budgets": [2048, 4096, 8192]}))
    assert three.ddo.budgets == (2048, 4096, 8192) and three.ddo.largest == 8192
    half = config_from_dict(_base(ddo={"budgets": [4096, 8192], "extra_budget": "half"}))
    assert half.ddo == three.ddo  # the shorthand reads as the explicit list, which config.json records
    assert config_to_dict(half)["ddo"]["budgets"] == [2048, 4096, 8192]
    assert config_from_dict(_base(ddo={"budgets": [4096, 8192], "extra_budget": "none"})).ddo.budgets == (4096, 8192)
    four = config_from_dict(_base(ddo={"budgets": [4096, 8192, 16384, 32768]}, target={"budget": 65536}))
    assert four.ddo.budgets == (4096, 8192, 16384, 32768)
    (tmp_path / "c.yaml").write_text("domains: stores\nddo: {budgets: [4096, 8192], extra_budget: half}\n"
                                     "target: {budget: 16384}\nseq_len: 32\nmicro_batch_size: 4\n"
                                     "global_batch_size: 8\n")
    assert load_config(tmp_path / "c.yaml").ddo.budgets == (2048, 4096, 8192)


def test_the_default_ddo_design_has_three_budgets_n0_half_of_n1() -> None:
    from autoscale_data.runner.config.sections import DDOConfig

    n0, n1, n2 = DDOConfig().budgets
    assert n0 * 2 == n1 < n2


def test_missing_or_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("domains: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_config(bad)
    other = tmp_path / "c.toml"
    other.write_text("x = 1")
    with pytest.raises(ValueError, match=".yaml, .yml or .json"):
        load_config(other)


#: What an example that keeps the paper's design (a warning in its dry run and run) says in its file.
PAPER_DESIGN = "the paper's 2m+1 design, kept to reproduce its runs"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_configs_validate(path: Path) -> None:
    cfg = load_config(path)
    assert isinstance(cfg, RunnerConfig)
    # as many points per domain as the law has parameters: the run warns the optimum may not be determined
    assert cfg.ddo.identifies_law or PAPER_DESIGN in path.read_text(), f"{path.name}: a design that cannot identify the law"


def test_the_examples_on_the_demo_stores_do_not_warn_about_their_own_design(tmp_path: Path) -> None:
    import warnings

    from autoscale_data.demo import prepare_synthetic_stores
    from autoscale_data.runner.describe import design_note
    from autoscale_data.runner.pipeline import MixtureRunner

    prepare_synthetic_stores(tmp_path / "data" / "tiny-demo", bytes_per_domain=60_000)
    (tmp_path / "examples").mkdir()
    demo = [p for p in sorted(EXAMPLES.glob("*.yaml")) if "../data/tiny-demo" in p.read_text()]
    assert {"tiny-cpu.yaml", "tiny-cpu-three-budgets.yaml"} <= {p.name for p in demo}
    for path in demo:
        (tmp_path / "examples" / path.name).write_text(path.read_text())
        cfg = load_config(tmp_path / "examples" / path.name)
        assert cfg.ddo.identifies_law and "may not determine the optimum" not in design_note(cfg)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the dry run warns of nothing
            text = MixtureRunner(cfg, tmp_path / "out" / path.stem, log=lambda _: None, progress=False).describe()
        assert "the design CAN identify the law" in text and "may not determine the optimum" not in text, path.name


def test_example_set_has_tiny_and_paper_sized_configs() -> None:
    names = [p.name for p in EXAMPLES.glob("*.yaml")]
    assert any("tiny" in n for n in names)
    large = [load_config(p) for p in EXAMPLES.glob("*.yaml") if load_config(p).model.preset == "gpt2-large"]
    assert large and all(c.optimizer.lr == pytest.approx(2e-4) for c in large)
    assert any(load_config(p).model.preset == "bert-base" for p in EXAMPLES.glob("*.yaml"))


def test_presets_match_the_paper_architectures() -> None:
    assert PRESETS["gpt2-large"] == {"n_layer": 36, "n_embd": 1280, "n_head": 20}
    fields = model_config_dict("bert-tiny", {}, vocab_size=257, seq_len=64)
    assert fields["vocab_size"] == 258  # one extra id for [MASK]
    model = build_model("bert-tiny", fields)
    assert model.config.num_hidden_layers == 2
    gpt = build_model("gpt2-tiny", model_config_dict("gpt2-tiny", {"n_layer": 1}, vocab_size=300, seq_len=16),
                      eos_id=299)
    assert gpt.config.n_layer == 1 and gpt.config.vocab_size == 300 and gpt.config.n_positions == 16


def test_models_name_their_loss_so_transformers_does_not_warn() -> None:
    """transformers takes the loss from the class name; GPT2LMHeadModel's names none, so every runner run
    printed "`loss_type=None` was set in the config but it is unrecognized" (in a fresh process: the
    warning is emitted once per process)."""
    code = ("import torch\n"
            "from autoscale_data.runner.models import build_model, model_config_dict\n"
            "for preset in ('gpt2-tiny', 'bert-tiny'):\n"
            "    m = build_model(preset, model_config_dict(preset, {'n_layer': 1}, vocab_size=50, seq_len=8), eos_id=49)\n"
            "    ids = torch.randint(0, 49, (2, 8))\n"
            "    assert torch.isfinite(m(input_ids=ids, labels=ids).loss)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "loss_type" not in out.stderr + out.stdout


def test_the_docs_config_table_is_generated_from_the_docstrings() -> None:
    text = (REPO / "docs" / "runner.md").read_text(encoding="utf-8")
    assert with_config_table(text) == text, ("docs/runner.md's config table differs from the sections' docstrings: "
                                             "regenerate it with `python -m autoscale_data.runner.config.docs`")
    assert with_method_table(text) == text, ("docs/runner.md's methods table differs from runner/registry.py: "
                                             "regenerate it with `python -m autoscale_data.runner.config.docs`")


@dataclass(frozen=True)
class _Flattening:
    """How the ``flattened`` method flattens the token shares."""

    temperature: float = 2.0
    """Divides each domain's log token share."""

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"config flattened.temperature = {self.temperature!r} is invalid: expected > 0")


def test_a_registered_methods_section_is_read_checked_written_and_documented(tmp_path: Path) -> None:
    registry.register_method(registry.MethodDeclaration("flattened", "token shares flattened", registry.STORES, 2,
                                                        "x.Y", section="flattened", config=_Flattening))
    cfg = config_from_dict(_base(flattened={"temperature": "3e0"}))
    assert cfg.flattened == _Flattening(3.0) and config_from_dict(_base()).flattened is None
    raw = config_to_dict(cfg)
    assert raw["flattened"] == {"temperature": 3.0} and "sections" not in raw
    raw.pop("base_dir")
    assert config_from_dict(raw) == cfg
    for bad, needle in [({"temperature": -1}, "flattened.temperature"), ({"temp": 1}, "unknown keys"),
                        (3, "must be a mapping")]:
        with pytest.raises(ValueError, match=needle):
            config_from_dict(_base(flattened=bad))
    with pytest.raises(ValueError, match="'sections' is not read"):
        config_from_dict(_base(sections={}))
    table = config_table()
    assert "| `flattened.temperature` | 2 | `float` | Divides each domain's log token share. |" in table
    assert "Read by `flattened`" in table and "`flattened`" in table.split("| `target.baselines` |")[1].split("\n")[0]
    assert "| `flattened` | token shares flattened | none | — |" in method_table()
    with pytest.raises(AttributeError):
        cfg.flatened  # noqa: B018
    with pytest.raises(ValueError, match="together or neither"):
        registry.MethodDeclaration("half", "", registry.STORES, 2, "x.Y", section="half")


def test_the_table_generator_rewrites_a_file(tmp_path: Path) -> None:
    doc = tmp_path / "runner.md"
    doc.write_text("# Config\n<!-- config table: generated from runner/config/'s docstrings by python -m "
                   "autoscale_data.runner.config.docs -->\nSTALE ROW\n<!-- end of the generated config table -->\nafter\n"
                   f"{METHODS_BEGIN}\nSTALE METHOD\n{METHODS_END}\n")
    main(str(doc))
    assert "STALE" not in doc.read_text() and doc.read_text().endswith(f"{method_table()}\n{METHODS_END}\n")
    assert "| `ddo.law` | `3p` |" in doc.read_text() and "-->\nafter\n" in doc.read_text()
    with pytest.raises(ValueError, match="markers"):
        with_config_table("no table")
