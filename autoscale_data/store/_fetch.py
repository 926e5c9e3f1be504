"""Byte transport for remote stores: http(s) via urllib, ``pipe:`` shell commands, fsspec otherwise.

Every transport streams into an open binary file handle and returns the number of bytes written;
retries, checksums and the cache live in :mod:`autoscale_data.store.remote`.
"""

from __future__ import annotations

import os
import select
import shlex
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["PERMANENT_ERRORS", "is_remote_url", "join_url", "stream_to"]

_CHUNK = 1 << 20
_LOCAL_SCHEMES = ("", "file")
# errors that retrying cannot fix (a missing file, a malformed URL, a missing optional package)
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, ImportError, ValueError)


def _scheme(url: str) -> str:
    if url.startswith("pipe:"):
        return "pipe"
    scheme = urllib.parse.urlsplit(url).scheme
    # a Windows drive letter ("C:\\data") is not a scheme
    return "" if len(scheme) == 1 else scheme.lower()


def is_remote_url(path_or_url: object) -> bool:
    """True for ``http(s)://``, ``pipe:`` and other ``scheme://`` URLs; False for local paths and
    ``file://``."""
    if not isinstance(path_or_url, str):
        return False
    return _scheme(path_or_url) not in _LOCAL_SCHEMES


def join_url(base: str, name: str) -> str:
    """The URL of file ``name`` inside the store at ``base``.

    ``pipe:`` URLs must contain ``{file}``, replaced by the (shell-quoted) file name, e.g.
    ``pipe:aws s3 cp s3://bucket/web/{file} -``. Other URLs get ``/name`` appended.
    """
    if _scheme(base) == "pipe":
        if "{file}" not in base:
            raise ValueError(f"pipe: store URL {base!r} must contain the placeholder {{file}} "
                             "(the command is run once per file and must write that file to stdout)")
        return base.replace("{file}", shlex.quote(name))
    return base.rstrip("/") + "/" + urllib.parse.quote(name)


def _copy(read: Callable[[], bytes], out: BinaryIO, on_chunk: Callable[[bytes], None]) -> int:
    """Write the chunks ``read()`` returns to ``out`` until an empty one; the number of bytes written."""
    total = 0
    while chunk := read():
        out.write(chunk)
        on_chunk(chunk)
        total += len(chunk)
    return total


def _stream_http(url: str, out: BinaryIO, timeout_s: float, on_chunk: Callable[[bytes], None]) -> int:
    try:
        response = urllib.request.urlopen(url, timeout=timeout_s)  # noqa: S310 (scheme checked by caller)
    except urllib.error.HTTPError as exc:
        if exc.code in (403, 404, 410):
            raise FileNotFoundError(f"{url} answered HTTP {exc.code} {exc.reason}") from exc
        raise ConnectionError(f"{url} answered HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise ConnectionError(f"cannot reach {url}: {exc.reason}") from exc
    with response:
        return _copy(lambda: response.read(_CHUNK), out, on_chunk)


def _stream_pipe(url: str, out: BinaryIO, timeout_s: float, on_chunk: Callable[[bytes], None]) -> int:
    command = url[len("pipe:"):]
    proc = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE,  # noqa: S602 (pipe: is a shell)
                            stderr=subprocess.PIPE)
    stdout, stderr = proc.stdout, proc.stderr
    if stdout is None or stderr is None:  # pragma: no cover - PIPE always sets them
        raise RuntimeError("subprocess pipes were not created")
    fd = stdout.fileno()

    def read() -> bytes:
        if not select.select([fd], [], [], timeout_s)[0]:
            raise TimeoutError(f"{url!r} wrote nothing for {timeout_s:g} s")
        return os.read(fd, _CHUNK)

    try:
        total = _copy(read, out, on_chunk)
        _, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        message = err.decode("utf-8", "replace").strip()[-500:]
        raise ConnectionError(f"{url!r} exited with status {proc.returncode}: {message}")
    return total


def _stream_fsspec(url: str, out: BinaryIO, timeout_s: float, on_chunk: Callable[[bytes], None]) -> int:
    try:
        import fsspec
    except ImportError as exc:
        raise ImportError(f"reading {url!r} needs fsspec: pip install 'autoscale-data[formats]' "
                          "(and the fsspec backend for its scheme, e.g. s3fs or gcsfs)") from exc
    with fsspec.open(url, "rb") as fh:
        return _copy(lambda: fh.read(_CHUNK), out, on_chunk)


def stream_to(url: str, out: BinaryIO, *, timeout_s: float, on_chunk: Callable[[bytes], None]) -> int:
    """Write the bytes at ``url`` to ``out`` with the transport of its scheme, calling ``on_chunk`` on each
    block; returns the byte count."""
    scheme = _scheme(url)
    if scheme in _LOCAL_SCHEMES:
        raise ValueError(f"{url!r} is a local path, not a remote URL")
    stream = {"http": _stream_http, "https": _stream_http, "pipe": _stream_pipe}.get(scheme, _stream_fsspec)
    return stream(url, out, timeout_s, on_chunk)
