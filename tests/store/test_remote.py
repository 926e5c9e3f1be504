"""Remote stores: a threaded HTTP server on 127.0.0.1 serves a store directory."""

from __future__ import annotations

import functools
import http.server
import json
import pickle
import shlex
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from autoscale_data.store import StoreWriter, TokenizerInfo, TokenStore
from autoscale_data.store import remote as remote_mod
from autoscale_data.store.remote import RemoteStore, RemoteTokenStore, cache_usage_bytes, open_store

pytestmark = pytest.mark.timeout(30)

TOK = TokenizerInfo(spec="bytes", fingerprint="test-bytes", vocab_size=300, eos_id=256)
SHARD_TOKENS = 1000


def make_store(path: Path, seed: int = 0, n_train: int = 4500, n_val: int = 300) -> TokenStore:
    rng = np.random.default_rng(seed)
    with StoreWriter(path, path.name, TOK, shard_tokens=SHARD_TOKENS) as w:
        w.add_tokens("train", rng.integers(0, 256, n_train), num_documents=3)
        w.add_tokens("val", rng.integers(0, 256, n_val), num_documents=1)
    return TokenStore(path)


class _Handler(http.server.SimpleHTTPRequestHandler):
    corrupt_left: dict[str, int] = {}  # replaced per server
    requests: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet server
        pass

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        data = source.read()
        name = self.path.rsplit("/", 1)[-1]
        self.requests.append(self.path.lstrip("/"))  # "store/file"
        if name.endswith(".bin") and self.corrupt_left.get(name, 0) > 0:
            self.corrupt_left[name] -= 1
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        outputfile.write(data)


@pytest.fixture
def serve() -> Iterator:
    servers: list[http.server.ThreadingHTTPServer] = []
    threads: list[threading.Thread] = []

    def start(directory: Path, corrupt: dict[str, int] | None = None) -> tuple[str, type[_Handler]]:
        handler_cls = type("H", (_Handler,), {"corrupt_left": dict(corrupt or {}), "requests": []})
        handler = functools.partial(handler_cls, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append(server)
        threads.append(thread)
        return f"http://127.0.0.1:{server.server_address[1]}", handler_cls

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
    for thread in threads:
        thread.join(timeout=5)


def test_http_store_reads_same_tokens_on_demand(tmp_path: Path, serve) -> None:
    local = make_store(tmp_path / "srv" / "web")
    base, handler = serve(tmp_path / "srv")
    store = open_store(f"{base}/web", cache_dir=tmp_path / "cache", backoff_s=0)
    assert isinstance(store, RemoteTokenStore) and isinstance(store, TokenStore)
    assert store.num_tokens == local.num_tokens and store.name == "web"
    assert handler.requests == ["web/manifest.json"]  # nothing fetched before it is touched
    np.testing.assert_array_equal(store.train.sequence(0, 100), local.train.sequence(0, 100))
    assert handler.requests == ["web/manifest.json", "web/train-00000.bin"]
    # a range crossing shard boundaries fetches exactly the shards it touches
    np.testing.assert_array_equal(store.train.tokens(900, 2100), local.train.tokens(900, 2100))
    assert sorted(handler.requests[2:]) == ["web/train-00001.bin", "web/train-00002.bin"]
    np.testing.assert_array_equal(store.val.tokens(0, 300), local.val.tokens(0, 300))
    # every shard bit-identical to the source once cached; a second open downloads nothing more
    store.prefetch()
    for shard in local.manifest.splits["train"].shards:
        assert (store.path / shard.file).read_bytes() == (local.path / shard.file).read_bytes()
    n_requests = len(handler.requests)
    again = open_store(f"{base}/web", cache_dir=tmp_path / "cache", backoff_s=0)
    np.testing.assert_array_equal(again.train.tokens(0, local.num_tokens), local.train.tokens(0, local.num_tokens))
    assert handler.requests[n_requests:] == ["web/manifest.json"]
    # the cache directory is itself a plain store
    assert TokenStore(again.path).num_tokens == local.num_tokens


def test_concurrent_first_touches_download_a_shard_once(tmp_path: Path, serve) -> None:
    local = make_store(tmp_path / "srv" / "web")
    base, handler = serve(tmp_path / "srv")
    stores = [open_store(f"{base}/web", cache_dir=tmp_path / "cache", backoff_s=0) for _ in range(4)]
    got: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda st=st: got.append(st.train.sequence(1, 500))) for st in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(np.array_equal(g, local.train.sequence(1, 500)) for g in got)
    assert handler.requests.count("web/train-00000.bin") == 1  # the others waited for the first download


