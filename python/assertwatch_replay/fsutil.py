"""Small file-system functions shared by the recorder, the supervisor and the worker (stdlib only)."""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Callable, Tuple

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def fsync_dir(path: str) -> None:
    """Make a rename or unlink inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: str,
    write: Callable[[object], None],
    mode: int = 0o640,
    fsync: bool = True,
    sync_dir: bool = True,
) -> Tuple[int, str]:
    """Write a file so that readers see either the old content or all of the new one.

    ``write`` receives a binary file object. The data goes to ``<path>.tmp-<pid>``, is flushed and
    (with ``fsync``) fsynced, then renamed over ``path``; with ``sync_dir`` the directory is fsynced
    last. Returns (bytes, sha256 hex) of what was written, hashed on the way out so the file is
    never read back. The rename alone already protects against the writing process dying; the
    fsyncs also protect against a kernel crash or power loss.
    """
    directory = os.path.dirname(path) or "."
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as raw:
            sink = _HashingWriter(raw)
            write(sink)
            raw.flush()
            if fsync:
                os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync and sync_dir:
        fsync_dir(directory)
    return sink.count, sink.digest.hexdigest()


def atomic_write_bytes(
    path: str, data: bytes, mode: int = 0o640, fsync: bool = True, sync_dir: bool = True
) -> Tuple[int, str]:
    return atomic_write(path, lambda f: f.write(data), mode, fsync=fsync, sync_dir=sync_dir)


class _HashingWriter:
    """A write-only file object that hashes and counts what passes through it."""

    def __init__(self, raw):
        self._raw = raw
        self.digest = hashlib.sha256()
        self.count = 0

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        self.count += len(view)
        return self._raw.write(view)

    def flush(self) -> None:
        self._raw.flush()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.count

    def close(self) -> None:  # the raw file is closed by atomic_write
        pass

    @property
    def closed(self) -> bool:
        return False


def open_regular(path: str) -> int:
    """Open a file for reading without following a symlink; refuse anything but a regular file."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def hash_file(path: str, chunk: int = 1 << 20) -> Tuple[int, str]:
    """(bytes, sha256 hex) of a regular file, read without following symlinks."""
    fd = open_regular(path)
    digest = hashlib.sha256()
    total = 0
    try:
        while True:
            block = os.read(fd, chunk)
            if not block:
                break
            digest.update(block)
            total += len(block)
    finally:
        os.close(fd)
    return total, digest.hexdigest()
