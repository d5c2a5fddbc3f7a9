"""Atomic file writes: a crash or a failed write never leaves a half-written file, and a
write never replaces anything but a regular file."""
from __future__ import annotations

import os
import stat
import tempfile

__all__ = ["atomic_write_bytes", "writable_target"]

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def writable_target(path: str | os.PathLike) -> str:
    """The real path that a write to ``path`` replaces (a symbolic link is followed, so the
    link stays); ``OSError`` with one line when it exists and is not a regular file, such as
    ``/dev/null``, a FIFO or a folder."""
    real = os.path.realpath(os.fspath(path))
    try:
        mode = os.stat(real).st_mode
    except OSError:  # not there (or not reachable): the write itself says why it fails
        return real
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise OSError(f"will not write {os.fspath(path)}: it is {kind}, not a regular file")
    return real


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync, then rename over it.

    The file gets the usual permissions (0666 less the umask), not mkstemp's 0600.  A
    target that exists and is not a regular file is refused (see :func:`writable_target`).
    """
    path = writable_target(path)
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
