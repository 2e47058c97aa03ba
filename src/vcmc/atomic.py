"""The one way every file is written: to a temporary file beside it, then renamed over it.

A reader, or a run started again after a crash, a kill or a full disk, sees the old file or the new one,
never a truncated one. The temporary file is in the target's own folder (a rename is atomic only within
one file system), flushed and fsync'ed before the rename, removed if anything fails, and gets the
permissions a plainly created file would have (``mkstemp`` makes it 0600).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_json", "atomic_write_text"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path, mode: int | None = None) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; it replaces ``path`` when the block succeeds.

    The suffix of ``path`` is kept, so writers that choose a format from it (pandas, NetCDF) behave as
    for the real name. ``mode``: the file's permissions (a secret's 0o600, which it has from its creation on);
    by default those of a plainly created file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_bytes(path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path, text: str, mode: int | None = None) -> Path:
    with atomic_path(path, mode) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_write_json(path, obj, **dump_kwargs) -> Path:
    """``json.dump`` of ``obj`` (strict JSON: no NaN) written atomically."""
    return atomic_write_text(path, json.dumps(obj, allow_nan=False, **dump_kwargs))