def test_corrupted_download_is_retried(tmp_path: Path, serve) -> None:
    make_store(tmp_path / "srv" / "web")
    base, handler = serve(tmp_path / "srv", corrupt={"train-00001.bin": 2})
    store = open_store(f"{base}/web", cache_dir=tmp_path / "cache", retries=2, backoff_s=0)
    store.train.tokens(1000, 1010)
    assert handler.requests.count("web/train-00001.bin") == 3
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_corruption_after_retries_is_reported_clearly(tmp_path: Path, serve) -> None:
    local = make_store(tmp_path / "srv" / "web")
    base, handler = serve(tmp_path / "srv", corrupt={"train-00001.bin": 100})
    store = open_store(f"{base}/web", cache_dir=tmp_path / "cache", retries=2, backoff_s=0)
    expected = local.manifest.splits["train"].shards[1].sha256
    with pytest.raises(ValueError) as info:
        store.train.tokens(1000, 1010)
    message = str(info.value)
    assert f"{base}/web/train-00001.bin" in message and expected in message and "3 attempts" in message
    assert handler.requests.count("web/train-00001.bin") == 3
    assert not (store.path / "train-00001.bin").exists()
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_missing_store_and_bad_urls(tmp_path: Path, serve) -> None:
    base, _ = serve(tmp_path)
    with pytest.raises(FileNotFoundError, match="404"):
        open_store(f"{base}/nothing", cache_dir=tmp_path / "cache", backoff_s=0)
    with pytest.raises(ValueError, match="placeholder"):
        open_store("pipe:cat /x/manifest.json", cache_dir=tmp_path / "cache")
    with pytest.raises(ValueError, match="cache_limit_bytes"):
        open_store(f"{base}/x", cache_dir=tmp_path / "cache", cache_limit_bytes=0)
    with pytest.raises(ConnectionError, match="2 attempts"):  # nothing listens on port 9 of 127.0.0.1
        open_store("http://127.0.0.1:9/web", cache_dir=tmp_path / "cache", retries=1, backoff_s=0,
                   timeout_s=2)


