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
from .prepare import (
    DEFAULT_HOLDOUT_EVERY,
    PREPARE_INDEX,
    DomainResult,
    PrepareOptions,
    find_domain_stores,
    parse_domain_args,
    prepare,
    prepare_domains,
)
from .reader import TokenSplit, TokenStore, Verify
from .remote import RemoteStore, RemoteTokenStore, cache_usage_bytes, is_remote_url, open_store
from .sources import SUPPORTED_SUFFIXES, iter_documents, list_sources
from .tokenizers import (
    BUILTIN_TOKENIZERS,
    ByteTokenizer,
    HFTokenizer,
    Tokenizer,
    check_compatible,
    load_tokenizer,
    train_bpe_tokenizer,
)
from .wds import export_webdataset, import_webdataset
from .writer import DEFAULT_SHARD_TOKENS, StoreWriter

__all__ = [
    "BUILTIN_TOKENIZERS",
    "ByteTokenizer",
    "DEFAULT_HOLDOUT_EVERY",
    "DEFAULT_SHARD_TOKENS",
    "DomainResult",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "HFTokenizer",
    "MANIFEST_NAME",
    "Manifest",
    "PREPARE_INDEX",
    "PrepareOptions",
    "RemoteStore",
    "RemoteTokenStore",
    "SUPPORTED_SUFFIXES",
    "ShardInfo",
    "SplitInfo",
    "StoreWriter",
    "TokenSplit",
    "TokenStore",
    "Tokenizer",
    "TokenizerInfo",
    "Verify",
    "cache_usage_bytes",
    "check_compatible",
    "dtype_for_vocab",
    "export_webdataset",
    "find_domain_stores",
    "import_webdataset",
    "is_remote_url",
    "iter_documents",
    "list_sources",
    "load_tokenizer",
    "open_store",
    "parse_domain_args",
    "prepare",
    "prepare_domains",
    "read_manifest",
    "train_bpe_tokenizer",
    "write_manifest",
]
