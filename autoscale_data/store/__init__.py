"""Token shards on disk: the writer used by ``prepare``, the memory-mapped reader, the manifest."""

from .manifest import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_NAME,
    Manifest,
    ShardInfo,
    SplitInfo,
    TokenizerInfo,
    dtype_for_vocab,
    read_manifest,
    write_manifest,
)
from .reader import TokenSplit, TokenStore, Verify
from .writer import DEFAULT_SHARD_TOKENS, StoreWriter

__all__ = [
    "DEFAULT_SHARD_TOKENS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "Manifest",
    "ShardInfo",
    "SplitInfo",
    "StoreWriter",
    "TokenSplit",
    "TokenStore",
    "TokenizerInfo",
    "Verify",
    "dtype_for_vocab",
    "read_manifest",
    "write_manifest",
]