def test_lru_eviction_by_size_never_evicts_mapped_shards(tmp_path: Path, serve, monkeypatch) -> None:
    monkeypatch.setattr(remote_mod, "_TOUCH_S", 0.0)
    make_store(tmp_path / "srv" / "a", seed=1)
    make_store(tmp_path / "srv" / "b", seed=2)
    base, handler = serve(tmp_path / "srv")
    shard_bytes = SHARD_TOKENS * 2  # uint16
    cache = tmp_path / "cache"
    limit = 3 * shard_bytes

    def open_(name: str) -> TokenStore:
        return open_store(f"{base}/{name}", cache_dir=cache, cache_limit_bytes=limit, backoff_s=0)

    a = open_("a")
    for k in range(3):
        a.train.sequence(k, SHARD_TOKENS)
    assert cache_usage_bytes(cache) == 3 * shard_bytes
    # every cached shard is mapped by `a`: the limit is exceeded with a warning, nothing is deleted
    b = open_("b")
    with pytest.warns(ResourceWarning, match="exceeds cache_limit_bytes"):
        b.train.sequence(0, 10)
    a_dir = a.path
    assert sorted(p.name for p in a_dir.glob("*.bin")) == [f"train-0000{k}.bin" for k in range(3)]
    del a, b
    assert cache_usage_bytes(cache) == 4 * shard_bytes
    # nothing is mapped now; reading a's shard 0 again makes it the most recently used
    a = open_("a")
    a.train.sequence(0, 10)
    del a
    b = open_("b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b.train.sequence(1, SHARD_TOKENS)  # evicts a/1 and a/2 (b/0 is newer, a/0 was just used)
        assert sorted(p.name for p in a_dir.glob("*.bin")) == ["train-00000.bin"]
        assert not (a_dir / "train-00001.bin.sha256").exists()
        assert cache_usage_bytes(cache) <= limit
    # an evicted shard is fetched again when touched
    a = open_("a")
    before = handler.requests.count("a/train-00001.bin")
    a.train.sequence(1, SHARD_TOKENS)
    assert handler.requests.count("a/train-00001.bin") == before + 1
    assert cache_usage_bytes(cache) <= limit


def test_pipe_url_with_cat(tmp_path: Path) -> None:
    local = make_store(tmp_path / "srv" / "web")
    url = "pipe:cat " + shlex.quote(str(tmp_path / "srv" / "web")) + "/{file}"
    store = open_store(url, cache_dir=tmp_path / "cache", prefetch=True)
    np.testing.assert_array_equal(store.train.tokens(0, local.num_tokens), local.train.tokens(0, local.num_tokens))
    bad = "pipe:cat " + shlex.quote(str(tmp_path / "srv")) + "/missing/{file}"
    with pytest.raises(ConnectionError, match="exited with status"):
        open_store(bad, cache_dir=tmp_path / "cache", retries=0)


def test_fsspec_url(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    local = make_store(tmp_path / "srv" / "web")
    import fsspec

    fs = fsspec.filesystem("memory")
    for p in (tmp_path / "srv" / "web").iterdir():
        fs.pipe(f"/stores/web/{p.name}", p.read_bytes())
    store = open_store("memory://stores/web", cache_dir=tmp_path / "cache")
    np.testing.assert_array_equal(store.train.tokens(0, local.num_tokens), local.train.tokens(0, local.num_tokens))


def test_pickle_sends_no_data_and_reopens(tmp_path: Path, serve) -> None:
    local = make_store(tmp_path / "srv" / "web")
    base, handler = serve(tmp_path / "srv")
    store = open_store(f"{base}/web", cache_dir=tmp_path / "cache", prefetch=True)
    blob = pickle.dumps(store)
    assert len(blob) < 10_000
    copy = pickle.loads(blob)
    assert handler.requests.count("web/manifest.json") == 1  # the manifest travels in the pickle
    np.testing.assert_array_equal(copy.train.sequence(3, 500), local.train.sequence(3, 500))


def test_local_paths_open_plain_stores(tmp_path: Path) -> None:
    local = make_store(tmp_path / "web")
    assert type(open_store(tmp_path / "web")) is TokenStore
    assert type(open_store(f"file://{tmp_path / 'web'}")) is TokenStore
    assert open_store(local) is local
    with pytest.raises(ValueError, match="not a remote URL"):
        RemoteStore(str(tmp_path / "web"))


@pytest.mark.timeout(60)
def test_prefetched_remote_store_feeds_the_mixture_dataset(tmp_path: Path, serve) -> None:
    from autoscale_data.dataset import ScaleAwareMixtureDataset

    make_store(tmp_path / "srv" / "web", seed=3)
    make_store(tmp_path / "srv" / "code", seed=4)
    base, _ = serve(tmp_path / "srv")
    remote = {d: open_store(f"{base}/{d}", cache_dir=tmp_path / "cache", prefetch=True) for d in ("web", "code")}
    kwargs = dict(weights={"web": 0.6, "code": 0.4}, budget_tokens=60 * 100, seq_len=100, seed=5)
    local = ScaleAwareMixtureDataset(str(tmp_path / "srv"), **kwargs)
    via_url = ScaleAwareMixtureDataset(remote, **kwargs)
    assert via_url.fingerprint == local.fingerprint
    for a, b in zip(local, via_url, strict=True):
        assert (a["domain"], a["seq_index"]) == (b["domain"], b["seq_index"])
        assert torch_equal(a["input_ids"], b["input_ids"])


@pytest.mark.timeout(60)
def test_mixture_dataset_takes_urls_and_lazy_remote_stores(tmp_path: Path, serve, monkeypatch) -> None:
    from autoscale_data.dataset import ScaleAwareMixtureDataset

    make_store(tmp_path / "srv" / "web", seed=3)
    make_store(tmp_path / "srv" / "code", seed=4)
    base, _ = serve(tmp_path / "srv")
    monkeypatch.setenv("AUTOSCALE_DATA_CACHE", str(tmp_path / "env-cache"))
    lazy = open_store(f"{base}/code", cache_dir=tmp_path / "cache")  # no prefetch: the dataset fetches
    kwargs = dict(weights={"web": 0.6, "code": 0.4}, budget_tokens=60 * 100, seq_len=100, seed=5)
    local = ScaleAwareMixtureDataset(str(tmp_path / "srv"), **kwargs)
    mixed = ScaleAwareMixtureDataset({"web": f"{base}/web", "code": lazy}, **kwargs)
    assert mixed.fingerprint == local.fingerprint
    assert not any((tmp_path / "env-cache").rglob("train-*.bin"))  # nothing fetched before the stream reads
    assert not any((tmp_path / "cache").rglob("train-*.bin"))
    for a, b in zip(local, mixed, strict=True):
        assert (a["seq_index"], torch_equal(a["input_ids"], b["input_ids"])) == (b["seq_index"], True)
    assert any((tmp_path / "env-cache").rglob("train-*.bin"))  # the URL went through the cache


@pytest.mark.timeout(60)
def test_the_first_sample_fetches_only_the_shard_it_reads(tmp_path: Path, serve) -> None:
    from autoscale_data.dataset import ScaleAwareMixtureDataset

    local = make_store(tmp_path / "srv" / "web", seed=3)  # 5 shards
    base, handler = serve(tmp_path / "srv")
    ds = ScaleAwareMixtureDataset({"web": f"{base}/web"}, {"web": 1.0}, budget_tokens=40 * 100, seq_len=100,
                                  seed=1, options=None, verify="checksum")
    assert handler.requests == ["web/manifest.json"]
    first = next(iter(ds))
    shard = first["seq_index"] * 100 // SHARD_TOKENS
    assert handler.requests == ["web/manifest.json", f"web/train-{shard:05d}.bin"]
    assert torch_equal(first["input_ids"], local.train.sequence(first["seq_index"], 100).astype(np.int64))
    assert len(list(ds)) == 40 and 1 < len(handler.requests) - 1 <= 5  # the rest as the stream reaches them


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


def _serve_manifest_with_shard_name(tmp_path: Path, serve, name: str) -> tuple[str, type[_Handler]]:
    """A served store whose first train shard is renamed to ``name`` in the manifest (the file is not)."""
    make_store(tmp_path / "srv" / "web")
    path = tmp_path / "srv" / "web" / "manifest.json"
    obj = json.loads(path.read_text("utf-8"))
    obj["splits"]["train"]["shards"][0]["file"] = name
    path.write_text(json.dumps(obj), "utf-8")
    return serve(tmp_path / "srv")


@pytest.mark.parametrize(("name", "why"), [
    (".", "names a directory"),
    ("..", "names a directory"),
    ("../val-00000.bin", "path separator"),
    ("sub/train-00000.bin", "path separator"),
    ("..\\train-00000.bin", "path separator"),
    ("train\n-00000.bin", "control"),
    ("train\x00.bin", "control"),
    ("train\x7f.bin", "control"),
    ("t" * 300 + ".bin", "304 bytes long"),
    ("é" * 121 + ".bin", "246 bytes long"),  # 125 characters, but 246 bytes of UTF-8
    ("", "non-empty"),
])
def test_remote_manifest_with_unsafe_shard_name_is_refused_before_any_fetch(
        tmp_path: Path, serve, name: str, why: str) -> None:
    base, handler = _serve_manifest_with_shard_name(tmp_path, serve, name)
    with pytest.raises(ValueError, match=why) as info:
        open_store(f"{base}/web", cache_dir=tmp_path / "cache", backoff_s=0)
    assert f"manifest at {base}/web/manifest.json is refused" in str(info.value)
    assert handler.requests == ["web/manifest.json"]  # nothing else was fetched (no directory listing)
    cache = next((tmp_path / "cache").iterdir())
    assert sorted(p.name for p in cache.iterdir()) == ["manifest.json"]


def test_longest_allowed_shard_name_is_cached_and_read(tmp_path: Path, serve) -> None:
    from autoscale_data.store import MAX_FILE_NAME_BYTES

    expected = make_store(tmp_path / "srv" / "web").train.tokens(0, 1000).copy()
    name = "t" * (MAX_FILE_NAME_BYTES - 4) + ".bin"
    (tmp_path / "srv" / "web" / "train-00000.bin").rename(tmp_path / "srv" / "web" / name)
    base, _ = serve(tmp_path / "srv")
    path = tmp_path / "srv" / "web" / "manifest.json"
    obj = json.loads(path.read_text("utf-8"))
    obj["splits"]["train"]["shards"][0]["file"] = name
    path.write_text(json.dumps(obj), "utf-8")
    store = open_store(f"{base}/web", cache_dir=tmp_path / "cache", backoff_s=0)
    assert np.array_equal(store.train.tokens(0, 1000), expected)
    assert (store.path / name).is_file() and (store.path / (name + ".sha256")).is_file()


def test_local_manifest_with_unsafe_shard_name_is_refused(tmp_path: Path) -> None:
    make_store(tmp_path / "web")
    path = tmp_path / "web" / "manifest.json"
    obj = json.loads(path.read_text("utf-8"))
    obj["splits"]["val"]["shards"][0]["file"] = ".."
    path.write_text(json.dumps(obj), "utf-8")
    with pytest.raises(ValueError, match="'..' names a directory"):
        TokenStore(tmp_path / "web")


def test_remote_manifest_of_data_read_in_place_is_refused(tmp_path: Path, serve) -> None:
    make_store(tmp_path / "srv" / "web")
    path = tmp_path / "srv" / "web" / "manifest.json"
    obj = json.loads(path.read_text("utf-8"))
    obj["splits"]["train"]["data_dir"] = "/etc"
    path.write_text(json.dumps(obj), "utf-8")
    base, handler = serve(tmp_path / "srv")
    with pytest.raises(ValueError, match="read in place"):
        open_store(f"{base}/web", cache_dir=tmp_path / "cache", backoff_s=0)
    assert handler.requests == ["web/manifest.json"]
