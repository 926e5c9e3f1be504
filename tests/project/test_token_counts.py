"""Every CLI option that takes a token count reads it with one parser (``commands._args.parse_token_count``):
``extend --budget 1e4`` is accepted as ``project --target-tokens 1e9`` is."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscale_data.cli import build_parser
from autoscale_data.commands._args import parse_token_count, parse_tokens

COMMANDS = Path(__file__).resolve().parents[2] / "autoscale_data" / "commands"

#: (arguments before the count, the option, arguments after it): one per token-count option.
OPTIONS = [
    (["extend", "OUT", "--run", "r"], "--budget", []),
    (["project", "scales.json"], "--target-tokens", []),
    (["prepare", "--out", "o", "--tokenizer", "bytes"], "--shard-tokens", []),
]


@pytest.mark.parametrize(("text", "value"), [("10000", 10_000), ("1e4", 10_000), ("10_000", 10_000), ("10k", 10_000),
                                             ("2.5M", 2_500_000), ("1B", 10**9), ("1.5e3", 1_500), ("3T", 3 * 10**12)])
def test_every_token_count_option_reads_the_same_spellings(text: str, value: int) -> None:
    parser = build_parser()
    for before, option, after in OPTIONS:
        args = parser.parse_args([*before, option, text, *after])
        assert getattr(args, option.lstrip("-").replace("-", "_")) == value, option
    assert parse_tokens([f"web={text},code=0"]) == {"web": float(value), "code": 0.0}


@pytest.mark.parametrize(("text", "message"), [("1.5", "whole number"), ("ten", "expected a number of tokens"),
                                               ("0", "at least 1"), ("-5", "at least 1"), ("inf", "whole number")])
def test_bad_token_counts_are_refused_alike(text: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for before, option, after in OPTIONS:
        with pytest.raises(SystemExit):
            parser.parse_args([*before, option, text, *after])
        assert message in capsys.readouterr().err, option
    with pytest.raises(ValueError, match=message):
        parse_token_count(text)


@given(st.integers(1, 10**15))
def test_a_plain_integer_reads_back(n: int) -> None:
    assert parse_token_count(str(n)) == n and parse_token_count(f"{n:_}") == n


def test_no_command_parses_a_token_count_its_own_way() -> None:
    """Options whose names speak of tokens or budgets use ``token_count`` (or the DOMAIN=TOKENS parser)."""
    for path in COMMANDS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
                continue
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            types = [k.value for k in node.keywords if k.arg == "type"]
            if any("token" in f or "budget" in f for f in flags) and types:
                assert isinstance(types[0], ast.Name) and types[0].id == "token_count", (path.name, flags)
