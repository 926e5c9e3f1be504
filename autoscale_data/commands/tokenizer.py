"""``autoscale-data tokenizer train``: a byte-level BPE trained on your own text, for ``prepare
--tokenizer``."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from ..store import iter_documents, load_tokenizer, train_bpe_tokenizer
from ._args import add_verb, positive_int

__all__ = ["register", "run"]

_EPILOG = """\
inputs: the files and directories prepare reads (.jsonl with --text-field, .txt, .parquet, webdataset
.tar, saved HF datasets; other text files with --text-ext .py,.md), every domain's, so that one
tokenizer covers all of them. Then: autoscale-data prepare ... --tokenizer OUT
"""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "tokenizer", run, help="train a BPE tokenizer on your own text",
                 description="Tokenizers for prepare: 'train' fits a byte-level BPE (EOS <|endoftext|>, id "
                             "0) to your text files.", epilog=_EPILOG)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    train = actions.add_parser("train", help="train a byte-level BPE on text files", epilog=_EPILOG,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("inputs", nargs="+", metavar="INPUT", help="text files or directories (every "
                                                                  "domain's)")
    train.add_argument("--vocab-size", type=positive_int, required=True, metavar="N",
                       help="vocabulary size, at least 258 (256 bytes, the EOS, one merge)")
    train.add_argument("--out", required=True, metavar="PATH",
                       help="a .json file, or a directory that receives tokenizer.json and "
                            "tokenizer_config.json")
    train.add_argument("--text-field", default="text", metavar="FIELD",
                       help="field/column holding the text (default: text)")
    train.add_argument("--text-ext", default=None, metavar="EXT[,EXT...]",
                       help="also read files with these extensions as plain text, one document per file")
    train.add_argument("--max-documents", type=positive_int, default=None, metavar="N",
                       help="train on the first N documents of each input (default: all)")


def run(args: argparse.Namespace) -> int:
    counted = {"documents": 0}

    def texts() -> Any:
        for path in args.inputs:
            for text in itertools.islice(iter_documents(path, args.text_field, args.text_ext),
                                         args.max_documents):
                counted["documents"] += 1
                yield text

    documents = texts()
    first = next(documents, None)
    if first is None:
        raise ValueError(f"no documents in {', '.join(args.inputs)}: nothing to train a tokenizer on")
    path = train_bpe_tokenizer(itertools.chain([first], documents), args.vocab_size, args.out)
    tokenizer = load_tokenizer(path)
    print(f"wrote {path}: vocabulary {tokenizer.vocab_size}, EOS <|endoftext|> (id {tokenizer.eos_id}), "
          f"trained on {counted['documents']} documents; use it with: autoscale-data prepare ... --tokenizer "
          f"{path}")
    return 0
