"""Run records: CSV and Olmix round trips and every bad input."""

from __future__ import annotations

import math

import pytest

from autoscale_data.solver import Run, RunTable, read_olmix, write_olmix


def _table() -> RunTable:
    return RunTable([
        Run("base", {"web": 100.0, "code": 100.0}, {"web": 3.0, "code": 2.0}, seed=0),
        Run("web_x3", {"web": 300.0, "code": 100.0}, {"web": 2.8, "code": 2.1}, seed=0, label="up"),
        Run("code_x3", {"web": 100.0, "code": 300.0}, {"web": 3.1, "code": 1.7}),
    ])


def _write(path, text: str):
    path.write_text(text)
    return path


def test_csv_round_trip(tmp_path):
    t = _table()
    t.to_csv(tmp_path / "runs.csv")
    back = RunTable.from_csv(tmp_path / "runs.csv")
    assert back == t
    assert back.train_domains == ("web", "code")
    assert back["web_x3"].label == "up" and back["code_x3"].seed is None


def test_csv_ppl_columns_become_nats(tmp_path):
    t = _table()
    t.to_csv(tmp_path / "ppl.csv", metric="ppl")
    assert "ppl.web" in (tmp_path / "ppl.csv").read_text().splitlines()[0]
    back = RunTable.from_csv(tmp_path / "ppl.csv")
    for r in t:
        for d, v in r.loss.items():
            assert math.isclose(back[r.run_id].loss[d], v, rel_tol=1e-12)


def test_matrices_follow_domain_order():
    t = _table()
    assert t.tokens_matrix().tolist()[1] == [300.0, 100.0]
    assert t.loss_matrix().shape == (3, 2)
    assert len(t) == 3 and [r.run_id for r in t] == ["base", "web_x3", "code_x3"]


@pytest.mark.parametrize(
    "text, match",
    [
        ("tokens.a,loss.a\n1,2\n", "missing column 'run'"),
        ("run,loss.a\nx,2\n", "no 'tokens."),
        ("run,tokens.a\nx,2\n", "no 'loss."),
        ("run,tokens.a,loss.a\nx,nan,2\n", "finite"),
        ("run,tokens.a,loss.a\nx,-5,2\n", "negative"),
        ("run,tokens.a,loss.a\nx,1,2\nx,1,3\n", "duplicate run id 'x'"),
        ("run,tokens.a,loss.a\nx,1,\n", "empty value in column 'loss.a'"),
        ("run,tokens.a,loss.a,ppl.a\nx,1,2,3\n", "both loss"),
        ("run,tokens.a,loss.a,step\nx,1,2,3\n", "unknown columns \\['step'\\]"),
        ("run,tokens.a,ppl.a\nx,1,0\n", "ppl.a = 0"),
        ("run,tokens.a,loss.a,seed\nx,1,2,abc\n", "seed must be an integer"),
        ("run,tokens.a,loss.a\nx,one,2\n", "must be a number"),
        ("run,tokens.a,loss.a\n", "no runs"),
    ],
)
def test_csv_errors(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        RunTable.from_csv(_write(tmp_path / "bad.csv", text))


def test_csv_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        RunTable.from_csv(tmp_path / "nope.csv")


def test_domains_must_agree():
    with pytest.raises(ValueError, match="training domains"):
        RunTable([Run("a", {"x": 1.0}, {"x": 1.0}), Run("b", {"y": 1.0}, {"x": 1.0})])
    with pytest.raises(ValueError, match="validation domains"):
        RunTable([Run("a", {"x": 1.0}, {"x": 1.0}), Run("b", {"x": 1.0}, {"z": 1.0})])


def test_run_validation():
    with pytest.raises(ValueError, match="run_id"):
        Run("", {"a": 1.0}, {"a": 1.0})
    with pytest.raises(ValueError, match="tokens.a = -1 is negative"):
        Run("r", {"a": -1.0}, {"a": 1.0})
    with pytest.raises(ValueError, match="loss.a must be finite"):
        Run("r", {"a": 1.0}, {"a": float("nan")})
    with pytest.raises(ValueError, match="at least one run"):
        RunTable([])


def test_olmix_round_trip(tmp_path):
    t = _table()
    write_olmix(t, tmp_path / "ratios.csv", tmp_path / "metrics.csv")
    totals = {r.run_id: r.total_tokens for r in t}
    back = read_olmix(tmp_path / "ratios.csv", tmp_path / "metrics.csv", total_tokens=totals)
    for r in t:
        b = back[r.run_id]
        for d in t.train_domains:
            assert math.isclose(b.tokens[d], r.tokens[d], rel_tol=1e-12)
        assert b.loss == pytest.approx(r.loss)
    # perplexities instead of losses
    write_olmix(t, tmp_path / "r2.csv", tmp_path / "m2.csv", metric="ppl")
    again = read_olmix(tmp_path / "r2.csv", tmp_path / "m2.csv", total_tokens=totals, metric="ppl")
    assert again["web_x3"].loss["web"] == pytest.approx(2.8)


def test_olmix_reads_the_published_layout(tmp_path):
    _write(tmp_path / "ratios.csv", ",run,name,index,web,code\n0,ab12,mix-0000,0,0.25,0.75\n1,cd34,mix-0001,1,0.5,0.5\n")
    _write(tmp_path / "metrics.csv", ",run,name,index,hellaswag,arc\n0,ab12,mix-0000,0,1.5,2.0\n1,cd34,mix-0001,1,1.4,2.1\n")
    t = read_olmix(tmp_path / "ratios.csv", tmp_path / "metrics.csv", total_tokens=1000.0,
                   metric_columns=["arc"])
    assert t.train_domains == ("web", "code") and t.val_domains == ("arc",)
    assert t["ab12"].tokens == {"web": 250.0, "code": 750.0} and t["ab12"].label == "mix-0000"


def test_olmix_errors(tmp_path):
    _write(tmp_path / "r.csv", "run,web,code\na,0.5,0.5\nb,0.2,0.8\n")
    _write(tmp_path / "m.csv", "run,loss\na,2.0\nc,2.1\n")
    with pytest.raises(ValueError, match="different runs"):
        read_olmix(tmp_path / "r.csv", tmp_path / "m.csv", total_tokens=10.0)
    _write(tmp_path / "m.csv", "run,loss\na,2.0\nb,nan\n")
    with pytest.raises(ValueError, match="NaN"):
        read_olmix(tmp_path / "r.csv", tmp_path / "m.csv", total_tokens=10.0)
    _write(tmp_path / "m.csv", "run,loss\na,2.0\nb,2.2\n")
    with pytest.raises(ValueError, match="no entry for run 'b'"):
        read_olmix(tmp_path / "r.csv", tmp_path / "m.csv", total_tokens={"a": 10.0})
    with pytest.raises(ValueError, match="not found"):
        read_olmix(tmp_path / "r.csv", tmp_path / "m.csv", total_tokens=10.0, metric_columns=["bpb"])
    _write(tmp_path / "r.csv", "run,web,code\na,-0.5,1.5\nb,0.2,0.8\n")
    with pytest.raises(ValueError, match="negative weights"):
        read_olmix(tmp_path / "r.csv", tmp_path / "m.csv", total_tokens=10.0)
    with pytest.raises(FileNotFoundError):
        read_olmix(tmp_path / "none.csv", tmp_path / "m.csv", total_tokens=10.0)
